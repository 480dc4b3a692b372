from rest_framework.routers import DefaultRouter

from durable.api.events import EventViewSet
from durable.api.schedules import ScheduleViewSet
from durable.api.views import RunViewSet
from durable.mounts import api_patterns

app_name = "api"
router = DefaultRouter()
router.register("runs", RunViewSet, basename="run")
router.register("events", EventViewSet, basename="event")
router.register("schedules", ScheduleViewSet, basename="schedule")
urlpatterns = router.urls + api_patterns()  # the apps' routes (durable/mounts.py): approvals, operations
