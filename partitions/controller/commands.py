"""The controller's commands (``ControllerCommand``), the checks a command is held to before it is proposed
(``validate_topic``, ``check_replica_set``), and their encoding in the controller's Raft log (``encode``,
``decode``: msgpack, ``[1, kind, ...]``; a kind 0.1.0 does not know it refuses). ``state`` applies them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import msgpack

from partitions.controller import acls as controller_acls
from partitions.controller import delegation_tokens as controller_delegation_tokens
from partitions.controller import producer_owners
from partitions.controller import quotas as controller_quotas
from partitions.controller import resource_configs as controller_configs
from partitions.controller import tokens as controller_tokens
from partitions.controller.acls import CreateAcls, DeleteAcls
from partitions.controller.defaults import PARTITIONS_MAX
from partitions.controller.delegation_tokens import DelegationTokenCommand
from partitions.controller.producer_owners import RegisterProducerOwner
from partitions.controller.quotas import AlterClientQuotas
from partitions.controller.resource_configs import AlterResourceConfigs
from partitions.controller.tokens import CreateToken, DeleteToken
from partitions.errors import InvalidCommand, InvalidName, InvalidReassignment, InvalidTopic
from partitions.names import check_topic_name
from partitions.security.users import ScramCredential
from raftlog.storage.config import LogConfig

_CREATE, _DELETE, _ALTER = 1, 2, 3
_MOVE, _CANCEL_MOVE, _STEP_MOVE, _NODE_FLAG = 4, 5, 6, 7
_SET_USER, _DELETE_USER, _ALTER_USER = 8, 9, 10
_CREATE_ACLS, _DELETE_ACLS = 11, 12
_CREATE_TOKEN, _DELETE_TOKEN = 13, 14
_ADD_PARTITIONS = 15
_REGISTER_PRODUCER_OWNER = 16
_SET_FEATURE_LEVEL = 17  # a node of 0.1.0 refuses it (never proposed while one runs)
_ALTER_CLIENT_QUOTAS = 18  # a node of 0.1.0 refuses it (proposed from ``features.CLIENT_QUOTAS``)
_ALTER_RESOURCE_CONFIGS = 19  # a node of 0.1.0 refuses it (proposed from ``features.RESOURCE_CONFIGS``)
_FORM_CLUSTER = 20  # a node of 0.1.0 refuses it (a no-op): only a new cluster's first command (FormCluster)
# a node of 0.1.0 refuses it (proposed from ``features.DELEGATION_TOKENS``): Kafka's delegation tokens
_DELEGATION_TOKEN = 21
NODE_FLAGS = ("decommissioning", "maintenance")


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str
    replicas: list[list[str]]  # per partition; the first node is the preferred leader
    configs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    name: str
    # the topic's creation index when the deletion names one (DeleteTopics v6 by id, encoded only once
    # ``features.TOPIC_DELETE_BY_ID`` is finalized): another incarnation of the name is refused, not deleted
    topic_id: int | None = None


@dataclass(frozen=True, slots=True)
class AddPartitions:
    """Grow a topic from ``len(replicas)`` fewer partitions to ``count`` (Kafka's CreatePartitions): the new
    partitions' replica sets, placed by the proposer. Refused when the topic no longer has the partitions
    the proposer counted (another change landed first), so two racing proposals never both apply."""

    name: str
    count: int
    replicas: list[list[str]]  # per new partition, in order; the first node is the preferred leader


@dataclass(frozen=True, slots=True)
class AlterConfigs:
    name: str
    configs: dict[str, Any]  # merged into the topic's (``merge_configs``: None removes a property)


@dataclass(frozen=True, slots=True)
class MoveReplicas:
    """Begin moving a partition to ``target`` (validated against liveness by the proposer beforehand)."""

    name: str
    partition: int
    target: list[str]


@dataclass(frozen=True, slots=True)
class CancelMove:
    """Turn a move around: its target becomes the replica set it started from."""

    name: str
    partition: int


@dataclass(frozen=True, slots=True)
class StepMove:
    """Record one committed Raft membership change of a moving partition: its voters are now ``replicas``,
    and ``adding`` (if any) is the node whose replica joins next (it opens its replica on seeing this)."""

    name: str
    partition: int
    replicas: list[str]
    adding: str | None = None


@dataclass(frozen=True, slots=True)
class SetNodeFlag:
    """Mark a node ``decommissioning`` or in ``maintenance`` (``on``), or clear that mark."""

    node: str
    flag: str
    on: bool


@dataclass(frozen=True, slots=True)
class SetUser:
    """Create a user, or replace its credentials (a new password), one per SCRAM mechanism."""

    name: str
    credentials: tuple[ScramCredential, ...]


@dataclass(frozen=True, slots=True)
class DeleteUser:
    name: str


@dataclass(frozen=True, slots=True)
class AlterUser:
    """Change some of a user's credentials, one mechanism at a time (Kafka's AlterUserScramCredentials):
    remove those of ``deletions`` (each must exist), then add or replace ``upsertions``. A user left
    without a credential is deleted; a user that did not exist is created by an upsertion."""

    name: str
    upsertions: tuple[ScramCredential, ...]
    deletions: tuple[str, ...]  # mechanisms


@dataclass(frozen=True, slots=True)
class SetFeatureLevel:
    """Finalize ``feature`` at ``level`` (``partitions.features``: checked by the proposer against
    every node's supported levels; the apply refuses only a lower level than the finalized one)."""

    feature: str
    level: int


@dataclass(frozen=True, slots=True)
class FormCluster:
    """A new cluster's feature levels, decided once, when it forms (as ``kafka-storage format
    --release-version`` writes the bootstrap ``metadata.version``): applied only as the first command of
    the controller's log, refused (``FeatureUpdateRefused``, nothing changed) after any other, so that no
    node's later start can finalize anything. ``levels``: every feature of the forming node's code, at the
    level it was told to form at (``partitions.features.release_levels``)."""

    levels: Mapping[str, int]


ControllerCommand = (
    FormCluster
    | CreateTopic
    | AddPartitions
    | DeleteTopic
    | AlterConfigs
    | MoveReplicas
    | CancelMove
    | StepMove
    | SetNodeFlag
    | SetUser
    | DeleteUser
    | AlterUser
    | CreateAcls
    | DeleteAcls
    | CreateToken
    | DeleteToken
    | RegisterProducerOwner
    | SetFeatureLevel
    | AlterClientQuotas
    | AlterResourceConfigs
    | DelegationTokenCommand
)


def validate_topic(name: str, replicas: list[list[str]], configs: dict[str, Any]) -> None:
    """Raise ``InvalidName`` / ``InvalidTopic`` / ``InvalidConfig`` for anything ``CreateTopic`` would
    refuse. Names the cluster reserves for its own topics are valid here: users are kept from them at the
    edge (``names.check_user_topic_name``)."""
    check_topic_name(name)
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
    elif isinstance(command, AddPartitions):
        fields = [1, _ADD_PARTITIONS, command.name, command.count, command.replicas]
    elif isinstance(command, DeleteTopic):
        fields = [1, _DELETE, command.name]
        if command.topic_id is not None:
            fields.append(command.topic_id)
    elif isinstance(command, AlterConfigs):
        fields = [1, _ALTER, command.name, command.configs]
    elif isinstance(command, MoveReplicas):
        fields = [1, _MOVE, command.name, command.partition, command.target]
    elif isinstance(command, CancelMove):
        fields = [1, _CANCEL_MOVE, command.name, command.partition]
    elif isinstance(command, StepMove):
        fields = [1, _STEP_MOVE, command.name, command.partition, command.replicas, command.adding]
    elif isinstance(command, SetUser):
        fields = [1, _SET_USER, command.name, [c.to_row() for c in command.credentials]]
    elif isinstance(command, DeleteUser):
        fields = [1, _DELETE_USER, command.name]
    elif isinstance(command, AlterUser):
        upsertions = [c.to_row() for c in command.upsertions]
        fields = [1, _ALTER_USER, command.name, upsertions, list(command.deletions)]
    elif isinstance(command, CreateAcls | DeleteAcls):  # no name: the rows stand in its place
        kind = _CREATE_ACLS if isinstance(command, CreateAcls) else _DELETE_ACLS
        fields = [1, kind, controller_acls.rows(command)]
    elif isinstance(command, CreateToken | DeleteToken):  # no name: the rows stand in its place
        kind = _CREATE_TOKEN if isinstance(command, CreateToken) else _DELETE_TOKEN
        fields = [1, kind, controller_tokens.rows(command)]
    elif isinstance(command, RegisterProducerOwner):
        fields = [1, _REGISTER_PRODUCER_OWNER, command.principal]
    elif isinstance(command, SetFeatureLevel):
        fields = [1, _SET_FEATURE_LEVEL, command.feature, command.level]
    elif isinstance(command, FormCluster):  # no name: the levels stand in its place
        fields = [1, _FORM_CLUSTER, dict(sorted(command.levels.items()))]
    elif isinstance(command, AlterClientQuotas):  # no name: the rows stand in its place
        fields = [1, _ALTER_CLIENT_QUOTAS, controller_quotas.rows(command)]
    elif isinstance(command, AlterResourceConfigs):  # versioned rows in the name's place
        fields = [1, _ALTER_RESOURCE_CONFIGS, controller_configs.rows(command)]
    elif isinstance(command, DelegationTokenCommand):  # rows: operation first
        fields = [1, _DELEGATION_TOKEN, controller_delegation_tokens.rows(command)]
    else:
        fields = [1, _NODE_FLAG, command.node, command.flag, command.on]
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def decode(data: bytes | memoryview) -> ControllerCommand:
    try:
        fields = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise InvalidCommand(f"not msgpack: {exc}") from None
    if not isinstance(fields, list) or len(fields) < 3 or fields[0] != 1:
        raise InvalidCommand(f"unknown controller command {str(fields)[:80]!r}")
    kind, name = fields[1], fields[2]
    if kind == _CREATE and len(fields) == 5 and isinstance(fields[3], list) and isinstance(fields[4], dict):
        return CreateTopic(name, [list(r) for r in fields[3]], fields[4])
    if kind == _ADD_PARTITIONS and len(fields) == 5 and isinstance(fields[3], int) and _sets(fields[4]):
        return AddPartitions(name, fields[3], [list(r) for r in fields[4]])
    if kind == _DELETE and len(fields) == 3:
        return DeleteTopic(name)
    if kind == _DELETE and len(fields) == 4 and type(fields[3]) is int:
        return DeleteTopic(name, fields[3])
    if kind == _ALTER and len(fields) == 4 and isinstance(fields[3], dict):
        return AlterConfigs(name, fields[3])
    if kind == _MOVE and len(fields) == 5 and isinstance(fields[3], int) and _names(fields[4]):
        return MoveReplicas(name, fields[3], list(fields[4]))
    if kind == _CANCEL_MOVE and len(fields) == 4 and isinstance(fields[3], int):
        return CancelMove(name, fields[3])
    if (
        kind == _STEP_MOVE
        and len(fields) == 6
        and isinstance(fields[3], int)
        and _names(fields[4])
        and (fields[5] is None or isinstance(fields[5], str))
    ):
        return StepMove(name, fields[3], list(fields[4]), fields[5])
    if kind == _NODE_FLAG and len(fields) == 5 and fields[3] in NODE_FLAGS and isinstance(fields[4], bool):
        return SetNodeFlag(name, fields[3], fields[4])
    if kind == _SET_USER and len(fields) == 4 and isinstance(fields[3], list) and fields[3]:
        try:
            credentials = tuple(ScramCredential.from_row(row) for row in fields[3])
        except (InvalidName, TypeError, ValueError):
            raise InvalidCommand("malformed user credentials") from None
        return SetUser(name, credentials)
    if kind == _DELETE_USER and len(fields) == 3:
        return DeleteUser(name)
    if kind == _ALTER_USER and len(fields) == 5 and isinstance(fields[3], list) and _names(fields[4]):
        try:
            upsertions = tuple(ScramCredential.from_row(row) for row in fields[3])
        except (InvalidName, TypeError, ValueError):
            raise InvalidCommand("malformed user credentials") from None
        return AlterUser(name, upsertions, tuple(fields[4]))
    if kind in (_CREATE_ACLS, _DELETE_ACLS) and len(fields) == 3:
        return controller_acls.from_rows(kind == _CREATE_ACLS, fields[2])
    if kind == _SET_FEATURE_LEVEL and len(fields) == 4 and isinstance(name, str) and _level(fields[3]):
        return SetFeatureLevel(name, fields[3])
    if (
        kind == _FORM_CLUSTER
        and len(fields) == 3
        and isinstance(name, dict)
        and all(isinstance(f, str) and _level(v) for f, v in name.items())
    ):
        return FormCluster(MappingProxyType(dict(name)))
    if kind in (_CREATE_TOKEN, _DELETE_TOKEN) and len(fields) == 3:
        return controller_tokens.from_rows(kind == _CREATE_TOKEN, fields[2])
    if kind == _REGISTER_PRODUCER_OWNER and len(fields) == 3:
        return producer_owners.from_row(fields[2])
    if kind == _ALTER_CLIENT_QUOTAS and len(fields) == 3:
        return controller_quotas.from_rows(fields[2])
    if kind == _ALTER_RESOURCE_CONFIGS and len(fields) == 3:
        return controller_configs.from_rows(fields[2])
    if kind == _DELEGATION_TOKEN and len(fields) == 3:
        return controller_delegation_tokens.from_rows(fields[2])
    raise InvalidCommand(f"malformed controller command of kind {kind!r}")


def _level(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 2**15 - 1


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(n, str) for n in value)


def _sets(value: object) -> bool:
    return isinstance(value, list) and all(_names(r) for r in value)


def check_replica_set(replicas: list[str]) -> None:
    """Raise ``InvalidReassignment`` for an empty replica set or one repeating a node."""
    if not replicas:
        raise InvalidReassignment("a partition needs at least one replica")
    if len(set(replicas)) != len(replicas):
        raise InvalidReassignment(f"replica set {replicas} repeats a node")
