from django.urls import path

from durable.console import audit

# Append-only: the trail is read and exported here; no URL edits or deletes an action.
app_name = "audit"
urlpatterns = [
    path("", audit.trail, name="trail"),
    path("export.csv", audit.export, name="export"),
]
