from django.urls import path
from rest_framework.routers import DefaultRouter

from durable.api.events import EventViewSet
from durable.api.pauses import PauseSwitchViewSet
from durable.api.schedules import ScheduleViewSet
from durable.api.stream import RunStreamView
from durable.api.views import RunViewSet
from durable.mounts import api_patterns

app_name = "api"
router = DefaultRouter()
router.register("runs", RunViewSet, basename="run")
router.register("events", EventViewSet, basename="event")
router.register("pause-switches", PauseSwitchViewSet, basename="pause-switch")
router.register("schedules", ScheduleViewSet, basename="schedule")
urlpatterns = [
    path("runs/<uuid:pk>/stream/", RunStreamView.as_view(), name="run-stream"),  # SSE: a view of its own
    *router.urls,
    *api_patterns(),  # the apps' routes (durable/mounts.py): approvals, operations
]
