"""The browsable API's login and logout, in DRF's namespace, with the one login throttle."""
from django.contrib.auth import views
from django.urls import path

from durable.login_throttle import throttle_logins

app_name = "rest_framework"
urlpatterns = [
    path("login/", throttle_logins(views.LoginView.as_view(template_name="rest_framework/login.html"), source="api"),
         name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
]
