from django.urls import path

from durable.console import views

app_name = "durable"
urlpatterns = [
    path("", views.runs, name="runs"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run-detail"),
]
