"""The operator console's run screens (the overview, the runs list, a run's history and its actions) and API tokens."""
from django.contrib.auth import views as auth_views
from django.urls import path, register_converter
from django.views.generic import RedirectView

from durable import bulk as bulk_actions
from durable.console import bulk, limits, pauses, preferences, schedules, tokens, views
from durable.console.actions import ACTIONS
from durable.console.converters import RowIdConverter, SeqConverter
from durable.console.login import login
from durable.notifications.views import preferences as notification_preferences

register_converter(SeqConverter, "seq")
register_converter(RowIdConverter, "row_id")

app_name = "durable"
urlpatterns = [
    path("", views.overview, name="overview"),
    # The console's own login, like the admin's: a host project may use it (LOGIN_URL = "durable:login") or its own.
    path("accounts/login/", login, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="durable:login"), name="logout"),
    # The address people guess under a prefix (/ops/login/) leads to the login, keeping ?next=. Unnamed: nothing links
    # to it. Logging out has no such guess: it is a POST (the header's Log out button), never a page to open.
    path("login/", RedirectView.as_view(pattern_name="durable:login", query_string=True)),
    path("search/", views.search, name="search"),
    path("runs/", views.runs, name="runs"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<uuid:run_id>/checkpoints/<seq:seq>/", views.checkpoint_state, name="checkpoint-state"),
    path("limits/", limits.limits, name="limits"),
    path("paused/", pauses.paused, name="paused"),
    path("paused/<row_id:switch_id>/resume/", pauses.resume, name="paused-resume"),
    path("schedules/", schedules.schedules, name="schedules"),
    path("schedules/new/", schedules.schedule_new, name="schedule-new"),
    path("schedules/<uuid:schedule_id>/", schedules.schedule_detail, name="schedule-detail"),
    path("schedules/<uuid:schedule_id>/edit/", schedules.schedule_edit, name="schedule-edit"),
    path("schedules/<uuid:schedule_id>/pause/", schedules.schedule_pause, {"paused": True}, name="schedule-pause"),
    path("schedules/<uuid:schedule_id>/resume/", schedules.schedule_pause, {"paused": False},
         name="schedule-resume"),
    path("schedules/<uuid:schedule_id>/delete/", schedules.schedule_delete, name="schedule-delete"),
    path("preferences/", preferences.preferences, name="preferences"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<row_id:token_id>/revoke/", tokens.revoke, name="token-revoke"),
    *(path(f"runs/bulk/{name}/", bulk.bulk_action, {"action": name}, name=f"bulk-{name}")
      for name in bulk_actions.BULK_ACTIONS),
    path("notifications/", notification_preferences, name="notifications"),
    *(path(f"runs/<uuid:run_id>/{name}/", views.act, {"action": name}, name=f"run-{name}") for name in ACTIONS),
]
