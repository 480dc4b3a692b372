"""Roles are groups created by a migration, with exactly the permissions durable/roles.py lists."""
import pytest
from django.contrib.auth.models import Group

from durable.roles import ROLES

pytestmark = pytest.mark.django_db


def names(group: Group) -> set[str]:
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}


# The database as the migrations left it, even after a test that flushed it ran first in this process.
@pytest.mark.django_db(serialized_rollback=True)
@pytest.mark.parametrize("role", list(ROLES))
def test_the_migration_created_each_role_with_its_permissions(role):
    assert names(Group.objects.get(name=role)) == set(ROLES[role])


def test_only_the_decide_and_resolve_roles_can_decide_or_resolve():
    deciders = {role for role, perms in ROLES.items() if "approvals.decide_approvalrequest" in perms}
    resolvers = {role for role, perms in ROLES.items() if "durable.resolve_sideeffect" in perms}
    assert deciders == {"approver", "admin"} and resolvers == {"reconciler", "admin"}
