"""The standalone project's root URLs: durable's console and API at the root, the admin, the Prometheus metrics."""
from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from durable.exposition import metrics_page

urlpatterns = [
    path("", include("durable.urls")),  # a host project mounts it under any prefix: path("ops/", include(...))
    path("admin/", admin.site.urls),
    path("metrics", metrics_page, name="metrics"),  # where Prometheus looks by default
    # Browsers ask for /favicon.ico whatever a page links (the admin's and the browsable API's link none):
    # the project's own icon, static/favicon.ico, which a browser without SVG icons takes on the console too.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.ico"), permanent=True)),
]

handler400 = "durable.api.errors.bad_request"  # a body too big or too many fields: says which limit
handler404 = "durable.api.errors.not_found"  # JSON under the API's prefix, the HTML page elsewhere
handler500 = "durable.unavailable.server_error"  # the database away: 503 with Retry-After, else Django's 500
