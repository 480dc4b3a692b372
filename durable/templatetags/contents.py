"""The contents rule in templates: `{% if user|sees_contents %}` (durable/permissions.py decides)."""
from __future__ import annotations

from typing import Any

from django import template

from durable.permissions import can_see_contents

register = template.Library()


@register.filter
def sees_contents(user: Any) -> bool:
    return can_see_contents(user)
