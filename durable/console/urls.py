"""The operator console's run screens (the overview, the runs list, a run's history and its actions) and API tokens."""
from django.urls import path, register_converter

from durable.console import tokens, views
from durable.console.actions import ACTIONS
from durable.console.converters import SeqConverter

register_converter(SeqConverter, "seq")

app_name = "durable"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("runs/", views.runs, name="runs"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<uuid:run_id>/checkpoints/<seq:seq>/", views.checkpoint_state, name="checkpoint-state"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.revoke, name="token-revoke"),
    *(path(f"runs/<uuid:run_id>/{name}/", views.act, {"action": name}, name=f"run-{name}") for name in ACTIONS),
]
