"""API token text: how a token is made, the prefix that names it, and the hash that is stored instead of it.

A token is `dur_` + 8 hex characters (its prefix, with `dur_`) + `_` + 256 random bits. Only the prefix and
the sha256 of the whole token are kept: a random secret of that size needs no slow hash, and a stolen table
gives no token. Tokens made by DRF's authtoken before (40 hex characters) were moved over by the same rule.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_TAG = "dur_"
PREFIX_LENGTH = 12  # "dur_" + 8 hex: 32 random bits that name the token and grant nothing


def new_token() -> str:
    """A fresh token: its prefix, then 256 random bits."""
    return f"{TOKEN_TAG}{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"


def token_prefix(token: str) -> str:
    """The part of a token that names it, shown in lists and logs."""
    return token[:PREFIX_LENGTH]


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_matches(token: str, stored_hash: str) -> bool:
    """Whether `token` is the one `stored_hash` was made from, compared in constant time."""
    return hmac.compare_digest(token_hash(token), stored_hash)
