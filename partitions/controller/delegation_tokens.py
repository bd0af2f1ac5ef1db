"""The controller's delegation token commands (pure, deterministic): Kafka's ``DelegationTokenRecord`` and
``RemoveDelegationTokenRecord`` as ``DelegationTokenControlManager`` decides them. The time of each comes
in the command (the clock of the node the request entered); ``apply`` reads no clock.

- ``CreateDelegationToken``: a token as the entering node made it (``security.delegation_tokens``: id and
  times; its HMAC is never replicated). Its owner must be a user of the cluster (a user deleted takes its
  tokens with it, ``without_owner``). Bounds: at most ``TOKENS_PER_OWNER_MAX`` tokens an owner,
  ``TOKENS_MAX`` in the cluster, after the tokens expired at the new one's issue are dropped (the time is
  the command's, so every replica drops the same ones); beyond either, ``TooManyTokens``.
- ``RenewDelegationToken``: by its owner or a renewer (``DelegationTokenOwnerMismatch`` else); an expired
  token is refused (``DelegationTokenExpired``); the expiry becomes ``min(max, now + period)``.
- ``ExpireDelegationToken``: by the same; a negative period removes the token at once, else an expired
  one is refused and the expiry becomes ``min(max, now + period)``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from partitions.controller import token_tables
from partitions.errors import (
    DelegationTokenExpired,
    DelegationTokenOwnerMismatch,
    InvalidCommand,
    InvalidName,
    UnknownToken,
    UnknownUser,
)
from partitions.security.delegation_tokens import RENEWERS_MAX, DelegationToken, check_token_id

TOKENS_PER_OWNER_MAX = 100
TOKENS_MAX = 10_000  # in a cluster: every node holds them all in its controller metadata
_CREATE, _RENEW, _EXPIRE = 1, 2, 3  # the first field of the rows


@dataclass(frozen=True, slots=True)
class CreateDelegationToken:
    token: DelegationToken


@dataclass(frozen=True, slots=True)
class RenewDelegationToken:
    """Push the token's expiry to ``now_ms + period_ms`` (at most its max), as ``user`` asks."""

    token_id: str
    user: str
    now_ms: int
    period_ms: int


@dataclass(frozen=True, slots=True)
class ExpireDelegationToken:
    """Set the token's expiry to ``now_ms + period_ms`` (at most its max); a negative period removes it."""

    token_id: str
    user: str
    now_ms: int
    period_ms: int


DelegationTokenCommand = CreateDelegationToken | RenewDelegationToken | ExpireDelegationToken


def rows(command: DelegationTokenCommand) -> list[object]:
    """The command's part of its encoding: its operation first."""
    if isinstance(command, CreateDelegationToken):
        return [_CREATE, command.token.to_row()]
    operation = _RENEW if isinstance(command, RenewDelegationToken) else _EXPIRE
    return [operation, command.token_id, command.user, command.now_ms, command.period_ms]


def from_rows(value: object) -> DelegationTokenCommand:
    """The command back from ``rows``; ``InvalidCommand`` when they are not one."""
    try:
        if isinstance(value, list) and len(value) == 2 and value[0] == _CREATE:
            return CreateDelegationToken(DelegationToken.from_row(value[1]))
        if (
            isinstance(value, list)
            and len(value) == 5
            and value[0] in (_RENEW, _EXPIRE)
            and isinstance(value[2], str)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value[3:])
        ):
            kind = RenewDelegationToken if value[0] == _RENEW else ExpireDelegationToken
            return kind(check_token_id(value[1]), value[2], value[3], value[4])
    except InvalidName:
        pass
    raise InvalidCommand("malformed delegation token command")


def apply(
    tokens: Mapping[str, DelegationToken], users: Collection[str], command: DelegationTokenCommand
) -> tuple[dict[str, DelegationToken], DelegationToken]:
    """The tokens after the change (by id) and the token as it now is (as it was, when removed); raises
    ``UnknownUser``, ``UnknownToken``, ``DelegationTokenExpired``, ``DelegationTokenOwnerMismatch``,
    ``TooManyTokens`` or ``InvalidCommand`` and changes nothing."""
    if isinstance(command, CreateDelegationToken):
        return _create(tokens, users, command.token)
    token = tokens.get(command.token_id)
    if token is None:
        raise UnknownToken(command.user, command.token_id)
    # Kafka's order: a renewal checks the expiry before the caller, an expiry the caller first
    if isinstance(command, RenewDelegationToken) and token.expired(command.now_ms):
        raise DelegationTokenExpired(command.token_id)
    if not token.may_renew(command.user):
        raise DelegationTokenOwnerMismatch(command.user, command.token_id)
    after = dict(tokens)
    if isinstance(command, ExpireDelegationToken) and command.period_ms < 0:
        del after[command.token_id]
        return after, token
    if token.expired(command.now_ms):
        raise DelegationTokenExpired(command.token_id)
    expiry_ms = min(token.max_ms, command.now_ms + command.period_ms)
    after[command.token_id] = changed = DelegationToken(
        token.token_id, token.owner, token.requester, token.renewers, token.issue_ms, expiry_ms, token.max_ms
    )
    return after, changed


def _create(
    tokens: Mapping[str, DelegationToken], users: Collection[str], token: DelegationToken
) -> tuple[dict[str, DelegationToken], DelegationToken]:
    if token.owner not in users:
        raise UnknownUser(token.owner)
    if token.token_id in tokens:  # 128 random bits: a bug or a replayed command, never chance
        raise InvalidCommand(f"delegation token id {token.token_id!r} exists")
    if not token.issue_ms <= token.expiry_ms <= token.max_ms:
        raise InvalidCommand(f"delegation token {token.token_id!r}: issue <= expiry <= max does not hold")
    if len(token.renewers) > RENEWERS_MAX:
        raise InvalidCommand(f"delegation token {token.token_id!r}: more than {RENEWERS_MAX} renewers")
    kept = token_tables.with_token(
        tokens, token, _owner, token.issue_ms, TOKENS_PER_OWNER_MAX, TOKENS_MAX, " (delegation tokens)"
    )
    return kept, token


def without_owner(tokens: Mapping[str, DelegationToken], user: str) -> dict[str, DelegationToken] | None:
    """The tokens once ``user`` is deleted (those it owns go with it); None when it owned none."""
    return token_tables.without_owner(tokens, user, _owner)


def _owner(token: DelegationToken) -> str:
    return token.owner
