"""Role grants and removals in the audit trail: a user's roles and permissions, and a role's permissions.

Roles are Django groups (durable/roles.py), changed through the admin, a host project's own screens or
a shell. Every change, whatever path made it, reaches Django's `m2m_changed`, so that is where it is
recorded. Who made it is known only inside a request: `ActorMiddleware` (durable/middleware.py) remembers the request for the
signal; a change made outside one (a shell, a command, a migration) is recorded with no actor and the
source `command`.
"""
from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group, Permission
from django.db.models import ForeignKey, Model
from django.db.models.signals import m2m_changed
from django.http import HttpRequest

from durable.audit import audit

# The audit trail's actions for role changes, beside the actions on runs and operations.
ROLE_ACTIONS = tuple(f"{verb}_{kind}" for verb in ("grant", "remove") for kind in ("role", "permission", "role_permission"))

# The request being answered, set by ActorMiddleware (durable/middleware.py); None in a shell or a command.
request_in_flight: ContextVar[HttpRequest | None] = ContextVar("durable_role_audit_request", default=None)


def _source(request: HttpRequest | None) -> str:
    if request is None:
        return "command"
    # By the URL namespace the request resolved to, wherever the project mounts the admin and durable.urls.
    namespaces = request.resolver_match.namespaces if request.resolver_match else []
    return "admin" if "admin" in namespaces else "api" if "api" in namespaces else "console"


def _permission_name(permission: Permission) -> str:
    return f"{permission.content_type.app_label}.{permission.codename}"


def _record(action: str, detail: dict[str, str]) -> None:
    request = request_in_flight.get()
    # audit() keeps the actor's name as it was, or none for an anonymous caller or a shell.
    audit(user=getattr(request, "user", None), action=action, run=None, source=_source(request),
          status_before="", status_after="", detail=detail)


def _pairs(instance: Model, reverse: bool, model: type[Model], pks: Iterable[Any]) -> list[tuple[Model, Model]]:
    """(holder, granted) pairs, whichever side of the relation the change was made from."""
    others = list(model._default_manager.filter(pk__in=list(pks)))
    return [(other, instance) for other in others] if reverse else [(instance, other) for other in others]


def _describe(holder: Model, granted: Model) -> dict[str, str]:
    # The relations watched: a role holds permissions; a user holds roles and permissions.
    if isinstance(holder, Group):
        return {"role": holder.name, "permission": _permission_name(cast(Permission, granted))}
    detail = {"user": cast(AbstractBaseUser, holder).get_username(), "user_id": str(holder.pk)}
    if isinstance(granted, Group):
        return {**detail, "role": granted.name}
    return {**detail, "permission": _permission_name(cast(Permission, granted))}


def _kind(holder: Model, granted: Model) -> str:
    if isinstance(holder, Group):
        return "role_permission"
    return "role" if isinstance(granted, Group) else "permission"


def _on_change(sender: type[Model], instance: Model, action: str, reverse: bool, model: type[Model],
               pk_set: set[Any] | None, **kwargs: Any) -> None:
    if action == "pre_clear":
        # post_clear no longer knows what was removed: read it while it is still there.
        pk_set, verb = _linked(sender, instance, model), "remove"
    elif action in ("post_add", "post_remove"):
        verb = "grant" if action == "post_add" else "remove"
    else:
        return
    for holder, granted in _pairs(instance, reverse, model, pk_set or ()):
        _record(f"{verb}_{_kind(holder, granted)}", _describe(holder, granted))


def _linked(through: type[Model], instance: Model, model: type[Model]) -> set[Any]:
    """The pks of `model` that `instance` is linked to through the relation's table."""
    links = [field for field in through._meta.get_fields() if isinstance(field, ForeignKey)]  # the table's two
    own = next(field for field in links if field.related_model is instance._meta.concrete_model)
    other = next(field for field in links if field is not own and field.related_model is model._meta.concrete_model)
    return set(through._default_manager.filter(**{own.name: instance}).values_list(other.attname, flat=True))


def connect() -> None:
    """Called from the app's ready(): audit every way a role or permission can be given or taken."""
    user_model = get_user_model()
    # A host's custom user model may have no groups or permissions of its own (no PermissionsMixin).
    relations = [getattr(user_model, name).through for name in ("groups", "user_permissions")
                 if hasattr(user_model, name)]
    for relation in [*relations, Group.permissions.through]:
        m2m_changed.connect(_on_change, sender=relation, dispatch_uid=f"durable-role-audit-{relation.__name__}")
