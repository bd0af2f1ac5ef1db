"""The controller's replicated state: topics, their configs and each partition's replica set.

Like Redpanda's raft0, one Raft group over the first nodes holds this metadata. Placement is decided by
the controller leader before proposing (``placement.place``); ``apply`` only validates and records, so it
is deterministic. A topic gets a ``topic_id`` (the Raft index that created it) so that a topic deleted and
created again under the same name never shares a Raft group or a log directory with its predecessor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import msgpack

from partitions.errors import InvalidCommand, InvalidTopic, TopicExists, UnknownTopic
from raftlog.errors import check
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidConfig

CONTROLLER_GROUP = "controller"  # the Raft group (and log directory) name of the controller
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
PARTITIONS_MAX = 10_000
SNAPSHOT_VERSION = 1
_CREATE, _DELETE, _ALTER = 1, 2, 3


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str
    replicas: list[list[str]]  # per partition; the first node is the preferred leader
    configs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    name: str


@dataclass(frozen=True, slots=True)
class AlterConfigs:
    name: str
    configs: dict[str, Any]


ControllerCommand = CreateTopic | DeleteTopic | AlterConfigs


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: int
    replicas: tuple[tuple[str, ...], ...]
    configs: dict[str, Any]

    @property
    def partitions(self) -> int:
        return len(self.replicas)

    def group_id(self, partition: int) -> str:
        """The Raft group (and log directory) name of one partition."""
        return f"{self.name}-{partition}.{self.topic_id}"

    def log_config(self) -> LogConfig:
        return LogConfig.from_properties(self.configs)


def validate_topic(name: str, replicas: list[list[str]], configs: dict[str, Any]) -> None:
    """Raise ``InvalidTopic`` / ``InvalidConfig`` for anything ``CreateTopic`` would refuse."""
    if not isinstance(name, str) or not TOPIC_NAME.match(name) or name in (".", ".."):
        raise InvalidTopic(f"topic name {name!r}: use 1-200 of [A-Za-z0-9._-]")
    if not 1 <= len(replicas) <= PARTITIONS_MAX:
        raise InvalidTopic(f"partitions {len(replicas)} must be between 1 and {PARTITIONS_MAX}")
    factors = {len(r) for r in replicas}
    if len(factors) != 1 or min(factors) < 1:
        raise InvalidTopic(f"every partition needs the same replication factor >= 1, got {sorted(factors)}")
    for replica_set in replicas:
        if len(set(replica_set)) != len(replica_set):
            raise InvalidTopic(f"replica set {replica_set} repeats a node")
    LogConfig.from_properties(configs)


def encode(command: ControllerCommand) -> bytes:
    if isinstance(command, CreateTopic):
        fields: list[object] = [1, _CREATE, command.name, command.replicas, command.configs]
    elif isinstance(command, DeleteTopic):
        fields = [1, _DELETE, command.name]
    else:
        fields = [1, _ALTER, command.name, command.configs]
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def decode(data: bytes) -> ControllerCommand:
    try:
        fields = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise InvalidCommand(f"not msgpack: {exc}") from None
    if not isinstance(fields, list) or len(fields) < 3 or fields[0] != 1:
        raise InvalidCommand(f"unknown controller command {str(fields)[:80]!r}")
    kind, name = fields[1], fields[2]
    if kind == _CREATE and len(fields) == 5 and isinstance(fields[3], list) and isinstance(fields[4], dict):
        return CreateTopic(name, [list(r) for r in fields[3]], fields[4])
    if kind == _DELETE and len(fields) == 3:
        return DeleteTopic(name)
    if kind == _ALTER and len(fields) == 4 and isinstance(fields[3], dict):
        return AlterConfigs(name, fields[3])
    raise InvalidCommand(f"malformed controller command of kind {kind!r}")


ControllerResult = TopicMetadata | InvalidCommand | InvalidTopic | InvalidConfig | TopicExists | UnknownTopic


class ControllerStateMachine:
    """Implements ``raftlog.consensus.interface.StateMachine`` for the controller group."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMetadata] = {}
        self.applied_index = 0

    def apply(self, index: int, term: int, command: bytes) -> ControllerResult:
        """Returns the topic's new metadata, or the typed error that refused the command (not raised:
        a refusal is a deterministic outcome every replica agrees on)."""
        check(index > self.applied_index, f"controller apply of index {index} after {self.applied_index}")
        self.applied_index = index
        try:
            decoded = decode(command)
            if isinstance(decoded, CreateTopic):
                if decoded.name in self.topics:
                    raise TopicExists(decoded.name)
                validate_topic(decoded.name, decoded.replicas, decoded.configs)
                created = TopicMetadata(
                    decoded.name, index, tuple(tuple(r) for r in decoded.replicas), dict(decoded.configs)
                )
                self.topics[decoded.name] = created
                return created
            existing = self.topics.get(decoded.name)
            if existing is None:
                raise UnknownTopic(decoded.name)
            if isinstance(decoded, DeleteTopic):
                del self.topics[decoded.name]
                return existing
            merged = {**existing.configs, **decoded.configs}
            LogConfig.from_properties(merged)
            altered = TopicMetadata(existing.name, existing.topic_id, existing.replicas, merged)
            self.topics[decoded.name] = altered
            return altered
        except (InvalidCommand, InvalidTopic, InvalidConfig, TopicExists, UnknownTopic) as refusal:
            return refusal

    def snapshot(self) -> bytes:
        packed: bytes = msgpack.packb(
            {
                "v": SNAPSHOT_VERSION,
                "applied_index": self.applied_index,
                "topics": [
                    [t.name, t.topic_id, [list(r) for r in t.replicas], t.configs]
                    for t in self.topics.values()
                ],
            },
            use_bin_type=True,
        )
        return packed

    def restore(self, snapshot: bytes) -> None:
        state = msgpack.unpackb(snapshot, raw=False)
        check(
            isinstance(state, dict) and state.get("v") == SNAPSHOT_VERSION,
            f"unknown controller snapshot format {str(state)[:80]!r}",
        )
        self.applied_index = int(state["applied_index"])
        self.topics = {
            name: TopicMetadata(name, topic_id, tuple(tuple(r) for r in replicas), dict(configs))
            for name, topic_id, replicas, configs in state["topics"]
        }
