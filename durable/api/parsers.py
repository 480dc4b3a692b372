"""What the API reads request bodies with: DRF's parsers, with JSON nested past Python's recursion limit a 400."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from durable.engine.json_values import MAX_JSON_DEPTH


class JSONParser(parsers.JSONParser):
    """DRF's JSONParser, which answers bad JSON with a 400 but lets a RecursionError (say 100,000 nested lists)
    through as a 500."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - objects and lists nested too deeply to read; a field accepts at "
                             f"most {MAX_JSON_DEPTH} levels") from None
