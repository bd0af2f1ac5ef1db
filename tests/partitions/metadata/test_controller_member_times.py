"""The controller leader's account of its members' times (Kafka's DescribeQuorum LastFetchTimestamp and
LastCaughtUpTimestamp) travels in ``ControllerMembers`` only once the cluster's level allows it: a node of
release 0.1.0, whose ``ControllerMembers`` lacks the fields, may be the one asking, and a field it lacks
fails its decoding (``PeerProtocolError``)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from partitions.controller.members import ControllerMembers
from partitions.errors import PeerProtocolError
from partitions.features import RAFTLOG_VERSION, Features
from partitions.metadata.controller_voters import ControllerVoters
from partitions.peers.codec import ErrorTypes, Registry, pack, unpack
from raftlog_dev import releases

HEARD = {"n1": 1_700_000_000_500, "n2": 1_700_000_000_400, "n3": 1_700_000_000_100}
CAUGHT_UP = {"n1": 1_700_000_000_500, "n2": 1_700_000_000_400}  # n3 behind since it was heard


class Group:
    def status(self) -> Any:
        return SimpleNamespace(
            term=5,
            voters=frozenset({"n1", "n2", "n3"}),
            learners=frozenset(),
            commit_index=42,
            match_index={"n2": 42, "n3": 40},
            heard_at_ms=dict(HEARD),
            caught_up_at_ms=dict(CAUGHT_UP),
        )

    def membership_pending(self) -> str | None:
        return None


class Frontend:
    node_id = "n1"

    def leader_group(self) -> Group:
        return Group()


def _members(level: int) -> ControllerMembers:
    features = Features(lambda: {RAFTLOG_VERSION: level})
    return ControllerVoters(Frontend(), features).controller_members()  # type: ignore[arg-type]


def _release_0_1_0() -> ModuleType:
    """Release 0.1.0's ``partitions.controller.members``, from its worktree (built here if no other test
    built it first: ``raftlog_dev.releases``)."""
    tree = pathlib.Path(releases.release("0.1.0").tree)
    spec = importlib.util.spec_from_file_location("members_0_1_0", tree / "partitions/controller/members.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass reads its own annotations there
    spec.loader.exec_module(module)
    return module


def _registry(kind: type) -> Registry:
    registry = Registry()
    registry.register(kind)
    return registry


def test_at_level_2_the_leader_gives_each_member_s_times_and_they_travel() -> None:
    members = _members(2)
    assert dict(members.heard_at_ms) == HEARD and dict(members.caught_up_at_ms) == CAUGHT_UP
    registry = _registry(ControllerMembers)
    assert unpack(pack(members, registry), registry, ErrorTypes()) == members


def test_at_level_1_no_time_is_given_and_a_node_of_0_1_0_decodes_the_answer() -> None:
    old = _release_0_1_0().ControllerMembers
    members = _members(1)
    assert members.heard_at_ms == () and members.caught_up_at_ms == ()
    decoded = unpack(pack(members, _registry(ControllerMembers)), _registry(old), ErrorTypes())
    assert isinstance(decoded, old)
    assert (decoded.leader, decoded.voters, decoded.match_index) == (
        "n1",
        ("n1", "n2", "n3"),
        {"n2": 42, "n3": 40},
    )
    # what the gate keeps from it: with the times, 0.1.0's class cannot take the answer
    with pytest.raises(PeerProtocolError):
        unpack(pack(_members(2), _registry(ControllerMembers)), _registry(old), ErrorTypes())
