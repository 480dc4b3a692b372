"""Large values stored once (durable.models.StoredValue): written before the row that refers to them, read back
into the values that refer to them (durable.engine.large_values decides which parts; docs/state-storage.md).

Every row that may refer to a stored value goes through here: checkpoints' states and differences
(durable.store.checkpoints) and the journal's results (the run stores, the replay records, the API, the console).
A row without references costs a look at its top level to read, and a length comparison to write.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.large_values import is_envelope, joined, kept_whole, references, split
from durable.engine.replay import RecordedCall
from durable.models import JournalEntry, StoredValue

# durable_prune deletes a stored value no row refers to only once no writer stored or referred to it for this long:
# a writer touches a value (or stores it) before it writes the row that refers to it, moments later.
UNREFERENCED_GRACE = timedelta(hours=1)


def threshold() -> int:
    """What a part must weigh (bytes of JSON) to be stored apart; 0: nothing is."""
    return int(durable_settings.DURABLE_LARGE_VALUE_BYTES)


def stored(value: Any, size: int | None = None) -> Any:
    """The JSON a row stores for `value` (for the ORM), its large parts written apart first. `size`: the length of
    its JSON text when the caller knows it; under the threshold, the value is not walked."""
    limit = threshold()
    if not limit or (size if size is not None else len(json.dumps(value))) <= limit:
        return kept_whole(value)
    parts = split(value, limit)
    write(parts.apart)
    return parts.stored


def stored_text(value: Any, text: str) -> str:
    """The JSON text a row stores for `value`, whose JSON text is `text` (the raw SQL stores')."""
    limit = threshold()
    if (not limit or len(text) <= limit) and not is_envelope(value):
        return text
    return json.dumps(stored(value, len(text)))


def write(apart: dict[str, str], now: datetime | None = None) -> None:
    """Store each value (hash -> canonical text) unless it is, and mark each as written now, in that order: a
    value found stored was touched first, so durable_prune, which deletes only values untouched for a while, cannot
    delete it before the row that refers to it is written (durable/retention.py)."""
    if not apart:
        return
    now = now or timezone.now()
    if StoredValue.objects.filter(hash__in=list(apart)).update(written_at=now) == len(apart):
        return
    found = set(StoredValue.objects.filter(hash__in=list(apart)).values_list("hash", flat=True))
    StoredValue.objects.bulk_create([
        StoredValue(hash=address, value=json.loads(text), size=len(text.encode("utf-8", "surrogatepass")),
                    written_at=now)
        for address, text in apart.items() if address not in found], ignore_conflicts=True)


def fetched(addresses: Iterable[str]) -> dict[str, Any]:
    """The stored values of these hashes, as parsed (hash -> value)."""
    wanted = sorted(set(addresses))
    if not wanted:
        return {}
    return dict(StoredValue.objects.filter(hash__in=wanted).values_list("hash", "value"))


def resolved(value: Any) -> Any:
    """The value a row's stored JSON stands for (its large parts read back). Changes `value` in place."""
    if not is_envelope(value):
        return value
    return joined(value, fetched(references(value)))


def resolved_all(values: Sequence[Any]) -> list[Any]:
    """Several rows' stored JSON read back, with one read of the large values they refer to."""
    envelopes = [value for value in values if is_envelope(value)]
    if not envelopes:
        return list(values)
    found = fetched(address for value in envelopes for address in references(value))
    return [joined(value, found) for value in values]


def resolved_calls(calls: list[RecordedCall]) -> list[RecordedCall]:
    """Recorded activity results as read from the journal, their large values read back (one read for all)."""
    if not any(is_envelope(call.result) for call in calls):
        return calls
    results = resolved_all([call.result for call in calls])
    return [RecordedCall(call.call_index, call.name, result) for call, result in zip(calls, results, strict=True)]


def fill_results(entries: Sequence[JournalEntry]) -> None:
    """Set each journal entry's `result` to the value it stands for (its large values read back, one read for all):
    for a view, a serializer or the test kit that shows them."""
    pending = [entry for entry in entries if is_envelope(entry.result)]
    for entry, result in zip(pending, resolved_all([entry.result for entry in pending]), strict=True):
        entry.result = result
