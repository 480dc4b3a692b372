"""durable's mountable URLs: the console, the audit trail, the API and its schema, and what the apps built on
the core mount beside them (durable/mounts.py: approvals, reconciliation).

A host project mounts them under any prefix, `path("ops/", include("durable.urls"))`; every page
and redirect reverses its URLs by name, so nothing assumes the root.
"""
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from durable.mounts import mounted

urlpatterns = [
    path("", include("durable.console.urls")),
    *(path(where.prefix, include(where.urls)) for where in mounted()),
    path("audit/", include("durable.console.audit_urls")),
    path("api/", include("durable.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/auth/", include("durable.api.auth_urls")),
]
