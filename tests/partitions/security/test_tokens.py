"""A user's API tokens, the pure part: the text's format (``rlt_<id>_<secret>``, the id findable without
the secret), what the controller keeps (a SHA-256 of the text, never the text), the check of a presented
token (unknown, wrong, expired and malformed alike: None), expiry times and descriptions refused with the
field named."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator

import pytest

from partitions.errors import InvalidName
from partitions.security.tokens import (
    TOKEN_DESCRIPTION_BYTES_MAX,
    TOKEN_LIFETIME_MS_DEFAULT,
    TOKEN_LIFETIME_MS_MAX,
    ApiToken,
    check_token,
    check_token_description,
    check_token_id,
    is_token,
    is_users_token,
    issue_token,
    parse_token,
    token_expiry,
)

NOW_MS = 1_700_000_000_000


def counting_bytes() -> Iterator[bytes]:
    """Distinct, known 'random' bytes: the first call gives the id's, the second the secret's."""
    n = 0
    while True:
        n += 1
        yield bytes([n]) * 64


def fixed_random() -> Callable[[int], bytes]:
    source = counting_bytes()
    return lambda size: next(source)[:size]


def test_a_token_is_prefix_id_and_secret_and_only_its_hash_is_kept() -> None:
    text, token = issue_token("alice", NOW_MS, None, "ci", random_bytes=fixed_random())
    assert text == "rlt_" + "01" * 8 + "_" + "02" * 32
    assert token == ApiToken("01" * 8, "alice", hashlib.sha256(text.encode()).digest(), "ci", NOW_MS, None)
    assert text not in repr(token) and "02" * 32 not in repr(token)
    assert parse_token(text) == token.token_id  # the id is read from the text, without the secret


def test_tokens_made_with_secrets_are_distinct_and_well_formed() -> None:
    made = [issue_token("alice", NOW_MS, None)[0] for _ in range(50)]
    assert len(set(made)) == 50 and len({parse_token(t) for t in made}) == 50
    assert all(re.fullmatch(r"rlt_[0-9a-f]{16}_[0-9a-f]{64}", t) for t in made)


def test_check_finds_the_token_and_refuses_wrong_unknown_expired_and_malformed_alike() -> None:
    text, token = issue_token("alice", NOW_MS, NOW_MS + 1000)
    other_text, other = issue_token("bob", NOW_MS, None)
    held = {token.token_id: token, other.token_id: other}
    assert check_token(held, text, NOW_MS) == token
    assert check_token(held, other_text, NOW_MS + TOKEN_LIFETIME_MS_MAX) == other  # no expiry
    assert check_token(held, text, NOW_MS + 999) == token
    assert check_token(held, text, NOW_MS + 1000) is None  # expired at expires_ms
    wrong_secret = text[:-1] + ("0" if text[-1] != "0" else "1")
    assert check_token(held, wrong_secret, NOW_MS) is None  # the right id, not the right secret
    assert check_token({other.token_id: other}, text, NOW_MS) is None  # revoked
    # another token's id with this one's secret: the hash covers the whole text
    swapped = f"rlt_{other.token_id}_{text.rsplit('_', 1)[1]}"
    assert check_token(held, swapped, NOW_MS) is None
    for malformed in (
        "",
        "rlt_",
        text + "0",
        text.upper(),
        "rlt_" + "g" * 16 + text[20:],
        text.replace("_", "-"),
    ):
        assert check_token(held, malformed, NOW_MS) is None, malformed
    assert is_token(text) and not is_token("the-admin-token")


def test_a_token_stands_in_for_a_password_only_for_its_own_living_user_until_it_expires() -> None:
    text, token = issue_token("alice", NOW_MS, NOW_MS + 1000)
    tokens = {token.token_id: token}
    users = {"alice", "bob"}
    assert is_users_token(tokens, users, "alice", text, NOW_MS)
    assert not is_users_token(tokens, users, "bob", text, NOW_MS)  # another user's name
    assert not is_users_token(tokens, {"bob"}, "alice", text, NOW_MS)  # the user is gone
    assert not is_users_token(tokens, users, "alice", text, NOW_MS + 1000)  # expired
    assert not is_users_token({}, users, "alice", text, NOW_MS)  # revoked
    assert not is_users_token(tokens, users, "alice", "alice's password", NOW_MS)


def test_rows_round_trip_and_a_row_that_is_not_a_token_is_refused() -> None:
    _, token = issue_token("alice", NOW_MS, NOW_MS + 5, "deploys")
    assert ApiToken.from_row(token.to_row()) == token
    for bad in (
        [],
        [*token.to_row()[:5]],
        ["x" * 16, *token.to_row()[1:]],
        [*token.to_row()[:2], b"short", "", 1, None],
    ):
        with pytest.raises(InvalidName):
            ApiToken.from_row(bad)
    assert token.to_json(NOW_MS) == {
        "id": token.token_id,
        "user": "alice",
        "description": "deploys",
        "created_ms": NOW_MS,
        "expires_ms": NOW_MS + 5,
        "expired": False,
    }
    assert token.to_json(NOW_MS + 5)["expired"] is True


def test_expiry_is_a_time_or_a_lifetime_in_the_future_within_ten_years() -> None:
    assert token_expiry(NOW_MS) == NOW_MS + TOKEN_LIFETIME_MS_DEFAULT  # every token expires: 7 days
    assert TOKEN_LIFETIME_MS_DEFAULT == 7 * 24 * 3600 * 1000  # Kafka's delegation.token.max.lifetime.ms
    assert token_expiry(NOW_MS, default_lifetime_ms=60_000) == NOW_MS + 60_000
    assert token_expiry(NOW_MS, lifetime_ms=60_000) == NOW_MS + 60_000
    assert token_expiry(NOW_MS, expires_ms=NOW_MS + 1) == NOW_MS + 1
    assert token_expiry(NOW_MS, lifetime_ms=TOKEN_LIFETIME_MS_MAX) == NOW_MS + TOKEN_LIFETIME_MS_MAX
    refused = [
        ({"expires_ms": NOW_MS + 1, "lifetime_ms": 1}, "expires_ms", "not both"),
        ({"expires_ms": NOW_MS}, "expires_ms", "in the future"),
        ({"lifetime_ms": 0}, "lifetime_ms", "in the future"),
        ({"lifetime_ms": TOKEN_LIFETIME_MS_MAX + 1}, "lifetime_ms", "ten years"),
        ({"lifetime_ms": "1d"}, "lifetime_ms", "integer"),
        ({"expires_ms": True}, "expires_ms", "integer"),
        ({"expires_ms": 1.5e12}, "expires_ms", "integer"),
    ]
    for given, field, words in refused:
        with pytest.raises(InvalidName, match=words) as raised:
            token_expiry(NOW_MS, **given)
        assert raised.value.field == field, given


def test_descriptions_and_ids_are_checked() -> None:
    longest = "x" * TOKEN_DESCRIPTION_BYTES_MAX
    assert check_token_description("") == "" and check_token_description(longest) == longest
    assert check_token_description("é" * 128) == "é" * 128  # bytes of UTF-8 are counted
    for bad in (longest + "x", "é" * 129, "line\nbreak", 7, None):
        with pytest.raises(InvalidName):
            check_token_description(bad)
    assert check_token_id("0123456789abcdef") == "0123456789abcdef"
    for bad in ("0123456789ABCDEF", "0123", "0123456789abcdeg", None):
        with pytest.raises(InvalidName, match="16 lowercase hex digits"):
            check_token_id(bad)
