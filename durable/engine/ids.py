"""Operation ids and request hashes over canonical JSON."""
from __future__ import annotations

import hashlib
import json
from typing import Any

# What operation_id() gives; a URL or search that does not match it names no operation.
OPERATION_ID_PATTERN = "[0-9a-f]{32}"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# How operation_id() is written in the README and docs/ (tests/test_docs_facts.py holds them, and this, to it).
OPERATION_ID_FORMULA = 'sha256("run_id:action:business_key")[:32]'


def operation_id(run_id: str, action: str, business_key: str) -> str:
    """The ledger key and downstream Idempotency-Key of one side effect (invariant 1, docs/invariants.md).

    A logical side effect is named by run, action and business key, whichever step or visit asks
    (invariant 16, docs/invariants.md): a loop or another step asking again gets the recorded result.
    """
    return sha256_hex(f"{run_id}:{action}:{business_key}")[:32]


def family_operation_id(run_id: str, family_root: str | None, action: str, business_key: str) -> str:
    """The operation id of a run of a family (a run and its forks, docs/ledger-and-reconciliation.md): named by the
    family's first run, so a fork asking what its origin did gets the origin's id, and the downstream the same
    Idempotency-Key. A run that is its own root (`family_root` None) keeps operation_id(run_id, ...)."""
    return operation_id(family_root or run_id, action, business_key)


def request_hash(payload: Any) -> str:
    """Hash of what is asked of a downstream, so a changed request under one id is caught."""
    return sha256_hex(canonical_json(payload))
