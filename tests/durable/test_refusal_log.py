"""Every 403 writes one security-log row saying who, what and why, whatever refused it (durable.security).

tests/test_roles_matrix.py walks every endpoint and form as every role; these are the refusals outside it:
the metrics page, a failed CSRF check, the Django admin, and a refusal the refusing code recorded itself.
"""
import pytest
from django.http import HttpResponse
from django.test import Client, RequestFactory

from durable.middleware import RefusalLogMiddleware
from durable.models import SecurityEvent
from durable.security import record_refusal
from tests.conftest import make_user
from tests.endpoints import assert_one_refusal_logged, refusals_since, security_log_mark

pytestmark = pytest.mark.django_db


def test_a_wrong_metrics_token_is_logged_with_the_address(settings):
    settings.DURABLE_METRICS_TOKEN = "the-scrape-token"
    mark = security_log_mark()
    answer = Client(REMOTE_ADDR="203.0.113.9").get("/metrics", HTTP_AUTHORIZATION="Bearer guessed")
    assert answer.status_code == 403
    assert_one_refusal_logged(mark, username="", path="/metrics", says="wrong metrics token")
    assert refusals_since(mark)[0].address == "203.0.113.9"


def test_a_user_without_view_run_refused_the_metrics_is_named():
    client = Client()
    client.force_login(make_user("nosy"))
    mark = security_log_mark()
    assert client.get("/metrics").status_code == 403
    assert_one_refusal_logged(mark, username="nosy", path="/metrics", says="needs the durable.view_run permission")


def test_a_failed_csrf_check_is_logged_with_djangos_reason():
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("operator", "durable.view_run"))
    mark = security_log_mark()
    assert client.post("/preferences/", {"time_zone": "Europe/Paris"}).status_code == 403
    assert_one_refusal_logged(mark, username="operator", path="/preferences/", action="csrf", says="CSRF")


def test_the_admin_refusing_a_staff_user_is_logged():
    staff = make_user("staff-without-rights")
    staff.is_staff = True
    staff.save()
    client = Client()
    client.force_login(staff)
    mark = security_log_mark()
    assert client.get("/admin/durable/run/").status_code == 403
    assert_one_refusal_logged(mark, username="staff-without-rights", path="/admin/durable/run/",
                              says="lacks the model permission")


def test_a_refusal_the_refusing_code_recorded_itself_is_not_written_twice():
    def view(request):
        record_refusal(kind=SecurityEvent.Kind.DECISION_REFUSED, source="console", request=request,
                       reason="recorded where it was refused", action="approve")
        return HttpResponse(status=403)

    request = RequestFactory().post("/somewhere/")
    mark = security_log_mark()
    assert RefusalLogMiddleware(view)(request).status_code == 403
    assert [row.kind for row in refusals_since(mark)] == ["decision_refused"]
