"""Kafka's delegation tokens (pure): what a SASL-authenticated user makes for a program that holds no
password (Spark's executors, KIP-48), as Apache Kafka serves them.

A token has an id (Kafka's ``Uuid.toString()``: 22 characters of URL-safe base64), an owner (the
principal it logs in as), its requester (who made it), renewers (principals who may renew or expire it
besides its owner), and three times in ms since the epoch: issued, expiry (when it stops working unless
renewed) and max (past which no renewal takes it). Its secret is its HMAC: ``HmacSHA512(key, token id)``,
as Kafka's ``DelegationTokenManager`` makes it, where the key is derived from the cluster secret every node
holds (``hmac_key``; Kafka's ``delegation.token.secret.key``). The controller replicates the token
without its HMAC; every node derives the HMAC again when it is needed (to answer it, to find a token by
it, to check a login), so no replicated byte, snapshot or log line holds a secret.

A client logs in with SASL/SCRAM and the extension ``tokenauth=true``: the token id as the user name and
the HMAC in base64 as the password (``scram_credential``: the SCRAM credential of that password, as
Kafka's ``DelegationTokenCache`` prepares it, with a salt derived from the key so every node answers the
same). The connection then acts as the token's owner. Over HTTP the same pair is HTTP Basic's user and
password (``owner_logging_in``).

Who may (Kafka's ``KafkaApis``/``DelegationTokenControlManager``): the owner and the renewers renew and
expire (``may_renew``); the owner, the requester and the renewers describe (``may_describe``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from partitions.errors import InvalidName
from partitions.security.users import ITERATIONS_DEFAULT, MECHANISMS, ScramCredential, salted_keys

USER_TYPE = "User"  # the only principal type a token names (Kafka: renewers must be users)
RENEWERS_MAX = 64  # principals one token names as its renewers
TOKEN_ID_CHARACTERS = 22  # Kafka's Uuid.toString(): 16 random bytes in URL-safe base64, no padding
_ID_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """A token as the controller replicates it: never its HMAC."""

    token_id: str
    owner: str  # user names: the principal is ``User:<name>``
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    expiry_ms: int
    max_ms: int

    def expired(self, now_ms: int) -> bool:
        """Kafka's rule (``maxTimestamp < now || expiryTimestamp < now``)."""
        return self.expiry_ms < now_ms or self.max_ms < now_ms

    def may_renew(self, user: str) -> bool:
        """Kafka's ``allowedToRenew``: the owner or a renewer (renew and expire alike)."""
        return user == self.owner or user in self.renewers

    def may_describe(self, user: str) -> bool:
        """Kafka's ``ownerOrRenewer``: the owner, the requester or a renewer."""
        return user in (self.owner, self.requester) or user in self.renewers

    def to_row(self) -> list[object]:
        return [
            self.token_id, self.owner, self.requester, list(self.renewers), self.issue_ms, self.expiry_ms,
            self.max_ms,
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: object) -> DelegationToken:
        """The token back from ``to_row``; ``InvalidName`` for a row that cannot be one."""
        if not isinstance(row, list) or len(row) != 7:
            raise InvalidName("delegation token", str(row)[:80], "is not a delegation token row")
        token_id, owner, requester, renewers, issue_ms, expiry_ms, max_ms = row
        if (
            not isinstance(owner, str)
            or not isinstance(requester, str)
            or not isinstance(renewers, list)
            or not all(isinstance(r, str) for r in renewers)
            or not all(_is_int(t) for t in (issue_ms, expiry_ms, max_ms))
        ):
            raise InvalidName("delegation token", str(row)[:80], "is not a delegation token row")
        return cls(check_token_id(token_id), owner, requester, tuple(renewers), issue_ms, expiry_ms, max_ms)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_token_id(value: object) -> str:
    """``value`` if it can be a token's id (22 characters of URL-safe base64), else ``InvalidName``."""
    if not isinstance(value, str) or len(value) != TOKEN_ID_CHARACTERS or not set(value) <= _ID_ALPHABET:
        raise InvalidName("token id", str(value)[:40], f"is {TOKEN_ID_CHARACTERS} characters of base64")
    return value


def new_token_id(random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(random_bytes(16)).decode().rstrip("=")


def hmac_key(cluster_secret: bytes) -> bytes:
    """The key of every token's HMAC, from the cluster secret (the same on every node; it reveals
    nothing of the secret)."""
    return hashlib.sha256(b"raftlog delegation token key\0" + cluster_secret).digest()


def token_hmac(key: bytes, token_id: str) -> bytes:
    """The token's secret: ``HmacSHA512(key, token id)``, 64 bytes, as Kafka makes it."""
    return hmac.new(key, token_id.encode(), "sha512").digest()


def token_times(
    now_ms: int, max_lifetime_ms: int, expiry_time_ms: int, asked_max_lifetime_ms: int
) -> tuple[int, int]:
    """(expiry, max) of a token issued at ``now_ms`` (Kafka's ``createDelegationToken``): its max lifetime
    is the node's ``max_lifetime_ms``, or what was asked when less (and positive); it expires after
    ``expiry_time_ms``, never past its max."""
    lifetime = max_lifetime_ms if asked_max_lifetime_ms <= 0 else min(max_lifetime_ms, asked_max_lifetime_ms)
    max_ms = now_ms + lifetime
    return min(max_ms, now_ms + expiry_time_ms), max_ms


def renew_period(expiry_time_ms: int, asked_ms: int) -> int:
    """How long a renewal adds (Kafka's ``renewDelegationToken``): the node's ``expiry_time_ms``, or what
    was asked when less (and positive)."""
    return expiry_time_ms if asked_ms <= 0 else min(expiry_time_ms, asked_ms)


def principal_user(principal_type: str, principal_name: str, field: str) -> str:
    """The user a principal names; ``InvalidName`` when it is not ``User`` (Kafka:
    INVALID_PRINCIPAL_TYPE) or has no name."""
    if principal_type != USER_TYPE:
        raise InvalidName(field, f"{principal_type}:{principal_name}"[:80], "a token names users only")
    if not principal_name:
        raise InvalidName(field, principal_name, "a principal needs a name")
    return principal_name


class TokenSecrets:
    """A node's view of the tokens' secrets: each token's HMAC and SCRAM credentials, derived from the key
    when first needed and remembered for as long as the token is in the metadata (bounded by the
    controller's caps on tokens)."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._hmacs: dict[str, bytes] = {}
        self._by_hmac: dict[bytes, str] = {}
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def hmac_of(self, token_id: str) -> bytes:
        found = self._hmacs.get(token_id)
        if found is None:
            found = self._hmacs[token_id] = token_hmac(self._key, token_id)
            self._by_hmac[found] = token_id
        return found

    def find(self, tokens: Mapping[str, DelegationToken], presented: bytes) -> DelegationToken | None:
        """The token whose HMAC is ``presented`` (Kafka's ``tokenForHmac``, a map from HMAC to token);
        the map follows the tokens held (those gone are forgotten)."""
        for gone in self._hmacs.keys() - tokens.keys():
            del self._by_hmac[self._hmacs.pop(gone)]
        for token_id in tokens.keys() - self._hmacs.keys():
            self.hmac_of(token_id)
        found = self._by_hmac.get(bytes(presented))
        return None if found is None else tokens.get(found)

    def owner_logging_in(
        self,
        tokens: Mapping[str, DelegationToken],
        users: Collection[str],
        token_id: str,
        password: str,
        now_ms: int,
    ) -> str | None:
        """The owner a token logs in as when its id and its HMAC in base64 are given as a user name and
        password in the clear (HTTP Basic), compared in constant time; None for a token not held, expired,
        whose owner is gone, or a wrong HMAC."""
        token = tokens.get(token_id)
        if token is None or token.expired(now_ms) or token.owner not in users:
            return None
        expected = base64.b64encode(self.hmac_of(token_id))
        return (
            token.owner if hmac.compare_digest(expected, password.encode("utf-8", "surrogatepass")) else None
        )

    def scram_credential(self, token_id: str, mechanism: str) -> ScramCredential:
        """The SCRAM credential of the password ``base64(HMAC)`` (PBKDF2 once per token and mechanism)."""
        key = (token_id, mechanism)
        found = self._credentials.get(key)
        if found is None:
            if len(self._credentials) >= 4 * len(MECHANISMS) * 10_000:  # never past the tokens' caps
                self._credentials.clear()
            password = base64.b64encode(self.hmac_of(token_id)).decode()
            salt = hmac.new(self._key, f"salt\0{mechanism}\0{token_id}".encode(), "sha256").digest()
            _, stored_key, server_key = salted_keys(mechanism, password, salt, ITERATIONS_DEFAULT)
            found = ScramCredential(mechanism, salt, ITERATIONS_DEFAULT, stored_key, server_key)
            self._credentials[key] = found
        return found
