"""A peer value's field at its default stays home, so the previous release's class still decodes it."""

from __future__ import annotations

import dataclasses

import pytest

from partitions.consumers.protocol import GroupSummary
from partitions.errors import PeerProtocolError
from partitions.peers.codec import ErrorTypes, Registry, pack, unpack


@dataclasses.dataclass(frozen=True, slots=True)
class OldGroupSummary:  # GroupSummary as 0.1.0 declared it: no group_type
    group: str
    generation: int
    assignor: str
    members: int
    coordinator_partition: int
    state: str = "Empty"
    protocol_type: str = "consumer"
    door: str | None = None


def _registry(kind: type) -> Registry:
    registry = Registry()
    registry.register(kind)
    return registry


def _as_old(data: bytes) -> object:
    old = dataclasses.make_dataclass(
        "GroupSummary", [(f.name, f.type, f) for f in dataclasses.fields(OldGroupSummary)]
    )
    return unpack(data, _registry(old), ErrorTypes())


def test_a_field_added_with_its_default_reaches_the_previous_release_decodable() -> None:
    summary = GroupSummary("g", 3, "range", 2, 7, state="Stable", door="kafka")
    decoded = _as_old(pack(summary, _registry(GroupSummary)))
    assert dataclasses.asdict(decoded) == {  # type: ignore[call-overload]
        "group": "g",
        "generation": 3,
        "assignor": "range",
        "members": 2,
        "coordinator_partition": 7,
        "state": "Stable",
        "protocol_type": "consumer",
        "door": "kafka",
    }


def test_a_field_that_says_something_travels_and_the_new_release_reads_every_default_back() -> None:
    registry = _registry(GroupSummary)
    share = GroupSummary("g", 1, "", 0, 0, group_type="share")
    assert unpack(pack(share, registry), registry, ErrorTypes()) == share
    assert unpack(pack(GroupSummary("g", 0, "", 0, 0), registry), registry, ErrorTypes()) == GroupSummary(
        "g", 0, "", 0, 0
    )
    with pytest.raises(PeerProtocolError):  # the old class cannot hold what only the new one knows
        _as_old(pack(share, registry))
