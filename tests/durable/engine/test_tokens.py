"""API token text (durable/engine/tokens.py): made with a naming prefix, kept only as a hash."""
import re

from durable.engine.tokens import PREFIX_LENGTH, TOKEN_TAG, new_token, token_hash, token_matches, token_prefix


def test_a_token_is_the_tag_8_hex_characters_and_256_random_bits():
    token = new_token()
    assert re.fullmatch(rf"{TOKEN_TAG}[0-9a-f]{{8}}_[A-Za-z0-9_-]{{43}}", token)
    assert new_token() != token


def test_the_prefix_names_the_token_and_is_all_that_is_shown():
    token = new_token()
    assert token_prefix(token) == token[:PREFIX_LENGTH] and token_prefix(token).startswith(TOKEN_TAG)


def test_the_stored_hash_matches_its_token_only():
    token = new_token()
    stored = token_hash(token)
    assert re.fullmatch(r"[0-9a-f]{64}", stored) and token not in stored
    assert token_matches(token, stored) and not token_matches(new_token(), stored)


def test_text_that_is_not_valid_unicode_is_hashed_rather_than_crashing_the_check():
    assert not token_matches("dur_\udcff", token_hash(new_token()))
