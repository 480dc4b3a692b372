"""Role grants and removals are operator actions: audited whichever path made them, with who did it."""
import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from durable.models import OperatorAction
from durable.roles import ensure_roles

pytestmark = pytest.mark.django_db


@pytest.fixture
def approver_role():
    ensure_roles()
    return Group.objects.get(name="approver")


@pytest.fixture
def ann():
    return User.objects.create_user("ann", password="pw-ann-long-enough")


def test_a_role_granted_and_removed_in_a_shell_is_audited_without_an_actor(approver_role, ann):
    before = OperatorAction.objects.order_by("-id").values_list("id", flat=True).first() or 0
    ann.groups.add(approver_role)
    ann.groups.remove(approver_role)
    rows = OperatorAction.objects.filter(id__gt=before).order_by("id")
    assert [(r.action, r.source, r.actor_id, r.detail) for r in rows] == [
        ("grant_role", "command", None, {"user": "ann", "user_id": str(ann.pk), "role": "approver"}),
        ("remove_role", "command", None, {"user": "ann", "user_id": str(ann.pk), "role": "approver"}),
    ]


def test_clearing_a_users_roles_names_each_role_removed(approver_role, ann):
    viewer = Group.objects.create(name="watcher")
    ann.groups.set([approver_role, viewer])
    before = OperatorAction.objects.order_by("-id").values_list("id", flat=True).first() or 0
    ann.groups.clear()
    removed = {r.detail["role"] for r in OperatorAction.objects.filter(id__gt=before).order_by("id") if r.action == "remove_role"}
    assert removed == {"approver", "watcher"}


def test_adding_a_user_from_the_roles_side_is_the_same_grant(approver_role, ann):
    before = OperatorAction.objects.order_by("-id").values_list("id", flat=True).first() or 0
    approver_role.user_set.add(ann)
    row = OperatorAction.objects.filter(id__gt=before).order_by("id").get()
    assert (row.action, row.detail["user"], row.detail["role"]) == ("grant_role", "ann", "approver")


def test_a_permission_given_to_a_user_or_to_a_role_is_audited(approver_role, ann):
    permission = Permission.objects.get(content_type__app_label="durable", codename="start_older_version")
    before = OperatorAction.objects.order_by("-id").values_list("id", flat=True).first() or 0
    ann.user_permissions.add(permission)
    approver_role.permissions.remove(Permission.objects.get(content_type__app_label="durable", codename="view_run"))
    rows = OperatorAction.objects.filter(id__gt=before).order_by("id")
    assert [(r.action, r.detail) for r in rows] == [
        ("grant_permission", {"user": "ann", "user_id": str(ann.pk), "permission": "durable.start_older_version"}),
        ("remove_role_permission", {"role": "approver", "permission": "durable.view_run"}),
    ]


def test_a_role_granted_through_the_admin_names_the_admin_who_did_it(client, approver_role, ann):
    boss = User.objects.create_superuser("boss", password="pw-boss-long-enough")
    client.force_login(boss)
    before = OperatorAction.objects.order_by("-id").values_list("id", flat=True).first() or 0
    form = {"username": "ann", "groups": [approver_role.pk], "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00", "is_active": "on"}
    answer = client.post(reverse("admin:auth_user_change", args=[ann.pk]), form)
    assert answer.status_code == 302, answer.content[:2000]
    row = OperatorAction.objects.get(action="grant_role", id__gt=before)
    assert (row.source, row.actor_username, row.actor_user_id) == ("admin", "boss", str(boss.pk))


def test_renaming_the_admin_later_leaves_the_grant_as_it_was_recorded(client, approver_role, ann):
    boss = User.objects.create_superuser("boss", password="pw-boss-long-enough")
    client.force_login(boss)
    form = {"username": "ann", "groups": [approver_role.pk], "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00", "is_active": "on"}
    client.post(reverse("admin:auth_user_change", args=[ann.pk]), form)
    User.objects.filter(pk=boss.pk).update(username="someone-else")
    assert OperatorAction.objects.get(action="grant_role").actor_username == "boss"
