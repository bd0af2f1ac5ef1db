"""Groups whose members live outside the replicated table: Kafka clients' classic groups, which their
coordinator holds in memory (``partitions.groups.classic``), as Kafka does between its writes of
group metadata. The door hands its groups to the node's ``GroupCoordinator`` as a ``LiveGroups``; the
coordinator then lists, describes, deletes and fences one set of groups, whichever door their members use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from partitions.groups.assignors import TopicPartition


@dataclass(frozen=True, slots=True)
class LiveMember:
    member_id: str
    client_id: str
    client_host: str
    assigned: tuple[TopicPartition, ...]  # decoded from its assignment (protocol type "consumer" only)
    instance_id: str | None = None  # a static member's group.instance.id (KIP-345)


@dataclass(frozen=True, slots=True)
class LiveGroup:
    name: str
    state: str  # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable
    protocol_type: str
    protocol: str
    generation: int
    members: tuple[LiveMember, ...]


class LiveGroups(Protocol):
    def live(self, name: str) -> LiveGroup | None:
        """The group as its members hold it now; None when it has no member here."""
        ...

    def names(self) -> Iterable[str]:
        """Every group with members here."""
        ...

    def forget(self, name: str) -> None:
        """The group was deleted: the next group of that name starts at generation 0."""
        ...


class NoLiveGroups:
    """A node without a Kafka listener: every group's members are in the table."""

    def live(self, name: str) -> LiveGroup | None:
        return None

    def names(self) -> Iterable[str]:
        return ()

    def forget(self, name: str) -> None:
        return None
