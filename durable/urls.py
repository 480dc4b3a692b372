"""URLs: the console, the API and its schema, the admin, the Prometheus metrics."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from durable.console.login import login
from durable.login_throttle import throttle_logins

from durable.exposition import metrics_page

# The admin's login goes through the same throttle as the console's and the API's.
admin.site.login = throttle_logins(admin.site.login, source="admin")  # type: ignore[method-assign]

urlpatterns = [
    path("", include("durable.console.urls")),
    path("approvals/", include("approvals.urls")),
    path("reconciliation/", include("reconciliation.urls")),
    path("audit/", include("durable.console.audit_urls")),
    path("accounts/login/", login, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include("durable.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/auth/", include("durable.api.auth_urls")),
    path("admin/", admin.site.urls),
    path("metrics", metrics_page, name="metrics"),  # where Prometheus looks by default
]

handler400 = "durable.api.errors.bad_request"  # a body too big or too many fields: says which limit
handler404 = "durable.api.errors.not_found"  # JSON under /api/, the HTML page elsewhere
handler500 = "durable.unavailable.server_error"  # the database away: 503 with Retry-After, else Django's 500
