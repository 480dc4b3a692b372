from rest_framework.routers import DefaultRouter

from approvals.api.urls import urlpatterns as approval_urls
from durable.api.views import RunViewSet
from reconciliation.api.urls import urlpatterns as reconciliation_urls

app_name = "api"
router = DefaultRouter()
router.register("runs", RunViewSet, basename="run")
urlpatterns = router.urls + reconciliation_urls + approval_urls
