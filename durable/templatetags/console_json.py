"""Stored JSON (input, state, output, errors, snapshots, results, evidence) shown readably in the console.

`{% json_block value %}` renders indented JSON with sorted keys, each token in a span whose class
says what it is (json-key, json-string, json-number, json-boolean, json-null), escaped here on
the server: nothing from a customer or an LLM reaches the page unescaped, and no script library
is needed. A large value is folded in a <details>; durable/static/durable/copy-json.js gives
every block its copy button.
"""
from __future__ import annotations

import html
import json
from json.encoder import encode_basestring  # a string as JSON writes it, as json.dumps(ensure_ascii=False) does
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

INDENT = "  "
FOLD_LINES = 25  # a value longer than this many lines starts folded
FOLD_CHARS = 2000


def as_json(value: Any) -> Any:
    """The value as JSON would carry it: dates, decimals and UUIDs become strings, keys strings."""
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _token(css: str, text: str) -> str:
    return f'<span class="json-{css}">{html.escape(text)}</span>'  # Django's escape() is this, without its wrappers


def _scalar(value: Any) -> str:
    if value is None:
        return _token("null", "null")
    if isinstance(value, bool):
        return _token("boolean", "true" if value else "false")
    if isinstance(value, int):
        return _token("number", str(value))
    if isinstance(value, float):
        return _token("number", json.dumps(value))
    return _token("string", encode_basestring(value))


def highlight(value: Any, depth: int = 0) -> str:
    """`value` (already JSON-shaped) as escaped, indented HTML laid out as json.dumps(indent=2) lays it out."""
    pad, inner = INDENT * depth, INDENT * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{_token('key', encode_basestring(key))}: {highlight(value[key], depth + 1)}"
                 for key in sorted(value)]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(f"{inner}{highlight(item, depth + 1)}" for item in value) + f"\n{pad}]"
    return _scalar(value)


@register.filter
def is_structured(value: Any) -> bool:
    """An object or a list: shown as a JSON block; a plain value reads better as it is."""
    return isinstance(value, (dict, list))


def is_large(text: str) -> bool:
    return text.count("\n") >= FOLD_LINES or len(text) > FOLD_CHARS


@register.simple_tag
def json_block(value: Any, label: str = "JSON") -> SafeString:
    """The value as a highlighted JSON block with a copy button, folded when it is large."""
    shaped = as_json(value)
    plain = json.dumps(shaped, indent=2, sort_keys=True, ensure_ascii=False)
    block = format_html(
        '<div class="json-block"><button type="button" class="json-copy" data-copy-json '
        'aria-label="Copy {} as JSON">Copy</button><pre class="json"><code>{}</code></pre></div>',
        label, mark_safe(highlight(shaped)))  # noqa: S308 - highlight() escapes every token itself
    if not is_large(plain):
        return block
    lines = plain.count("\n") + 1
    return format_html('<details class="json-fold"><summary>{} ({} lines)</summary>{}</details>', label, lines, block)
