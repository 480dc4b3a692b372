"""Approvers the approvals tests share: two people holding the approver permission."""
import pytest

from tests.conftest import make_user

APPROVE = "approvals.decide_approvalrequest"


@pytest.fixture
def ann(db):
    return make_user("ann", APPROVE)


@pytest.fixture
def bob(db):
    return make_user("bob", APPROVE)
