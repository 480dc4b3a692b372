"""Helpers for the console's run screens: logged-in clients and runs put in a given status."""
from __future__ import annotations

from django.test import Client
from django.urls import reverse

from durable import services
from durable.models import Run

HTMX = {"HTTP_HX_REQUEST": "true"}
VIEW = "durable.view_run"


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def run_in(status, *, workflow: str = "test-trivial", business_key: str = "k", version: int | None = None,
           **fields) -> Run:
    """A run started through the service, then put straight into `status` (and any other fields)."""
    run, _ = services.start_run(workflow=workflow, input={}, business_key=business_key, version=version, allow_older_version=True)
    Run.objects.filter(id=run.id).update(status=status, **fields)
    run.refresh_from_db()
    return run


def runs_url() -> str:
    return reverse("durable:runs")


def detail_url(run: Run) -> str:
    return reverse("durable:run-detail", args=[run.id])


def action_url(run: Run, action: str) -> str:
    return reverse(f"durable:run-{action}", args=[run.id])
