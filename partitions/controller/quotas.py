"""Client quotas as the controller holds them (Kafka's ``ClientQuotaControlManager``, KIP-546): pure and
deterministic. An *entity* is a user, a client id, or a user and a client id, each either named or the
default (``None``: Kafka's ``<default>``), or an ip address alone (KIP-612), named or the default; each
entity has quotas by key (``KEYS``; an ip's: ``IP_KEYS``, ``connection_creation_rate``). ``AlterClientQuotas``
sets and removes some of an entity's quotas; an entity left with none is gone. Validation is Kafka's: an
unknown entity type or key, an empty name, a value <= 0, a fractional byte rate are ``InvalidQuota``
(INVALID_REQUEST), and a command changes all of its entities or none.

Which quota applies to a request, and how it is enforced, is ``partitions.security.quotas``'s rule; this
module only stores them. ``controller.state`` encodes the command among its own (kind 18, allowed from
``features.CLIENT_QUOTAS``) and keeps the quotas in its metadata and snapshot (a snapshot of a release
before this one has none).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass

from partitions.errors import InvalidCommand, InvalidQuota
from partitions.security.quotas import CLIENT_ID, ENTITY_TYPES, IP, IP_KEYS, KEYS, USER, Entity, describe

ENTITIES_MAX = 10_000  # entities with quotas in the cluster (each is a row of every snapshot)
INTEGRAL_MAX = 2**63 - 1  # Kafka's LONG: a byte rate
IP_INTEGRAL_MAX = 2**31 - 1  # Kafka's INT: a connection creation rate
__all__ = ["CLIENT_ID", "IP", "USER", "Entity", "describe"]  # the doors' names of entities


@dataclass(frozen=True, slots=True)
class QuotaChange:
    """One entity's changes: a key's new value, or None to remove it."""

    entity: Entity
    changes: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True, slots=True)
class AlterClientQuotas:
    changes: tuple[QuotaChange, ...]


def entity(components: Mapping[str, str | None] | list[tuple[str, str | None]]) -> Entity:
    """The canonical entity of ``components`` (type -> name or None); InvalidQuota as Kafka refuses one:
    empty, a type repeated or unknown, an empty name, an ip with a user or client id, an ip name that is
    not an address (Kafka also takes a host name it resolves; a controller's apply resolves nothing)."""
    pairs = list(components.items()) if isinstance(components, Mapping) else list(components)
    if not pairs:
        raise InvalidQuota("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for kind, name in pairs:
        if kind in seen:
            raise InvalidQuota(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in (*ENTITY_TYPES, IP):
            raise InvalidQuota(f"Unhandled client quota entity type: {kind}")
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidQuota(f"Empty {kind} not supported")
        seen[kind] = name
    if IP in seen:
        if len(seen) > 1:
            raise InvalidQuota(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
            )
        address = seen[IP]
        if address is not None and not _is_address(address):
            raise InvalidQuota(f"{address} is not a valid IP or resolvable host.")
        return ((IP, address),)
    return tuple((kind, seen[kind]) for kind in ENTITY_TYPES if kind in seen)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def keys_of(value: Entity) -> Mapping[str, bool]:
    """The keys an entity may have (key -> integral)."""
    return IP_KEYS if value and value[0][0] == IP else KEYS


def check_value(key: str, value: float | None, keys: Mapping[str, bool] = KEYS) -> None:
    """InvalidQuota for a key Kafka does not allow the entity (``keys``: ``keys_of`` it), or a value it
    refuses."""
    integral = keys.get(key)
    if integral is None:
        raise InvalidQuota(f"Invalid configuration key {key}")
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise InvalidQuota(f"Quota {key} must be a number")
    if value <= 0.0:
        raise InvalidQuota(f"Quota {key} must be greater than 0")
    if keys is IP_KEYS and value > IP_INTEGRAL_MAX:
        raise InvalidQuota(f"Proposed value for {key} is too large for an INT.")
    if integral and value > INTEGRAL_MAX:
        raise InvalidQuota(f"Proposed value for {key} is too large for a LONG.")
    if integral and value != math.floor(value):
        raise InvalidQuota(f"{key} cannot be a fractional value.")


def apply(
    quotas: Mapping[Entity, Mapping[str, float]], command: AlterClientQuotas
) -> dict[Entity, dict[str, float]]:
    """The quotas after the command, every change checked first (InvalidQuota: nothing changes)."""
    for change in command.changes:
        check_entity(change.entity)
        keys = [key for key, _ in change.changes]
        if len(set(keys)) != len(keys):
            raise InvalidQuota(f"a key changed twice for entity {describe(change.entity)}")
        for key, value in change.changes:
            check_value(key, value, keys_of(change.entity))
    after = {e: dict(values) for e, values in quotas.items()}
    for change in command.changes:
        values = after.setdefault(change.entity, {})
        for key, value in change.changes:
            if value is None:
                values.pop(key, None)
            else:
                values[key] = float(value)
        if not values:
            del after[change.entity]
    if len(after) > ENTITIES_MAX and len(after) > len(quotas):
        raise InvalidQuota(f"at most {ENTITIES_MAX} entities with quotas in the cluster")
    return after


def check_entity(value: Entity) -> None:
    if entity(list(value)) != value:
        raise InvalidQuota(f"entity {value!r} is not in canonical order")


def matches(value: Entity, exact: Mapping[str, str | None], specified: set[str], strict: bool) -> bool:
    """Whether an entity matches a DescribeClientQuotas filter (Kafka's ``ClientQuotasImage.matches``):
    ``exact`` types with that name (None: the default), ``specified`` types with any name (the default
    included); ``strict``: no other type."""
    components = dict(value)
    if strict and len(components) != len(exact) + len(specified):
        return False
    for kind, name in exact.items():
        if kind not in components or components[kind] != name:
            return False
    return all(kind in components for kind in specified)


# -- the command's and the snapshot's rows ---------------------------------------------------------------


def rows(command: AlterClientQuotas) -> list[object]:
    return [[[list(pair) for pair in c.entity], [list(pair) for pair in c.changes]] for c in command.changes]


def from_rows(value: object) -> AlterClientQuotas:
    if not isinstance(value, list):
        raise InvalidCommand(f"malformed client quotas {str(value)[:80]!r}")
    try:
        changes = tuple(
            QuotaChange(_entity_row(entity_row), tuple((str(k), _value(v)) for k, v in changes))
            for entity_row, changes in value
        )
    except (TypeError, ValueError):
        raise InvalidCommand(f"malformed client quotas {str(value)[:80]!r}") from None
    if not changes:
        raise InvalidCommand("a client quota change of no entity")
    return AlterClientQuotas(changes)


def snapshot_rows(quotas: Mapping[Entity, Mapping[str, float]]) -> list[object]:
    return [
        [[list(pair) for pair in e], dict(sorted(values.items()))]
        for e, values in sorted(quotas.items(), key=_order)
    ]


def from_snapshot(value: list[list[object]]) -> dict[Entity, dict[str, float]]:
    restored: dict[Entity, dict[str, float]] = {}
    for entity_row, values in value:
        if not isinstance(values, dict):
            raise ValueError(f"malformed client quotas of {entity_row!r} in a snapshot")
        restored[_entity_row(entity_row)] = {str(k): float(v) for k, v in values.items()}
    return restored


def _order(item: tuple[Entity, Mapping[str, float]]) -> list[tuple[str, str]]:
    return [(kind, "" if name is None else "\x00" + name) for kind, name in item[0]]


def _entity_row(value: object) -> Entity:
    if not isinstance(value, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in value
    ):
        raise ValueError("malformed entity")
    return tuple((str(kind), None if name is None else str(name)) for kind, name in value)


def _value(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("malformed quota value")
    return float(value)
