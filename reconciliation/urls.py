from django.urls import path

from reconciliation import views

app_name = "reconciliation"
urlpatterns = [
    path("", views.operations, name="operations"),
    path("<str:operation_id>/", views.operation, name="operation"),
    path("<str:operation_id>/lookup/", views.lookup, name="lookup"),
    path("<str:operation_id>/resolve/", views.resolve, name="resolve"),
]
