import pytest

from durable.permissions import CONTENTS_PERMISSIONS
from tests.conftest import make_user
from tests.durable.console.screens import VIEW, client_for


@pytest.fixture
def viewer(db):
    """As the viewer role reads runs: with their contents (view_run alone: tests/test_contents_rule.py)."""
    return client_for(make_user("viewer", VIEW, *CONTENTS_PERMISSIONS))
