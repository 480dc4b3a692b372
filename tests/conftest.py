"""Shared fixtures: real users with real permissions, the sandbox over HTTP, real workers."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

import tests.durable.author_workflows  # noqa: F401  registers the test workflows in this process
import tests.durable.cost_workflows  # noqa: F401
import tests.durable.deploys.v1  # noqa: F401
import tests.durable.deploys.v2  # noqa: F401
import tests.durable.limit_workflows  # noqa: F401
import tests.durable.stream_workflows  # noqa: F401
import tests.durable.version_workflows  # noqa: F401
import tests.durable.visit_workflows  # noqa: F401
import tests.durable.wait_workflows  # noqa: F401
import tests.durable.workflows  # noqa: F401
from durable.tools.processes import WorkerProcess
from durable.tools.sandbox import SandboxServer

TEST_WORKFLOW_MODULES = ["durable.tools.demo.claims_agent", "durable.tools.demo.support_agent", "tests.durable.workflows",
                         "tests.durable.version_workflows", "tests.durable.visit_workflows",
                         "tests.durable.wait_workflows", "tests.durable.cost_workflows",
                         "tests.durable.limit_workflows", "tests.durable.stream_workflows"]
OUTPUT_DIR = Path(os.environ.get("DURABLE_TEST_OUTPUT", settings.BASE_DIR / "test-output"))
# The test client, the live server and schemathesis's WSGI app (built as test modules are collected) speak
# plain HTTP; production redirects it to HTTPS.
settings.SECURE_SSL_REDIRECT = False
# The public test kit's fixtures (durable_kit), as a host project enables them (docs/testing.md).
pytest_plugins = ["durable.testing"]


@pytest.fixture(scope="session", autouse=True)
def _isolated_queue() -> None:
    # Each test session gets its own queue, so messages left by an earlier run are never consumed.
    settings.CELERY_TASK_DEFAULT_QUEUE = f"durable-test-{uuid.uuid4().hex[:8]}"
    settings.DURABLE_WORKFLOW_MODULES = TEST_WORKFLOW_MODULES


@pytest.fixture(scope="session")
def sandbox_server():
    with SandboxServer(hang_seconds=2.0) as server:
        yield server


@pytest.fixture
def sandbox(sandbox_server, settings):
    sandbox_server.state.reset()
    settings.DURABLE_SANDBOX_URL = sandbox_server.url
    return sandbox_server


@pytest.fixture
def demo(sandbox, settings):
    """The claims-agent with its deterministic planner, against the sandbox over real HTTP."""
    settings.DURABLE_LLM_BASE_URL = ""
    settings.DURABLE_HTTP_TIMEOUT_SECONDS = 1.0  # the sandbox hangs 2 s: the client gives up first; 1 s, not less: a loaded CI machine once took over 0.3 s to answer a call
    return sandbox


def make_user(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw-" + username)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return User.objects.get(pk=user.pk)  # fresh: permission cache empty


def user_with_roles(username: str, *roles: str, password: str | None = None) -> User:
    """A user holding role groups (durable/roles.py), created again if a flush removed them."""
    from django.contrib.auth.models import Group

    from durable.roles import ensure_roles

    ensure_roles()
    user = User.objects.create_user(username, password=password or "pw-" + username)
    user.groups.set(Group.objects.filter(name__in=roles))
    return User.objects.get(pk=user.pk)


def api_token(user: User, name: str = "test client") -> str:
    """A new API token for `user`, made through the service the console and the command call."""
    from durable.tokens import create_token

    return create_token(user=user, name=name, source="test")[1]


ALL_RUN_PERMS = ("durable.view_run", "durable.start_run", "durable.cancel_run", "durable.retry_run", "durable.resume_run")


def assert_unauthenticated(response, detail: str = "Authentication credentials were not provided.") -> None:
    """An API call without valid credentials: 401 naming the scheme to use, never 403. DRF answers 401 when its
    first authenticator (ours, durable.api.authentication.ApiTokenAuthentication) names a WWW-Authenticate
    scheme, and it does: "Token"."""
    assert (response.status_code, response["WWW-Authenticate"]) == (401, "Token")
    assert response.json()["detail"] == detail


@pytest.fixture
def operator(db) -> User:
    return make_user("operator", *ALL_RUN_PERMS)


def client_for(user: User) -> APIClient:
    """An API client acting as `user`, past authentication (its permissions still apply)."""
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def api(operator) -> APIClient:
    return client_for(operator)


@pytest.fixture
def calls_file(tmp_path) -> str:
    return str(tmp_path / "calls.txt")


@pytest.fixture(scope="session")
def worker_log_dir() -> Path:
    path = OUTPUT_DIR / "workers"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def session_worker(django_db_setup, django_db_blocker, sandbox_server, worker_log_dir):
    """A real Celery worker process shared by the integration tests that don't kill it."""
    settings.DURABLE_SANDBOX_URL = sandbox_server.url
    with django_db_blocker.unblock():
        # It lives through every test: its sweeper thread would re-send other tests' runs to its queue.
        worker = WorkerProcess(env={"DURABLE_LEASE_SECONDS": "5", "DURABLE_WORKER_SWEEPS": "false"},
                               log_path=worker_log_dir / f"session-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.log")
        worker.start()
    yield worker
    worker.stop()


# Workflows that run Pydantic AI agents: registered in this process by the test modules that import them, and in the
# workers of the tests that ask for them (`agent_workers`) rather than in every worker: importing Pydantic AI adds
# seconds to a process's start.
AGENT_WORKFLOW_MODULES = ["durable.tools.demo.support_agent_pydantic_ai", "tests.durable.agents.agent_workflows"]


@pytest.fixture
def agent_workers(settings):
    """The workers this test starts also load the workflows that run Pydantic AI agents."""
    settings.DURABLE_WORKFLOW_MODULES = [*TEST_WORKFLOW_MODULES, *AGENT_WORKFLOW_MODULES]


@pytest.fixture
def openai_agent_workers(settings):
    """The workers this test starts also load the support agent's OpenAI Agents SDK twin (and only it: the SDK
    takes seconds to import, which the Pydantic AI agents' workers need not pay)."""
    settings.DURABLE_WORKFLOW_MODULES = [*TEST_WORKFLOW_MODULES, "durable.tools.demo.support_agent_openai_agents"]


@pytest.fixture
def own_queue(settings):
    """A queue of this test's own, so only the workers this test starts take its runs."""
    settings.CELERY_TASK_DEFAULT_QUEUE = f"durable-test-{uuid.uuid4().hex[:8]}"
    return settings.CELERY_TASK_DEFAULT_QUEUE


UNCONSUMED_QUEUE = f"durable-test-unconsumed-{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def _unconsumed_queue(request, settings):
    """Tests that advance runs in this process send their messages where no worker listens:
    the session's worker must never race them for a run's lease."""
    if request.node.get_closest_marker("worker") is None:
        settings.CELERY_TASK_DEFAULT_QUEUE = UNCONSUMED_QUEUE


@pytest.fixture(scope="session", autouse=True)
def _drop_unconsumed_queue():
    yield
    from durable.runtime.dispatch import drop_queue

    drop_queue(UNCONSUMED_QUEUE)


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """API throttles count in the cache; each test starts with none spent (login lockout is in the database)."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def sent(monkeypatch):
    """Run ids handed to the broker, captured instead of sent (the database stays real)."""
    from durable.runtime import dispatch

    ids = []
    monkeypatch.setattr(dispatch, "enqueue", lambda run_id, **kw: ids.append(run_id))
    return ids


@pytest.fixture(scope="session", autouse=True)
def writer_closed_before_the_database_is_dropped(django_db_setup):
    """The process's writer (durable/store/batched.py) keeps its own connection while it has writes: closed at the
    session's end, before the test database is dropped (Postgres refuses to drop a database in use)."""
    yield
    from durable.store import batched

    batched.close()
