from django.urls import path, register_converter

from durable.console.converters import OperationIdConverter
from reconciliation import views

register_converter(OperationIdConverter, "operation_id")

app_name = "reconciliation"
urlpatterns = [
    path("", views.operations, name="operations"),
    path("<operation_id:operation_id>/", views.operation, name="operation"),
    path("<operation_id:operation_id>/lookup/", views.lookup, name="lookup"),
    path("<operation_id:operation_id>/resolve/", views.resolve, name="resolve"),
]
