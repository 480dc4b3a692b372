"""durable's mountable URLs: the console, approvals, reconciliation, the audit trail, the API and its schema.

A host project mounts them under any prefix, `path("ops/", include("durable.urls"))`; every page
and redirect reverses its URLs by name, so nothing assumes the root.
"""
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("", include("durable.console.urls")),
    path("approvals/", include("approvals.urls")),
    path("reconciliation/", include("reconciliation.urls")),
    path("audit/", include("durable.console.audit_urls")),
    path("api/", include("durable.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/auth/", include("durable.api.auth_urls")),
]
