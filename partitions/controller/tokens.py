"""The controller's token commands (pure, deterministic): ``CreateToken`` adds a user's API token as the
node the request entered made it (``tokens.issue_token``: id, hash of the secret, times), ``DeleteToken``
revokes one. ``controller.py`` encodes them among its commands, keeps the tokens in its metadata (by id)
and its snapshot, and drops a user's tokens with the user; the rules live here so that the controller's
module stays about topics.

Bounds: at most ``TOKENS_PER_USER_MAX`` tokens a user, ``TOKENS_MAX`` in a cluster; a creation beyond
either is refused (``TooManyTokens``). A creation first drops every token that expired before the new
one's creation time, so tokens nobody can use any more do not hold the room (the time is the command's,
so every replica drops the same ones): ``token_tables.with_token``, as for delegation tokens.

A user's tokens are revoked with it (``without_user``) when it is deleted and, from ``raftlog.version``
``REVOKED_ON_RESET_LEVEL``, when its credentials change (a password reset, ``SetUser`` of a user that exists
or ``AlterUser``), in that same controller change: no request finds the new password and an old token both
valid.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from partitions.controller import token_tables
from partitions.errors import InvalidCommand, InvalidName, UnknownToken, UnknownUser
from partitions.security.tokens import ApiToken, check_token_id

TOKENS_PER_USER_MAX = 100
TOKENS_MAX = 10_000  # in a cluster: every node holds them all in its controller metadata
REVOKED_ON_RESET_LEVEL = 2  # of raftlog.version: a password reset revokes the user's tokens (0.1.0 kept them)


@dataclass(frozen=True, slots=True)
class CreateToken:
    token: ApiToken


@dataclass(frozen=True, slots=True)
class DeleteToken:
    user: str
    token_id: str


TokenCommand = CreateToken | DeleteToken


def rows(command: TokenCommand) -> list[object]:
    """The command's part of its encoding."""
    if isinstance(command, CreateToken):
        return command.token.to_row()
    return [command.user, command.token_id]


def from_rows(create: bool, value: object) -> TokenCommand:
    """The command back from ``rows``; ``InvalidCommand`` when they are not (a node of another version, or
    a bug: the proposer checked them)."""
    try:
        if create:
            return CreateToken(ApiToken.from_row(value))
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
            return DeleteToken(value[0], check_token_id(value[1]))
    except InvalidName:
        pass
    raise InvalidCommand("malformed token command")


def apply(
    tokens: Mapping[str, ApiToken], users: Collection[str], command: TokenCommand
) -> tuple[dict[str, ApiToken], ApiToken]:
    """The tokens after the change (by id) and the token made or revoked; raises ``UnknownUser``,
    ``UnknownToken``, ``TooManyTokens`` or ``InvalidCommand`` and changes nothing."""
    if isinstance(command, DeleteToken):
        revoked = tokens.get(command.token_id)
        if revoked is None or revoked.user != command.user:
            raise UnknownToken(command.user, command.token_id)
        return {i: t for i, t in tokens.items() if i != command.token_id}, revoked
    token = command.token
    if token.user not in users:
        raise UnknownUser(token.user)
    if token.token_id in tokens:  # 64 random bits: a bug or a replayed command, never chance
        raise InvalidCommand(f"token id {token.token_id!r} exists")
    if token.expires_ms is not None and token.expires_ms <= token.created_ms:
        raise InvalidCommand(f"token {token.token_id!r} expires before it was made")
    kept = token_tables.with_token(tokens, token, _user, token.created_ms, TOKENS_PER_USER_MAX, TOKENS_MAX)
    return kept, token


def without_user(tokens: Mapping[str, ApiToken], user: str) -> dict[str, ApiToken] | None:
    """The tokens once ``user`` is deleted (its own revoked with it); None when it had none."""
    return token_tables.without_owner(tokens, user, _user)


def _user(token: ApiToken) -> str:
    return token.user
