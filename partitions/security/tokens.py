"""A user's API tokens (pure): what lets a program call the data API as that user with ``Authorization:
Bearer <token>``, without holding the user's password.

A token is the text ``rlt_<id>_<secret>``: ``id`` is 16 hex digits (8 random bytes), by which the token
is found, listed and revoked; ``secret`` is 64 hex digits (32 random bytes from ``secrets``). It is
answered once, where it is made (``issue_token``, on the node the request entered), and never stored: the
controller replicates an ``ApiToken``, which holds the id, the owning user, the SHA-256 of the whole text,
a description and the creation and expiry times (ms since the epoch, from the clock of the node that made
it; a token made without an expiry expires after ``TOKEN_LIFETIME_MS_DEFAULT``, seven days, as Kafka's
delegation tokens at most live; tokens of an earlier release may have none). A change of its user's
credentials (a new password) revokes it, in the same controller change (``controller.tokens``). 32 random
bytes cannot be guessed, so a fast hash is all the secret needs (no salt, no PBKDF2: those protect
passwords, which people choose).

``check_token`` finds the token a request presents among those the controller holds now: the id selects one,
the hashes are compared in constant time, and an expired one (at ``now_ms``, the checking node's clock)
matches nothing, as an unknown or revoked one does: the caller cannot tell which.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import unicodedata
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from partitions.errors import InvalidName

PREFIX = "rlt_"
ID_BYTES = 8  # 16 hex digits: a token's public name
SECRET_BYTES = 32  # 64 hex digits
TOKEN_DESCRIPTION_BYTES_MAX = 256
TOKEN_LIFETIME_MS_MAX = 10 * 366 * 86_400_000  # ten years: an expiry further off is a mistake, not a plan
# A token made without an expiry expires after this (``raftlog serve --api-token-lifetime-ms``): seven days,
# Kafka's ``delegation.token.max.lifetime.ms``, so a forgotten token stops working on its own
TOKEN_LIFETIME_MS_DEFAULT = 7 * 86_400_000
_HEX = frozenset("0123456789abcdef")
_TEXT_LENGTH = len(PREFIX) + 2 * ID_BYTES + 1 + 2 * SECRET_BYTES


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A token as the controller replicates it: never its secret."""

    token_id: str
    user: str
    secret_hash: bytes  # SHA-256 of the token's whole text
    description: str
    created_ms: int
    expires_ms: int | None  # None: until revoked (made by an earlier release; now every token expires)

    def expired(self, now_ms: int) -> bool:
        return self.expires_ms is not None and now_ms >= self.expires_ms

    def to_row(self) -> list[object]:
        return [
            self.token_id, self.user, self.secret_hash, self.description, self.created_ms, self.expires_ms
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: object) -> ApiToken:
        """The token back from ``to_row``; ``InvalidName`` for a row that cannot be one."""
        if not isinstance(row, list) or len(row) != 6:
            raise InvalidName("token", str(row)[:80], "is not a token row")
        token_id, user, secret_hash, description, created_ms, expires_ms = row
        if (
            not isinstance(user, str)
            or not isinstance(secret_hash, bytes)
            or len(secret_hash) != hashlib.sha256().digest_size
            or not isinstance(description, str)
            or not _is_int(created_ms)
            or not (expires_ms is None or _is_int(expires_ms))
        ):
            raise InvalidName("token", str(row)[:80], "is not a token row")
        return cls(check_token_id(token_id), user, secret_hash, description, created_ms, expires_ms)

    def to_json(self, now_ms: int) -> dict[str, object]:
        """What the admin API shows of it (never a secret, nor its hash)."""
        return {
            "id": self.token_id,
            "user": self.user,
            "description": self.description,
            "created_ms": self.created_ms,
            "expires_ms": self.expires_ms,
            "expired": self.expired(now_ms),
        }


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_token_id(value: object, field: str = "token id") -> str:
    """``value`` if it can be a token's id (16 lowercase hex digits), else ``InvalidName``."""
    if not isinstance(value, str) or len(value) != 2 * ID_BYTES or not set(value) <= _HEX:
        raise InvalidName(field, value, f"a token id is {2 * ID_BYTES} lowercase hex digits")
    return value


def check_token_description(value: object, field: str = "description") -> str:
    """Free text of at most ``TOKEN_DESCRIPTION_BYTES_MAX`` bytes of UTF-8, without control characters."""
    if not isinstance(value, str):
        raise InvalidName(field, value, "must be a string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidName(field, value, "is not UTF-8 text") from None
    if size > TOKEN_DESCRIPTION_BYTES_MAX:
        raise InvalidName(field, value, f"is {size} bytes of UTF-8; at most {TOKEN_DESCRIPTION_BYTES_MAX}")
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise InvalidName(field, value, "must not hold a control character")
    return value


def token_expiry(
    now_ms: int,
    *,
    expires_ms: object = None,
    lifetime_ms: object = None,
    default_lifetime_ms: int = TOKEN_LIFETIME_MS_DEFAULT,
) -> int:
    """When a token made at ``now_ms`` expires: at ``expires_ms`` (ms since the epoch), after
    ``lifetime_ms``, or after ``default_lifetime_ms`` (neither given): every token expires. ``InvalidName``
    names what is wrong: both given, not an integer, not in the future, or more than ten years off."""
    if expires_ms is not None and lifetime_ms is not None:
        raise InvalidName("expires_ms", expires_ms, "give expires_ms or lifetime_ms, not both")
    if lifetime_ms is not None:
        if not isinstance(lifetime_ms, int) or isinstance(lifetime_ms, bool):
            raise InvalidName("lifetime_ms", lifetime_ms, "must be an integer (ms)")
        return _future(now_ms, now_ms + lifetime_ms, "lifetime_ms", lifetime_ms)
    if expires_ms is None:
        return _future(now_ms, now_ms + default_lifetime_ms, "default lifetime", default_lifetime_ms)
    if not isinstance(expires_ms, int) or isinstance(expires_ms, bool):
        raise InvalidName("expires_ms", expires_ms, "must be an integer (ms since the epoch)")
    return _future(now_ms, expires_ms, "expires_ms", expires_ms)


def _future(now_ms: int, expires_ms: int, field: str, given: int) -> int:
    if expires_ms <= now_ms:
        raise InvalidName(field, given, "must lie in the future")
    if expires_ms - now_ms > TOKEN_LIFETIME_MS_MAX:
        raise InvalidName(field, given, f"at most {TOKEN_LIFETIME_MS_MAX} ms (ten years) from now")
    return expires_ms


def secret_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def issue_token(
    user: str,
    now_ms: int,
    expires_ms: int | None,
    description: str = "",
    random_bytes: Callable[[int], bytes] = secrets.token_bytes,
) -> tuple[str, ApiToken]:
    """A new token of ``user``: its text (answer it once, store it nowhere) and what the controller keeps
    of it. Made where the request enters, never in a state machine's apply (every replica must store the
    same id and hash)."""
    token_id = random_bytes(ID_BYTES).hex()
    text = f"{PREFIX}{token_id}_{random_bytes(SECRET_BYTES).hex()}"
    token = ApiToken(
        token_id, user, secret_hash(text), check_token_description(description), now_ms, expires_ms
    )
    return text, token


def parse_token(text: str) -> str | None:
    """The id of a token's text, None when the text cannot be a token."""
    if len(text) != _TEXT_LENGTH or not text.startswith(PREFIX):
        return None
    token_id, separator, secret = text[len(PREFIX) :].partition("_")
    if separator != "_" or len(token_id) != 2 * ID_BYTES or not set(token_id + secret) <= _HEX:
        return None
    return token_id


def is_token(text: str) -> bool:
    """Whether a bearer credential is meant as a user's token (it has the prefix), so that it is checked
    as one rather than as the admin token."""
    return text.startswith(PREFIX)


def check_token(tokens: Mapping[str, ApiToken], text: str, now_ms: int) -> ApiToken | None:
    """The token ``text`` is, if the controller holds it and it has not expired; else None (unknown,
    revoked, expired and wrong alike)."""
    token_id = parse_token(text)
    if token_id is None:
        return None
    token = tokens.get(token_id)
    presented = secret_hash(text)
    if token is None or not hmac.compare_digest(presented, token.secret_hash):
        return None
    return None if token.expired(now_ms) else token


def is_users_token(
    tokens: Mapping[str, ApiToken], users: Collection[str], name: str, presented: str, now_ms: int
) -> bool:
    """Whether ``presented`` is a live token of the user ``name``, who still exists: a token given in
    place of the user's password (HTTP Basic, Kafka's SASL/PLAIN), as Confluent Cloud takes an API key
    and its secret. False for anything else, a password included."""
    if not is_token(presented):
        return False
    token = check_token(tokens, presented, now_ms)
    return token is not None and token.user == name and name in users
