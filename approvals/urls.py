from django.urls import path

from approvals import views

app_name = "approvals"
urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("<uuid:request_id>/", views.detail, name="detail"),
    path("<uuid:request_id>/decide/", views.decide, name="decide"),
]
