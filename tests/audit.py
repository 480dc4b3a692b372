"""The audit trail as the tests of run, approval and operation actions read it."""
from django.db.models import QuerySet

from durable.models import OperatorAction
from durable.role_audit import ROLE_ACTIONS


def operator_actions() -> QuerySet[OperatorAction]:
    """Every audit row except the role grants that setting up a test's users writes (tests/durable/test_role_audit.py)."""
    return OperatorAction.objects.exclude(action__in=ROLE_ACTIONS)
