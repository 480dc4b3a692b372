"""docs/embedding.md is a recipe that works: a new project, built with `django-admin startproject`, given exactly
what the page shows, passes `check --deploy`, migrates, collects its static files, and takes one run through
its approval to SUCCEEDED with a worker of its own Celery app.

What is applied is read from the page, never copied here: its blocks whose info string names a file
(```python host/settings.py, ...), its `bash recipe` commands, its `bash worker` command and its
`python shell` blocks (tests/pages.py reads them). Runs against the durable installed in this venv, on
SQLite, or on Postgres when DATABASE_URL is set (the page's Postgres block, in a database of its own).
"""
from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.pages import ROOT, Block, blocks

pytestmark = pytest.mark.worker
PAGE = ROOT / "docs" / "embedding.md"
SETTINGS = "host/settings.py"


def marked(*info: str) -> list[Block]:
    return [block for block in blocks(PAGE) if block.info[:len(info)] == info]


def recipe(database: str) -> dict[str, str]:
    """Each file the page has the project write, with its text: settings appended to, the others whole."""
    files: dict[str, str] = {}
    for block in blocks(PAGE):
        if block.info[:1] != ("python",) or len(block.info) < 2 or "/" not in block.info[1]:
            continue
        path, variant = block.info[1], block.info[2:]
        if variant and variant != (database,):
            continue
        files[path] = files.get(path, "") + "\n" + block.text
    return files


def command(line: str) -> list[str]:
    """A command line of the page, run with this venv's Python (`python`, `django-admin`)."""
    words = shlex.split(line)
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    if words[0] == "django-admin":
        return [sys.executable, "-m", "django", *words[1:]]
    raise AssertionError(f"docs/embedding.md runs {words[0]!r}; the test knows python and django-admin")


@contextmanager
def postgres_database() -> Iterator[dict[str, str]]:
    """libpq's variables for a database of this test's own beside DATABASE_URL's, made afresh and dropped after."""
    import psycopg

    url = urlsplit(os.environ["DATABASE_URL"])
    name = f"{url.path.lstrip('/') or 'postgres'}_embedding"
    env = {"PGHOST": url.hostname or "localhost", "PGPORT": str(url.port or 5432), "PGDATABASE": name,
           "PGUSER": unquote(url.username or "postgres"), "PGPASSWORD": unquote(url.password or "")}

    def admin(statement: str) -> None:
        with psycopg.connect(dbname="postgres", host=env["PGHOST"], port=env["PGPORT"], user=env["PGUSER"],
                             password=env["PGPASSWORD"], autocommit=True) as connection:
            connection.execute(statement)

    admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{name}"')
    try:
        yield env
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Project:
    """The new project in a directory of its own, and how to run its commands."""

    def __init__(self, where: Path, env: dict[str, str]) -> None:
        self.where, self.env = where, env

    def run(self, args: list[str], *, timeout: float = 120) -> str:
        done = subprocess.run(args, cwd=self.where, env=self.env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{shlex.join(args[1:])} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def shell(self, code: str) -> str:
        return self.run([sys.executable, "manage.py", "shell", "-c", code])


def run_status_is(status: str, within: float = 40.0) -> str:
    """Shell code that waits until the run of SO-1 has `status`, then prints the run as JSON."""
    return f"""
import json, time
from durable.models import Run
deadline = time.monotonic() + {within}
while True:
    run = Run.objects.filter(business_key="SO-1").first()
    if run and run.status == {status!r} or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print(json.dumps(run and {{"status": run.status, "error": run.error, "step": run.current_step}}))
"""


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    database = "postgres" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    # Only what the page asks for: a secret key (and the PG* variables on Postgres). The broker is the page's
    # default, kombu's filesystem transport, in the new project's own folder.
    # DJANGO_ALLOW_ASYNC_UNSAFE: the browser tests set it in this process; a new project never has it.
    env = {key: value for key, value in os.environ.items()
           if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "CELERY_BROKER_URL", "PYTHONPATH",
                          "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    with ExitStack() as stack:
        if database == "postgres":
            env.update(stack.enter_context(postgres_database()))
        yield build(tmp_path, env, database)


def build(tmp_path: Path, env: dict[str, str], database: str) -> Project:
    """`django-admin startproject` as the page runs it, then every file the page has the project write."""
    where = tmp_path / "project"
    where.mkdir()
    made = Project(where, env)
    [startproject] = [line for block in marked("bash", "recipe") for line in block.text.splitlines()
                      if line.startswith("django-admin")]
    made.run(command(startproject))
    for path, text in recipe(database).items():
        target = where / path
        target.write_text((target.read_text() if path == SETTINGS else "") + text)
    return made


def test_the_page_marks_a_whole_recipe():
    assert set(recipe("sqlite")) == {SETTINGS, "host/urls.py", "host/celery.py", "host/__init__.py",
                                     "host/workflows.py"}
    assert "STATIC_ROOT" in recipe("sqlite")[SETTINGS] and "DATABASES = {" in recipe("postgres")[SETTINGS]
    assert len(marked("bash", "worker")) == 1 and len(marked("python", "shell")) == 3


def test_a_new_project_following_the_page_runs_its_first_approved_run(project: Project):
    for block in marked("bash", "recipe"):
        for line in block.text.splitlines():
            if line.strip() and not line.startswith("django-admin"):
                output = project.run(command(line))
    assert "System check identified no issues" in output  # the last command: check --deploy
    assert (project.where / "staticfiles" / "durable").is_dir()

    [worker_line] = marked("bash", "worker")[0].text.strip().splitlines()
    log = open(project.where / "worker.log", "wb")
    worker = subprocess.Popen(command(worker_line), cwd=project.where, env=project.env, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        users, start, approve = (block.text for block in marked("python", "shell"))
        project.shell(users + start)
        # One shell: wait for the approval request, decide it as the page does, wait for the end.
        lines = project.shell(run_status_is("WAITING_APPROVAL") + approve + run_status_is("SUCCEEDED")).splitlines()
        waiting, done = (json.loads(line) for line in lines if line.startswith(("{", "null")))
        worker_log = (project.where / "worker.log").read_text()
        assert waiting and waiting["status"] == "WAITING_APPROVAL", (waiting, worker_log)
        assert done == {"status": "SUCCEEDED", "error": None, "step": ""}, (done, worker_log)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
