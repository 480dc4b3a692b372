"""The host's URLs: its own home page, its admin, and durable's console and API under /ops/."""
from django.contrib import admin
from django.urls import include, path
from shop.views import home

from durable.exposition import metrics_page

urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    path("ops/", include("durable.urls")),  # the console, approvals, reconciliation, audit and the API
    path("metrics", metrics_page, name="metrics"),  # Prometheus; DURABLE_METRICS_TOKEN or a logged-in viewer
]
