"""A host project's URLconf in miniature: durable mounted under /ops/, nothing at the root."""
from django.urls import include, path

urlpatterns = [path("ops/", include("durable.urls"))]

handler400 = "durable.api.errors.bad_request"
handler404 = "durable.api.errors.not_found"
