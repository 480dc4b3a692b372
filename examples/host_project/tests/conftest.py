"""The host project's fixtures: its users through its own model, the shop's service, and a real worker of its own
Celery app (`celery -A host worker`) on a queue of this session's own."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from tests.shop_service import ShopService, ShopState

# durable's test kit: the durable_kit fixture runs the shop's workflow in a test's own process (tests/test_kit.py).
pytest_plugins = ["durable.testing"]

PROJECT = Path(__file__).resolve().parent.parent
QUEUE = f"shop-test-{uuid.uuid4().hex[:8]}"  # only this session's worker takes this session's runs
LOGS = Path(os.environ.get("HOST_TEST_LOGS") or settings.VAR_DIR / "test-logs")


def project_env(**extra: str) -> dict[str, str]:
    """The environment of a process of this project (manage.py, the worker)."""
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "host.settings", "PYTHONPATH": str(PROJECT),
            "SHOP_QUEUE": QUEUE, "HOST_VAR_DIR": str(settings.VAR_DIR), **extra}


def manage(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python manage.py ...` in this project, as a person would type it; fails loudly."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=env or project_env(),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def database_url(db: dict) -> str:
    """A URL for the database this test session uses (the test database), for the worker's DATABASE_URL."""
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return (f"postgres://{quote(db['USER'] or '')}:{quote(str(db['PASSWORD'] or ''))}@{db['HOST'] or 'localhost'}:"
            f"{db['PORT'] or 5432}/{db['NAME']}")


@pytest.fixture(scope="session", autouse=True)
def _session_queue() -> None:
    settings.CELERY_TASK_DEFAULT_QUEUE = QUEUE


@pytest.fixture(scope="session")
def shop_service() -> Iterator[ShopService]:
    with ShopService() as service:
        settings.SHOP_DOWNSTREAM_URL = service.url  # this process: revalidation when a person decides
        yield service


@pytest.fixture
def service(shop_service: ShopService) -> ShopService:
    shop_service.state = ShopState()  # every test starts with an empty shop
    return shop_service


@pytest.fixture(scope="session")
def collected_static() -> Path:
    """`python manage.py collectstatic`: durable's stylesheet comes from the installed package into STATIC_ROOT."""
    manage("collectstatic", "--noinput")
    return Path(settings.STATIC_ROOT)


@pytest.fixture(scope="session")
def worker(django_db_setup, django_db_blocker, shop_service) -> Iterator[subprocess.Popen]:
    """A real worker of the host's own Celery app, on this session's queue and test database."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = open(LOGS / "worker.log", "ab")
    env = project_env(DATABASE_URL=database_url(settings.DATABASES["default"]), SHOP_DOWNSTREAM_URL=shop_service.url)
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "host", "worker", "--pool", "solo", "--queues", QUEUE,
         "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--hostname", f"{QUEUE}@%h"],
        cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT)
    yield process
    process.terminate()
    process.wait(timeout=60)
    log.close()


def worker_log() -> str:
    path = LOGS / "worker.log"
    return path.read_text()[-4000:] if path.exists() else "(no worker log)"


def wait_until(condition: Callable[[], object], what: str, *, within: float = 90.0) -> object:
    """Poll the database until `condition` holds; a generous deadline only turns a hang into a failure."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}; the worker's log ends:\n{worker_log()}")


@pytest.fixture
def make_user(transactional_db) -> Callable[..., object]:
    """A user of the shop's own user model holding durable's role groups."""
    from django.contrib.auth.models import Group

    from durable.roles import ensure_roles

    def make(username: str, *roles: str) -> object:
        ensure_roles()  # the roles migration's groups, again after a transactional test's flush
        user = get_user_model().objects.create_user(username, password=f"pw-{username}-long-enough", team="refunds")
        user.groups.set(Group.objects.filter(name__in=roles))
        return user

    return make
