"""The browsable API's login and logout, in DRF's namespace; django-axes locks it out like every login form."""
from django.contrib.auth import views
from django.urls import path

app_name = "rest_framework"
urlpatterns = [
    path("login/", views.LoginView.as_view(template_name="rest_framework/login.html"), name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
]
