"""The standalone project's root URLs: durable's console and API at the root, the admin, the Prometheus metrics."""
from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from durable.exposition import metrics_page
from durable.login_throttle import throttle_logins

# The admin's login goes through the same throttle as the console's and the API's.
admin.site.login = throttle_logins(admin.site.login, source="admin")  # type: ignore[method-assign]  # on this one site

urlpatterns = [
    path("", include("durable.urls")),  # a host project mounts it under any prefix: path("ops/", include(...))
    path("admin/", admin.site.urls),
    path("metrics", metrics_page, name="metrics"),  # where Prometheus looks by default
    # Browsers ask for /favicon.ico whatever the page links; the console's icon is an SVG among its static files.
    path("favicon.ico", RedirectView.as_view(url=static("durable/favicon.svg"), permanent=True)),
]

handler400 = "durable.api.errors.bad_request"  # a body too big or too many fields: says which limit
handler404 = "durable.api.errors.not_found"  # JSON under the API's prefix, the HTML page elsewhere
handler500 = "durable.unavailable.server_error"  # the database away: 503 with Retry-After, else Django's 500
