"""What the controller's two tables of tokens share (pure, deterministic): users' API tokens
(``tokens.py``) and Kafka's delegation tokens (``delegation_tokens.py``), each kept by id.

- ``with_token``: a creation's bounds. It first drops every token expired at the creation's time, so
  tokens nobody can use any more do not hold the room (the time is the command's, so every replica drops
  the same ones); then at most ``per_owner_max`` tokens an owner and ``total_max`` in the cluster, beyond
  either ``TooManyTokens``.
- ``without_owner``: a deleted user's tokens go with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from partitions.errors import TooManyTokens


class Token(Protocol):
    @property
    def token_id(self) -> str: ...

    def expired(self, now_ms: int) -> bool: ...


T = TypeVar("T", bound=Token)


def with_token(
    tokens: Mapping[str, T],
    token: T,
    owner_of: Callable[[T], str],
    now_ms: int,
    per_owner_max: int,
    total_max: int,
    kind: str = "",
) -> dict[str, T]:
    """The tokens (by id) with ``token`` added, made at ``now_ms``, once those expired by then are dropped;
    raises ``TooManyTokens`` (its scope followed by ``kind``, e.g. " (delegation tokens)") when its owner
    holds ``per_owner_max`` of the rest or the cluster ``total_max``."""
    owner = owner_of(token)
    kept = {i: t for i, t in tokens.items() if not t.expired(now_ms)}
    owned = sum(1 for t in kept.values() if owner_of(t) == owner)
    if owned >= per_owner_max:
        raise TooManyTokens(owner, owned, per_owner_max, f"user {owner!r}{kind}")
    if len(kept) >= total_max:
        raise TooManyTokens(owner, len(kept), total_max, f"the cluster{kind}")
    kept[token.token_id] = token
    return kept


def without_owner(tokens: Mapping[str, T], user: str, owner_of: Callable[[T], str]) -> dict[str, T] | None:
    """The tokens once ``user`` is deleted (those it owns go with it); None when it owned none."""
    if not any(owner_of(t) == user for t in tokens.values()):
        return None
    return {i: t for i, t in tokens.items() if owner_of(t) != user}
