"""The controller's replicated state: topics, their configs and each partition's replica set; node flags;
users and their SCRAM credentials (``users.py``: salts are made by the proposer, never in ``apply``); ACLs
(``controller_acls.py``: their commands and rules); users' API tokens (``controller_tokens.py``: made by the
proposer too, the secret's hash only; a user's go with it); the principals holding producer ids and their
numbers (``producer_owners.py``); Kafka's delegation tokens (``delegation_tokens.py``: made by the proposer,
never their HMAC; an owner's go with it); client quotas (``quotas.py``); the configs of client metrics
subscriptions, groups, brokers' throttles and topics' throttled replicas (``resource_configs.py``); the
finalized feature levels.

Like Redpanda's raft0, one Raft group over the first nodes holds this metadata. Placement is decided by
the controller leader before proposing (``placement.place``); ``apply`` only validates and records, so it
is deterministic. A topic gets a ``topic_id`` (the Raft index that created it) so that a topic deleted and
created again under the same name never shares a Raft group or a log directory with its predecessor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import msgpack

from partitions import resource_configs
from partitions.controller import acls as controller_acls
from partitions.controller import delegation_tokens as controller_delegation_tokens
from partitions.controller import producer_owners
from partitions.controller import quotas as controller_quotas
from partitions.controller import resource_configs as controller_configs
from partitions.controller import tokens as controller_tokens
from partitions.controller.acls import AclCommand, AclResult, CreateAcls, DeleteAcls
from partitions.controller.commands import (
    NODE_FLAGS,
    AddPartitions,
    AlterUser,
    CancelMove,
    ControllerCommand,
    CreateTopic,
    DeleteTopic,
    DeleteUser,
    FormCluster,
    MoveReplicas,
    SetFeatureLevel,
    SetNodeFlag,
    SetUser,
    StepMove,
    check_replica_set,
    decode,
    validate_topic,
)
from partitions.controller.defaults import PARTITIONS_MAX
from partitions.controller.delegation_tokens import DelegationTokenCommand
from partitions.controller.producer_owners import RegisterProducerOwner
from partitions.controller.quotas import AlterClientQuotas, Entity
from partitions.controller.resource_configs import AlterResourceConfigs, Resource
from partitions.controller.tokens import CreateToken, DeleteToken, TokenCommand
from partitions.errors import (
    DelegationTokenExpired,
    DelegationTokenOwnerMismatch,
    FeatureUpdateRefused,
    InvalidCommand,
    InvalidConfigRequest,
    InvalidName,
    InvalidQuota,
    InvalidReassignment,
    InvalidResourceConfig,
    InvalidTopic,
    NoReassignment,
    ReassignmentInProgress,
    TooManyProducerOwners,
    TooManyTokens,
    TopicExists,
    TopicIdGone,
    UnknownCredential,
    UnknownPartition,
    UnknownToken,
    UnknownTopic,
    UnknownUser,
)
from partitions.features import RAFTLOG_VERSION, finalized_level
from partitions.names import check_user_name
from partitions.security.acls import AclBinding
from partitions.security.delegation_tokens import DelegationToken
from partitions.security.tokens import ApiToken
from partitions.security.users import MECHANISMS, ScramCredential
from raftlog.errors import check
from raftlog.packing import unpack_versioned
from raftlog.storage.config import LogConfig
from raftlog.storage.errors import InvalidConfig

CONTROLLER_GROUP = "controller"  # the Raft group (and log directory) name of the controller
SNAPSHOT_VERSION = 1


def merge_configs(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A topic's configs after ``changes``: a value replaces the property's, None removes the property
    (back to its default; Kafka's IncrementalAlterConfigs DELETE)."""
    merged = {**current, **changes}
    return {key: value for key, value in merged.items() if value is not None}


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition moving from ``original`` to ``target``, one Raft membership change at a time."""

    original: tuple[str, ...]
    target: tuple[str, ...]
    adding: str | None = None  # a node whose replica is joining the Raft group right now
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic as the controller holds it. Immutable, configs included (a read-only view of a copy made
    here), so a metadata snapshot read on the event loop never changes under its reader."""

    name: str
    topic_id: int
    replicas: tuple[tuple[str, ...], ...]
    configs: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.configs, MappingProxyType):
            object.__setattr__(self, "configs", MappingProxyType(dict(self.configs)))

    @property
    def partitions(self) -> int:
        return len(self.replicas)

    def group_id(self, partition: int) -> str:
        """The Raft group (and log directory) name of one partition."""
        return f"{self.name}-{partition}.{self.topic_id}"

    def log_config(self, defaults: Mapping[str, Any] = MappingProxyType({})) -> LogConfig:
        """Its log's config: its own configs over ``defaults`` (the cluster's, ``ControllerMetadata.
        topic_log_defaults``) over raftlog's."""
        base = LogConfig.from_properties(defaults) if defaults else None
        return LogConfig.from_properties(self.configs, base)


_Refusal = (
    InvalidCommand
    | InvalidName
    | InvalidTopic
    | InvalidConfig
    | TopicExists
    | UnknownTopic
    | UnknownPartition
    | InvalidReassignment
    | ReassignmentInProgress
    | NoReassignment
    | UnknownUser
    | UnknownToken
    | TooManyTokens
    | DelegationTokenExpired
    | DelegationTokenOwnerMismatch
    | TooManyProducerOwners
    | FeatureUpdateRefused
    | InvalidQuota
    | InvalidConfigRequest
    | InvalidResourceConfig
)
ControllerResult = (
    TopicMetadata
    | Reassignment
    | frozenset[str]
    | AclResult
    | ApiToken
    | DelegationToken
    | int
    | dict[str, int]
    | _Refusal
)


@dataclass(frozen=True, slots=True)
class ControllerMetadata:
    """The controller's applied state at one index. Immutable: every apply publishes a new one whole, so a
    reader on another thread (the event loop) holds one consistent view, never dicts being changed."""

    applied_index: int = 0
    topics: Mapping[str, TopicMetadata] = field(default_factory=lambda: MappingProxyType({}))
    reassignments: Mapping[tuple[str, int], Reassignment] = field(  # (topic, partition) -> move
        default_factory=lambda: MappingProxyType({})
    )
    node_flags: Mapping[str, frozenset[str]] = field(
        default_factory=lambda: MappingProxyType({flag: frozenset() for flag in NODE_FLAGS})
    )
    users: Mapping[str, tuple[ScramCredential, ...]] = field(default_factory=lambda: MappingProxyType({}))
    acls: tuple[AclBinding, ...] = ()  # sorted, no repeats (``controller_acls``)
    # users' API tokens by id (``controller_tokens``): never a secret, its hash
    tokens: Mapping[str, ApiToken] = field(default_factory=lambda: MappingProxyType({}))
    # each principal holding producer ids and its number (``producer_owners``), replaced whole on change
    producer_owners: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # finalized feature levels (``partitions.features``); a feature not named is at level 1
    features: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # client quotas by entity (``controller_quotas``), replaced whole on change
    quotas: Mapping[Entity, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))
    # configs of client metrics subscriptions, groups, brokers and topics' throttles by (kind, name)
    # (``controller_configs``), replaced whole on change
    resource_configs: Mapping[Resource, Mapping[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # Kafka's delegation tokens by id (``controller_delegation_tokens``): never their HMAC
    delegation_tokens: Mapping[str, DelegationToken] = field(default_factory=lambda: MappingProxyType({}))

    def topic_log_defaults(self) -> dict[str, str]:
        """The cluster's defaults of topics' log configs (topic config -> value), set as Kafka's broker
        defaults (``resource_configs.CLUSTER_LOG_DEFAULTS``)."""
        return resource_configs.topic_log_defaults(
            self.resource_configs.get((resource_configs.BROKER, ""), {})
        )


class ControllerStateMachine:
    """Implements ``raftlog.consensus.interface.StateMachine`` for the controller group. ``metadata`` is
    the applied state, replaced whole by each apply (driver thread) and read anywhere."""

    def __init__(self) -> None:
        self.metadata = ControllerMetadata()

    @property
    def applied_index(self) -> int:
        return self.metadata.applied_index

    def apply(self, index: int, term: int, command: bytes | memoryview) -> ControllerResult:
        """Returns the topic's new metadata, or the typed error that refused the command (not raised:
        a refusal is a deterministic outcome every replica agrees on)."""
        current = self.metadata
        check(
            index > current.applied_index, f"controller apply of index {index} after {current.applied_index}"
        )
        change = _Change(current)
        try:
            result = change.apply(index, decode(command))
        except (
            InvalidCommand,
            InvalidName,
            InvalidTopic,
            InvalidConfig,
            TopicExists,
            UnknownTopic,
            UnknownPartition,
            InvalidReassignment,
            ReassignmentInProgress,
            NoReassignment,
            UnknownUser,
            UnknownToken,
            TooManyTokens,
            DelegationTokenExpired,
            DelegationTokenOwnerMismatch,
            TooManyProducerOwners,
            FeatureUpdateRefused,
            InvalidQuota,
            InvalidConfigRequest,
            InvalidResourceConfig,
        ) as refusal:
            self.metadata = replace(current, applied_index=index)
            return refusal
        self.metadata = change.published(index)
        return result

    def snapshot(self) -> bytes:
        metadata = self.metadata
        packed: bytes = msgpack.packb(
            {
                "v": SNAPSHOT_VERSION,
                "applied_index": metadata.applied_index,
                "topics": [
                    [t.name, t.topic_id, [list(r) for r in t.replicas], dict(t.configs)]
                    for t in metadata.topics.values()
                ],
                "reassignments": [
                    [topic, partition, list(r.original), list(r.target), r.adding, r.cancelled]
                    for (topic, partition), r in sorted(metadata.reassignments.items())
                ],
                "node_flags": {flag: sorted(nodes) for flag, nodes in sorted(metadata.node_flags.items())},
                "users": [
                    [name, [c.to_row() for c in credentials]]
                    for name, credentials in sorted(metadata.users.items())
                ],
                "acls": [acl.to_row() for acl in metadata.acls],
                "tokens": [token.to_row() for _, token in sorted(metadata.tokens.items())],
                # each only once it holds something (owners are registered from raftlog.version 2; a level
                # once finalized): until then the snapshot is the previous release's bytes
                **(
                    {"producer_owners": producer_owners.snapshot_rows(metadata.producer_owners)}
                    if metadata.producer_owners
                    else {}
                ),
                **({"features": dict(sorted(metadata.features.items()))} if metadata.features else {}),
                # only once a quota was set: until then the snapshot is the previous release's bytes
                **({"quotas": controller_quotas.snapshot_rows(metadata.quotas)} if metadata.quotas else {}),
                # only once a resource config was set: until then the previous release's bytes
                **(
                    {"resource_configs": controller_configs.snapshot_rows(metadata.resource_configs)}
                    if metadata.resource_configs
                    else {}
                ),
                # only once a delegation token was made: until then the previous release's bytes
                **(
                    {
                        "delegation_tokens": [
                            token.to_row() for _, token in sorted(metadata.delegation_tokens.items())
                        ]
                    }
                    if metadata.delegation_tokens
                    else {}
                ),
            },
            use_bin_type=True,
        )
        return packed

    def restore(self, snapshot: bytes) -> None:
        state = unpack_versioned(snapshot, SNAPSHOT_VERSION, "controller snapshot")
        flags = state.get("node_flags", {})
        self.metadata = ControllerMetadata(
            int(state["applied_index"]),
            MappingProxyType(
                {
                    name: TopicMetadata(name, topic_id, tuple(tuple(r) for r in replicas), dict(configs))
                    for name, topic_id, replicas, configs in state["topics"]
                }
            ),
            MappingProxyType(
                {
                    (topic, partition): Reassignment(tuple(original), tuple(target), adding, cancelled)
                    for topic, partition, original, target, adding, cancelled in state.get(
                        "reassignments", []
                    )
                }
            ),
            MappingProxyType({flag: frozenset(flags.get(flag, [])) for flag in NODE_FLAGS}),
            MappingProxyType(
                {
                    name: tuple(ScramCredential.from_row(row) for row in rows)
                    for name, rows in state.get("users", [])
                }
            ),
            tuple(AclBinding.from_row(row) for row in state.get("acls", [])),  # none before ACLs existed
            MappingProxyType(  # none before tokens existed
                {token.token_id: token for token in map(ApiToken.from_row, state.get("tokens", []))}
            ),
            MappingProxyType(producer_owners.from_snapshot(state.get("producer_owners", []))),  # none before
            MappingProxyType(  # none before feature levels existed: every feature at level 1
                {str(feature): int(level) for feature, level in state.get("features", {}).items()}
            ),
            MappingProxyType(  # none before client quotas existed
                {
                    entity: MappingProxyType(values)
                    for entity, values in controller_quotas.from_snapshot(state.get("quotas", [])).items()
                }
            ),
            _frozen(controller_configs.from_snapshot(state.get("resource_configs", []))),  # none before
            MappingProxyType(  # none before delegation tokens existed
                {
                    token.token_id: token
                    for token in map(DelegationToken.from_row, state.get("delegation_tokens", []))
                }
            ),
        )


class _Change:
    """One apply: copies of the parts of the metadata it changes (copy on write), published whole at the
    end, or dropped when the command is refused."""

    def __init__(self, base: ControllerMetadata) -> None:
        self._base = base
        self.topics: dict[str, TopicMetadata] | None = None
        self.reassignments: dict[tuple[str, int], Reassignment] | None = None
        self.node_flags: dict[str, frozenset[str]] | None = None
        self.users: dict[str, tuple[ScramCredential, ...]] | None = None
        self.acls: tuple[AclBinding, ...] | None = None
        self.tokens: dict[str, ApiToken] | None = None
        self.producer_owners: dict[str, int] | None = None
        self.features: dict[str, int] | None = None
        self.quotas: dict[Entity, Mapping[str, float]] | None = None
        self.resource_configs: dict[Resource, Mapping[str, str]] | None = None
        self.delegation_tokens: dict[str, DelegationToken] | None = None

    def _topics(self) -> dict[str, TopicMetadata]:
        if self.topics is None:
            self.topics = dict(self._base.topics)
        return self.topics

    def _moves(self) -> dict[tuple[str, int], Reassignment]:
        if self.reassignments is None:
            self.reassignments = dict(self._base.reassignments)
        return self.reassignments

    def published(self, index: int) -> ControllerMetadata:
        base = self._base
        return ControllerMetadata(
            index,
            base.topics if self.topics is None else MappingProxyType(self.topics),
            base.reassignments if self.reassignments is None else MappingProxyType(self.reassignments),
            base.node_flags if self.node_flags is None else MappingProxyType(self.node_flags),
            base.users if self.users is None else MappingProxyType(self.users),
            base.acls if self.acls is None else self.acls,
            base.tokens if self.tokens is None else MappingProxyType(self.tokens),
            base.producer_owners if self.producer_owners is None else MappingProxyType(self.producer_owners),
            base.features if self.features is None else MappingProxyType(self.features),
            base.quotas if self.quotas is None else MappingProxyType(self.quotas),
            base.resource_configs if self.resource_configs is None else _frozen(self.resource_configs),
            base.delegation_tokens
            if self.delegation_tokens is None
            else MappingProxyType(self.delegation_tokens),
        )

    def apply(self, index: int, decoded: ControllerCommand) -> ControllerResult:
        if isinstance(decoded, CreateAcls | DeleteAcls):
            return self._apply_acls(decoded)
        if isinstance(decoded, CreateToken | DeleteToken):
            return self._apply_token(decoded)
        if isinstance(decoded, DelegationTokenCommand):
            self.delegation_tokens, token = controller_delegation_tokens.apply(
                self._base.delegation_tokens, self._base.users, decoded
            )
            return token
        if isinstance(decoded, RegisterProducerOwner):
            self.producer_owners, number = producer_owners.apply(self._base.producer_owners, decoded)
            return number
        if isinstance(decoded, SetUser | DeleteUser):
            return self._apply_user(decoded)
        if isinstance(decoded, AlterUser):
            return self._alter_user(decoded)
        if isinstance(decoded, AlterClientQuotas):
            after = controller_quotas.apply(self._base.quotas, decoded)
            self.quotas = {entity: MappingProxyType(values) for entity, values in after.items()}
            return len(decoded.changes)
        if isinstance(decoded, AlterResourceConfigs):
            if decoded.kind == "topic" and decoded.name not in self._base.topics:
                raise UnknownTopic(decoded.name)
            self.resource_configs = dict(controller_configs.apply(self._base.resource_configs, decoded))
            return len(decoded.changes)
        if isinstance(decoded, FormCluster):
            if self._base.applied_index != 0:
                raise FeatureUpdateRefused(
                    ",".join(sorted(decoded.levels)),
                    max(decoded.levels.values(), default=1),
                    f"the cluster formed before (its controller applied index {self._base.applied_index}): "
                    "its levels change only by an upgrade",
                )
            self.features = dict(decoded.levels)
            return dict(self.features)
        if isinstance(decoded, SetFeatureLevel):
            current = self._base.features.get(decoded.feature, 1)
            if decoded.level < current:
                raise FeatureUpdateRefused(decoded.feature, decoded.level, f"finalized at {current}")
            self.features = {**self._base.features, decoded.feature: decoded.level}
            return dict(self.features)
        if isinstance(decoded, SetNodeFlag):
            nodes = self._base.node_flags[decoded.flag]
            flagged = nodes | {decoded.node} if decoded.on else nodes - {decoded.node}
            self.node_flags = {**self._base.node_flags, decoded.flag: flagged}
            return flagged
        if isinstance(decoded, CreateTopic):
            if decoded.name in self._base.topics:
                raise TopicExists(decoded.name)
            validate_topic(decoded.name, decoded.replicas, decoded.configs)
            created = TopicMetadata(
                decoded.name, index, tuple(tuple(r) for r in decoded.replicas), dict(decoded.configs)
            )
            self._topics()[decoded.name] = created
            return created
        existing = self._base.topics.get(decoded.name)
        if existing is None:
            raise UnknownTopic(decoded.name)
        if isinstance(decoded, DeleteTopic):
            if decoded.topic_id is not None and decoded.topic_id != existing.topic_id:
                raise TopicIdGone(decoded.name, decoded.topic_id)  # another topic of the name: not deleted
            del self._topics()[decoded.name]
            moves = self._moves()
            for key in [k for k in moves if k[0] == decoded.name]:
                del moves[key]
            if ("topic", decoded.name) in self._base.resource_configs:  # its throttled replicas go with it
                self.resource_configs = dict(
                    controller_configs.without_topic(self._base.resource_configs, decoded.name)
                )
            return existing
        if isinstance(decoded, MoveReplicas | CancelMove | StepMove):
            return self._apply_move(existing, decoded)
        if isinstance(decoded, AddPartitions):
            return self._add_partitions(existing, decoded)
        merged = merge_configs(existing.configs, decoded.configs)
        LogConfig.from_properties(merged)
        altered = TopicMetadata(existing.name, existing.topic_id, existing.replicas, merged)
        self._topics()[decoded.name] = altered
        return altered

    def _add_partitions(self, existing: TopicMetadata, command: AddPartitions) -> TopicMetadata:
        if existing.partitions + len(command.replicas) != command.count or not command.replicas:
            raise InvalidTopic(
                f"topic {existing.name!r} has {existing.partitions} partitions: cannot grow to "
                f"{command.count} by {len(command.replicas)}"
            )
        if command.count > PARTITIONS_MAX:
            raise InvalidTopic(f"partitions {command.count} must be between 1 and {PARTITIONS_MAX}")
        for replica_set in command.replicas:  # an existing partition may be mid-move: not compared
            if not replica_set or len(set(replica_set)) != len(replica_set):
                raise InvalidTopic(f"replica set {replica_set} is empty or repeats a node")
        replicas = [list(r) for r in existing.replicas] + command.replicas
        grown = TopicMetadata(
            existing.name, existing.topic_id, tuple(tuple(r) for r in replicas), existing.configs
        )
        self._topics()[existing.name] = grown
        return grown

    def _apply_acls(self, command: AclCommand) -> AclResult:
        acls, result = controller_acls.apply(self._base.acls, command)
        if acls != self._base.acls:
            self.acls = acls  # a new tuple only when they changed (front doors cache by identity)
        return result

    def _apply_token(self, command: TokenCommand) -> ApiToken:
        self.tokens, token = controller_tokens.apply(self._base.tokens, self._base.users, command)
        return token

    def _user_gone(self, name: str) -> None:
        """A deleted user's tokens are revoked with it, and the delegation tokens it owns."""
        self.tokens = controller_tokens.without_user(self._base.tokens, name)
        self.delegation_tokens = controller_delegation_tokens.without_owner(
            self._base.delegation_tokens, name
        )

    def _credentials_changed(self, name: str) -> None:
        """A user whose credentials changed (a password reset) loses its tokens in the same change, so no
        token made with the old password outlives it. From ``raftlog.version`` 2 (a node of 0.1.0, which
        keeps them, is then kept out of the cluster), so that every replica applies the same rule."""
        if finalized_level(self._base.features, RAFTLOG_VERSION) >= controller_tokens.REVOKED_ON_RESET_LEVEL:
            self.tokens = controller_tokens.without_user(self._base.tokens, name)

    def _apply_user(self, command: SetUser | DeleteUser) -> frozenset[str]:
        """The user's mechanisms now (empty: deleted)."""
        name = check_user_name(command.name)
        users = dict(self._base.users)
        if isinstance(command, DeleteUser):
            if name not in users:
                raise UnknownUser(name)
            del users[name]
            self.users = users
            self._user_gone(name)
            return frozenset()
        if len({c.mechanism for c in command.credentials}) != len(command.credentials):
            raise InvalidCommand(f"user {name!r}: one credential per mechanism")
        if name in users:  # a new password
            self._credentials_changed(name)
        users[name] = command.credentials
        self.users = users
        return frozenset(c.mechanism for c in command.credentials)

    def _alter_user(self, command: AlterUser) -> frozenset[str]:
        """The user's mechanisms after the change (empty: it has none left and is deleted)."""
        name = check_user_name(command.name)
        changed = [*command.deletions, *(c.mechanism for c in command.upsertions)]
        if not changed:
            raise InvalidCommand(f"user {name!r}: a change of no credential")
        if len(set(changed)) != len(changed):
            raise InvalidCommand(f"user {name!r}: each mechanism changed at most once")
        unknown = [m for m in command.deletions if m not in MECHANISMS]
        if unknown:
            raise InvalidCommand(f"user {name!r}: no such mechanism {unknown[0]!r}")
        users = dict(self._base.users)
        credentials = {c.mechanism: c for c in users.get(name, ())}
        for mechanism in command.deletions:
            if mechanism not in credentials:
                raise UnknownCredential(name, mechanism)
            del credentials[mechanism]
        for credential in command.upsertions:
            credentials[credential.mechanism] = credential
        if credentials:
            if name in users:  # a password set or removed for a mechanism: its tokens go
                self._credentials_changed(name)
            users[name] = tuple(credentials[m] for m in sorted(credentials))
        else:
            users.pop(name, None)
            self._user_gone(name)
        self.users = users
        return frozenset(credentials)

    def _apply_move(
        self, topic: TopicMetadata, command: MoveReplicas | CancelMove | StepMove
    ) -> TopicMetadata | Reassignment:
        partition = command.partition
        if not 0 <= partition < topic.partitions:
            raise UnknownPartition(topic.name, partition)
        key = (topic.name, partition)
        current = self._base.reassignments.get(key)
        if isinstance(command, MoveReplicas):
            if current is not None:
                raise ReassignmentInProgress(topic.name, partition, current.target)
            check_replica_set(command.target)
            original = topic.replicas[partition]
            if tuple(command.target) == original:
                raise InvalidReassignment(f"{topic.name}/{partition} already has replicas {list(original)}")
            started = Reassignment(original, tuple(command.target))
            self._moves()[key] = started
            return started
        if current is None:
            raise NoReassignment(topic.name, partition)
        if isinstance(command, CancelMove):
            cancelled = replace(current, target=current.original, cancelled=True)
            self._moves()[key] = cancelled
            return cancelled
        check_replica_set(command.replicas)
        replicas = tuple(command.replicas)
        if set(replicas) == set(current.target) and command.adding is None:
            replicas = current.target  # done: the target's order names the preferred leader
            del self._moves()[key]
        else:
            self._moves()[key] = replace(current, adding=command.adding)
        assignment = list(topic.replicas)
        assignment[partition] = replicas
        moved = replace(topic, replicas=tuple(assignment))
        self._topics()[topic.name] = moved
        return moved


def _frozen(resources: Mapping[Resource, Mapping[str, str]]) -> Mapping[Resource, Mapping[str, str]]:
    return MappingProxyType({r: MappingProxyType(dict(values)) for r, values in resources.items()})
