import pytest

from tests.conftest import make_user
from tests.durable.console.screens import VIEW, client_for


@pytest.fixture
def viewer(db):
    return client_for(make_user("viewer", VIEW))
