"""Template filters for showing stored JSON (payloads, results, evidence) readably in the console."""
from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON with sorted keys, so two payloads read alike; autoescaped by the template."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
