"""The controller's record of who holds producer ids (pure, deterministic): ``RegisterProducerOwner`` gives a
principal its number the first time it asks for a producer id (``security.producer_ids``: the number rides
in every producer id it is given, so any node reads an id's owner from its metadata). Numbers are 1, 2, ...
in the order principals first asked, never given again, never taken back (a user deleted and made again is
the same principal). At most ``OWNERS_MAX`` principals (``TooManyProducerOwners`` past it).

``controller.state`` encodes the command among its own and keeps the numbers in its metadata and snapshot
(a snapshot of a release before this one has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from partitions.errors import InvalidCommand, TooManyProducerOwners
from partitions.security.producer_ids import OWNERS_MAX


@dataclass(frozen=True, slots=True)
class RegisterProducerOwner:
    principal: str  # "User:NAME", or "User:ANONYMOUS"


def from_row(value: object) -> RegisterProducerOwner:
    if not isinstance(value, str) or not value:
        raise InvalidCommand(f"malformed producer owner {str(value)[:80]!r}")
    return RegisterProducerOwner(value)


def apply(owners: Mapping[str, int], command: RegisterProducerOwner) -> tuple[dict[str, int] | None, int]:
    """The numbers after the command (None: unchanged, the principal had one) and the principal's number."""
    known = owners.get(command.principal)
    if known is not None:
        return None, known
    if len(owners) >= OWNERS_MAX:
        raise TooManyProducerOwners(command.principal, OWNERS_MAX)
    number = len(owners) + 1  # never taken back: the next is always free
    return {**owners, command.principal: number}, number


def snapshot_rows(owners: Mapping[str, int]) -> list[list[object]]:
    return [[principal, number] for principal, number in sorted(owners.items(), key=lambda item: item[1])]


def from_snapshot(rows: object) -> dict[str, int]:
    """The numbers a snapshot holds ([] in one from before producer ids had owners)."""
    if not isinstance(rows, list):
        raise InvalidCommand(f"malformed producer owners {str(rows)[:80]!r}")
    owners: dict[str, int] = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], str) and type(row[1]) is int):
            raise InvalidCommand(f"malformed producer owner {str(row)[:80]!r}")
        owners[row[0]] = row[1]
    return owners
