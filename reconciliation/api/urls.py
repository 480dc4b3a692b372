from rest_framework.routers import SimpleRouter

from reconciliation.api.views import OperationViewSet

router = SimpleRouter()
router.register("operations", OperationViewSet, basename="operation")
urlpatterns = router.urls
