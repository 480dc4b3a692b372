from rest_framework.routers import DefaultRouter

from durable.api.views import RunViewSet

app_name = "api"
router = DefaultRouter()
router.register("runs", RunViewSet, basename="run")
urlpatterns = router.urls
