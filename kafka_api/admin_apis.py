"""Topic administration over Kafka: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs and DescribeCluster, each run where it must (the controller leader)
through the node's cluster-wide admin service.

The topic configs are raftlog's (``raftlog.storage.config``, Kafka's names). AlterConfigs replaces a
topic's configs as Kafka's does: a property the request leaves out goes back to its default.
CreatePartitions grows a topic, its new partitions placed by raftlog: replicas are never assigned by hand
(refused naming why). A CreateTopics leaving the partitions or the replication factor to the broker (-1)
gets the node's ``--num-partitions`` and ``--default-replication-factor``, as Kafka's broker gives its
``num.partitions`` and ``default.replication.factor``.

With ``serve --enforce-acls`` each resource is checked as Kafka checks it, and refused alone: CreateTopics
CREATE on the cluster or the topic, DeleteTopics DELETE and CreatePartitions ALTER on the topic
(TOPIC_AUTHORIZATION_FAILED); DescribeConfigs DESCRIBE_CONFIGS and the alters ALTER_CONFIGS on the topic,
or on the cluster for a broker (CLUSTER_AUTHORIZATION_FAILED); DescribeCluster none, as a Kafka broker's.
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import broker_loggers, resource_configs, wire
from kafka_api.door import Door, placed_nodes
from kafka_api.errors import Caught, Refused, code_of
from kafka_api.topic_ids import kafka_topic_id
from kafka_api.topics import ZERO_TOPIC_ID, names_by_id, topic_ids
from partitions.controller.state import merge_configs
from partitions.errors import AuthorizationFailed, InvalidTopic, UnknownTopic
from partitions.features import TOPIC_ASSIGNMENT
from partitions.metadata.service import AdminService
from partitions.names import broker_id, check_user_topic_name
from partitions.resource_configs import BROKER, THROTTLED_REPLICAS
from partitions.resource_configs import TOPIC as TOPIC_KIND
from partitions.security.acls import AclOperation, ResourceType
from partitions.topic_configs import (
    ConfigEntry,
    alterable,
    check_changeable,
    creation_configs,
    describe_broker,
    describe_topic,
    settable,
    stored_name,
)
from raftlog.storage.config import PROPERTY_FIELDS, LogConfig
from raftlog.storage.errors import InvalidConfig

TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8
# Kafka's ConfigSource and ConfigType codes
SOURCE_LOGGER = 6  # DYNAMIC_BROKER_LOGGER_CONFIG
TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "LONG": 5, "DOUBLE": 6, "LIST": 7}
SET, DELETE = 0, 1
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
DELETE_BY_ID_VERSION = 6  # DeleteTopics names each topic by name or by id


def _refusal(
    door: Door, operation: AclOperation, resource_type: int, name: str
) -> AuthorizationFailed | None:
    """Why the connection may not (a topic's resource, a group's, or another's: the cluster's); None: it
    may."""
    if resource_type == TOPIC_RESOURCE:
        return None if door.allows(operation, TOPIC, name) else door.refusal(operation, TOPIC, name)
    other = resource_configs.acl_resource(resource_type, name)
    if other is not None:
        return None if door.allows(operation, *other) else door.refusal(operation, *other)
    return None if door.allows(operation, CLUSTER) else door.refusal(operation, CLUSTER)


def _authorized(door: Door, operation: AclOperation, resource_type: int, name: str) -> None:
    refused = _refusal(door, operation, resource_type, name)
    if refused is not None:
        raise refused


def _default_replication(door: Door) -> int:
    """The replication factor of a topic created without one: Kafka's default.replication.factor, the
    node's ``--default-replication-factor`` (``kafka_api.auto_topics.TopicDefaults``)."""
    return door.topic_defaults.replication(sum(1 for n in door.node.metadata.nodes() if n.state == "alive"))


# -- CreateTopics, DeleteTopics, CreatePartitions ---------------------------------------------------


async def create_topics(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "CreatableTopicResult")
    config_cls = wire.sibling(cls, "CreatableTopicConfigs", missing_ok=True)  # v5 on
    timeout_ms = wire.millis(body.timeout)  # how long the controller may take (``ChangeTime``)
    defaults: list[dict[str, str]] = []  # the cluster's defaults of log configs, read once for the answers

    async def create(topic: Any) -> Any:
        partitions = topic.num_partitions if topic.num_partitions > 0 else door.topic_defaults.partitions
        factor = topic.replication_factor if topic.replication_factor > 0 else _default_replication(door)
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        created = None
        stored: dict[str, object] = {}
        assignment: list[list[str]] | None = None
        with Caught() as caught:  # every error is this topic's answer
            if not door.allows(AclOperation.CREATE, CLUSTER):
                _authorized(door, AclOperation.CREATE, TOPIC_RESOURCE, topic.name)
            check_user_topic_name(topic.name)
            if topic.assignments:  # the replicas placed by hand (kafka-topics --replica-assignment)
                assignment = _assignment(door, topic)
                partitions, factor = len(assignment), len(assignment[0])
            elif topic.num_partitions in (0,) or topic.num_partitions < -1:
                raise Refused(
                    ErrorCode.invalid_partitions, f"{topic.num_partitions} partitions: positive or -1"
                )
            if not topic.assignments and (topic.replication_factor in (0,) or topic.replication_factor < -1):
                raise Refused(
                    ErrorCode.invalid_replication_factor,
                    f"replication factor {topic.replication_factor}: positive or -1",
                )
            configs = creation_configs(configs, factor)  # min.insync.replicas=2 and the like: honoured
            stored = settable(configs)  # as the topic stores them: refused here, validate_only answers too
            typed = LogConfig.from_properties(stored).to_properties()
            configs = {key: typed[stored_name(key)] for key in configs}  # typed, as the HTTP API sends them
            if not getattr(body, "validate_only", False):
                created = await door.node.cluster.admin.call(
                    AdminService.create_topic,
                    topic.name,
                    partitions,
                    factor,
                    configs,
                    timeout_ms,
                    **({} if assignment is None else {"assignment": assignment}),
                )
        code, message = caught.code, caught.message
        settings, config_code = None, ErrorCode.none
        if code is ErrorCode.none and config_cls is not None:
            # the topic is made: a failed read of the cluster's defaults leaves its configs unanswered,
            # with the error in topic_config_error_code, as the field is for
            with Caught() as unread:
                if not defaults:
                    defaults.append(await resource_configs.topic_log_defaults(door))
                settings = describe_topic(stored, factor, cluster_defaults=defaults[0])
            config_code = unread.code
        return wire.build(
            result_cls,
            name=topic.name,
            error_code=code,
            error_message=message,
            topic_config_error_code=config_code,
            num_partitions=(created.partitions if created else partitions) if code is ErrorCode.none else -1,
            replication_factor=(len(created.replicas[0]) if created else factor)
            if code is ErrorCode.none
            else -1,
            configs=_creatable_configs(config_cls, settings) if config_cls and settings else None,
            # v7: the new topic's id, as Metadata and Fetch name it; none for validate_only or an error
            topic_id=kafka_topic_id(door.cluster_id, created) if created else ZERO_TOPIC_ID,
        )

    # A name given twice is answered once, INVALID_REQUEST, and created under neither entry (Kafka's
    # ControllerApis: "Duplicate topic name."); one answer per name is what librdkafka can parse
    counts = collections.Counter(topic.name for topic in body.topics)
    unique = [topic for topic in body.topics if counts[topic.name] == 1]
    duplicated = list(dict.fromkeys(topic.name for topic in body.topics if counts[topic.name] > 1))
    results = list(await asyncio.gather(*(create(topic) for topic in unique)))
    results += [
        wire.build(
            result_cls,
            name=name,
            error_code=ErrorCode.invalid_request,
            error_message="Duplicate topic name.",
            topic_config_error_code=ErrorCode.none,
            num_partitions=-1,
            replication_factor=-1,
            configs=None,
            topic_id=ZERO_TOPIC_ID,
        )
        for name in duplicated
    ]
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, topics=tuple(results))


def _assignment(door: Door, topic: Any) -> list[list[str]]:
    """A CreateTopics entry's replicas placed by hand, as node ids (a broker id is its node id's number):
    Kafka's answers to a request that also sets a count, names a partition twice or skips one, or names a
    broker there is not; ``placement.check_assignment`` (below the doors) checks the replica sets. Refused
    until the cluster finalized ``features.TOPIC_ASSIGNMENT`` (a node of 0.1.0 would place it itself)."""
    if topic.replication_factor != -1:
        raise Refused(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        )
    if topic.num_partitions != -1:
        raise Refused(
            ErrorCode.invalid_request,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    brokers: dict[int, Any] = {}
    for entry in topic.assignments:
        if entry.partition_index in brokers:
            raise Refused(
                ErrorCode.invalid_replica_assignment,
                f"Found multiple manual partition assignments for partition {entry.partition_index}",
            )
        brokers[entry.partition_index] = entry.broker_ids
    by_partition = dict(zip(brokers, _placed_by_hand(door, list(brokers.values())), strict=True))
    if sorted(by_partition) != list(range(len(by_partition))):
        raise Refused(
            ErrorCode.invalid_replica_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return [by_partition[p] for p in range(len(by_partition))]


def _placed_by_hand(door: Door, brokers: list[Any]) -> list[list[str]]:
    """Replica sets given by broker id (CreateTopics' and CreatePartitions' assignments) as node ids (a
    broker id is its node id's number): a broker there is not refused in Kafka's words. Refused until the
    cluster finalized ``features.TOPIC_ASSIGNMENT`` (a node of 0.1.0 would place them itself)."""
    if not door.node.metadata.features().allows(TOPIC_ASSIGNMENT):
        raise Refused(
            ErrorCode.invalid_request,
            "replicas placed by hand need raftlog.version 2 finalized (raftlog cluster features upgrade)",
        )
    nodes = door.nodes_by_broker()
    return [placed_nodes(broker_ids, nodes) for broker_ids in brokers]


def _creatable_configs(config_cls: Any, settings: list[ConfigEntry]) -> tuple[Any, ...]:
    return tuple(
        wire.build(
            config_cls,
            name=entry.name,
            value=entry.value,
            read_only=entry.read_only,
            config_source=resource_configs.SOURCES[entry.source],
            is_sensitive=False,
        )
        for entry in settings
    )


async def delete_topics(door: Door, request: wire.Request) -> Any:
    """Each topic named (v6+: by name or by id) deleted through the controller leader, as Kafka's
    controller (``ControllerApis.deleteTopics``) answers it: an entry with neither or both a name and an
    id, a name or an id given twice, a name whose topic is also given by id, INVALID_REQUEST with Kafka's
    words, not deleted; an id no topic has UNKNOWN_TOPIC_ID; a topic deleted by id answered with its name
    where the connection may DESCRIBE it. The answer names each topic with its id (v6+)."""
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "DeletableTopicResult")
    timeout_ms = wire.millis(body.timeout)
    results: list[Any] = []

    def answer(name: str | None, topic_id: uuid.UUID | None, code: ErrorCode, message: str | None) -> None:
        results.append(
            wire.build(result_cls, name=name, topic_id=topic_id, error_code=code, error_message=message)
        )

    if request.api_version >= DELETE_BY_ID_VERSION:  # kio reads Kafka's zero id as None
        asked = [(topic.name, topic.topic_id) for topic in body.topics]
    else:
        asked = [(name, None) for name in body.topic_names]
    named, by_id = collections.Counter[str](), collections.Counter[uuid.UUID]()
    for name, topic_id in asked:
        if name is None and topic_id is None:
            answer(None, None, ErrorCode.invalid_request, "Neither topic name nor id were specified.")
        elif name is not None and topic_id is not None:
            answer(
                name, topic_id, ErrorCode.invalid_request, "You may not specify both topic name and topic id."
            )
        elif name is not None:
            named[name] += 1
        elif topic_id is not None:
            by_id[topic_id] += 1
    for name in (name for name, count in named.items() if count > 1):
        answer(name, None, ErrorCode.invalid_request, "Duplicate topic name.")
    twice = {topic_id for topic_id, count in by_id.items() if count > 1}
    for topic_id in twice:
        answer(None, topic_id, ErrorCode.invalid_request, "Duplicate topic id.")
    names = names_by_id(door) if by_id else {}
    deleting: dict[str, uuid.UUID | None] = {}  # each topic to delete and its id (None: not known here)
    creations: dict[str, int | None] = {}  # a topic named by its id: the creation index that id is of
    for topic_id in (topic_id for topic_id in by_id if topic_id not in twice):
        name = names.get(topic_id)
        if name is None:
            answer(None, topic_id, ErrorCode.unknown_topic_id, "This server does not host this topic ID.")
        elif (refused := _refusal(door, AclOperation.DELETE, TOPIC_RESOURCE, name)) is not None:
            shown = name if door.allows(AclOperation.DESCRIBE, TOPIC, name) else None  # no name leaked
            answer(shown, topic_id, code_of(refused), str(refused))
        else:
            deleting[name] = topic_id
            creations[name] = _creation_index(door, name)
    ids = topic_ids(door, named)
    given_by_id = set(deleting.values()) | twice
    for name in (name for name, count in named.items() if count == 1):
        with Caught() as caught:  # every error is this topic's answer
            _authorized(door, AclOperation.DELETE, TOPIC_RESOURCE, name)
            if ids.get(name) in given_by_id:
                deleting.pop(name, None)  # neither entry deleted; the name's answer says why
                creations.pop(name, None)
                raise Refused(
                    ErrorCode.invalid_request,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            deleting[name] = ids.get(name)
        if caught.failed:
            answer(name, ids.get(name), caught.code, caught.message)

    async def delete(name: str, topic_id: uuid.UUID | None) -> None:
        with Caught() as caught:  # every error is this topic's answer
            check_user_topic_name(name)
            creation = creations.get(name)  # by id: that topic only, never another of the name since
            await door.node.cluster.admin.call(AdminService.delete_topic, name, timeout_ms, creation)
        answer(name, topic_id, caught.code, caught.message)

    await asyncio.gather(*(delete(name, topic_id) for name, topic_id in deleting.items()))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, responses=tuple(results))


def _creation_index(door: Door, name: str) -> int | None:
    """The controller's creation index of the topic ``name`` as this node knows it (None: gone)."""
    try:
        return door.node.metadata.topic(name).topic_id
    except UnknownTopic:
        return None


def _grow_code(error: BaseException) -> ErrorCode:
    """A count not above the topic's, or past the cap, is INVALID_PARTITIONS; the rest as everywhere."""
    return ErrorCode.invalid_partitions if isinstance(error, InvalidTopic) else code_of(error)


async def create_partitions(door: Door, request: wire.Request) -> Any:
    """Grow each topic to its count (``AdminService.add_partitions``), placed by raftlog or by hand
    (``kafka-topics --alter --partitions N --replica-assignment``: the new partitions' brokers, checked
    below the doors as Kafka's controller checks them). A count not above the topic's is
    INVALID_PARTITIONS, as Kafka answers; a name given twice INVALID_REQUEST for it, the others go on."""
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "CreatePartitionsTopicResult")
    counts = collections.Counter(topic.name for topic in body.topics)
    timeout_ms = wire.millis(body.timeout)

    async def grow(topic: Any) -> Any:
        with Caught(_grow_code) as caught:  # every error is this topic's answer
            if counts[topic.name] > 1:
                raise Refused(ErrorCode.invalid_request, "Duplicate topic name.")
            _authorized(door, AclOperation.ALTER, TOPIC_RESOURCE, topic.name)
            check_user_topic_name(topic.name)
            by_hand = None
            if topic.assignments is not None:  # Kafka's: the new partitions' brokers, each set its own
                by_hand = _placed_by_hand(door, [entry.broker_ids for entry in topic.assignments])
            await door.node.cluster.admin.call(
                AdminService.add_partitions, topic.name, topic.count, bool(body.validate_only), timeout_ms,
                by_hand,
            )  # fmt: skip
        return wire.build(result_cls, name=topic.name, error_code=caught.code, error_message=caught.message)

    once = list({topic.name: topic for topic in body.topics}.values())
    results = await asyncio.gather(*(grow(topic) for topic in once))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, results=tuple(results))


# -- DescribeConfigs, AlterConfigs, IncrementalAlterConfigs -----------------------------------------


async def describe_configs(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "DescribeConfigsResult")
    entry_cls = wire.sibling(cls, "DescribeConfigsResourceResult")

    synonyms = bool(getattr(request.body, "include_synonyms", False))  # v1 on

    async def describe(resource: Any) -> Any:
        code, message, entries = ErrorCode.none, None, ()
        refused = _refusal(
            door, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
        )
        if refused is not None:
            code, message = code_of(refused), str(refused)
        elif resource.resource_type == TOPIC_RESOURCE:
            with Caught() as caught:  # every error is this resource's answer
                topic = await door.node.cluster.admin.call(
                    AdminService.topic, resource.resource_name, fresh=True
                )
                factor = len(topic.replicas[0]) if topic.replicas else 1
                throttles = await resource_configs.topic_throttles(door, resource.resource_name)
                defaults = await resource_configs.topic_log_defaults(door)
                described = describe_topic(
                    topic.configs, factor, resource.configuration_keys, throttles, defaults
                )
                entries = tuple(_entry(entry_cls, entry, synonyms) for entry in described)
            code, message = caught.code, caught.message
        elif resource.resource_type == BROKER_RESOURCE:
            with Caught() as caught:  # every error is this resource's answer
                name = resource_configs.broker_name(resource.resource_name)
                keys = resource.configuration_keys
                dynamic = await resource_configs.describe_throttles(door, name, keys)
                described = describe_broker(keys)
                entries = (
                    *(_entry(entry_cls, entry, synonyms) for entry in described),
                    *resource_configs.entries(entry_cls, dynamic, synonyms),
                )
            code, message = caught.code, caught.message
        elif resource.resource_type in resource_configs.KINDS:
            with Caught() as caught:  # every error is this resource's answer
                entries = await resource_configs.describe_resource(door, resource, entry_cls, synonyms)
            code, message = caught.code, caught.message
        elif resource.resource_type == BROKER_LOGGER_RESOURCE:
            entries = tuple(broker_loggers.entries(entry_cls, resource.configuration_keys, SOURCE_LOGGER))
        else:
            code, message = (
                ErrorCode.invalid_request,
                f"resource type {resource.resource_type} is not described",
            )
        return _resource_answer(result_cls, resource, code, message, configs=entries)

    results = await asyncio.gather(*(describe(resource) for resource in request.body.resources))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, results=tuple(results))


def _resource_answer(cls: Any, resource: Any, code: ErrorCode, message: str | None, **fields: Any) -> Any:
    """One resource's part of a DescribeConfigs or AlterConfigs answer: the resource it asked about, its
    error (``ErrorCode.none``) and ``fields``."""
    return wire.build(
        cls,
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        **fields,
    )


def _entry(entry_cls: Any, entry: ConfigEntry, synonyms: bool) -> Any:
    synonym_cls = wire.sibling(entry_cls, "DescribeConfigsSynonym", missing_ok=True)  # v1 on
    return wire.build(
        entry_cls,
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_default=entry.is_default,
        config_source=resource_configs.SOURCES[entry.source],
        is_sensitive=False,
        synonyms=tuple(
            wire.build(synonym_cls, name=s.name, value=s.value, source=resource_configs.SOURCES[s.source])
            for s in entry.synonyms
        )
        if synonyms and synonym_cls is not None
        else (),
        config_type=TYPES[entry.kind],
        documentation=None,
    )


async def alter_configs(door: Door, request: wire.Request) -> Any:
    """Kafka's AlterConfigs: the given configs replace the topic's (left-out ones are removed: back to
    their defaults)."""

    def changes(resource: Any, current: dict[str, Any]) -> dict[str, Any]:
        given = {c.name: _not_null(c.name, c.value) for c in resource.configs}
        return {**{key: None for key in current if key not in given}, **given}  # None: back to default

    return await _alter(door, request, changes)


async def incremental_alter_configs(door: Door, request: wire.Request) -> Any:
    """SET a property or DELETE it (back to its default); APPEND and SUBTRACT are for list properties,
    which raftlog's topics do not have."""

    def changes(resource: Any, current: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for config in resource.configs:
            if config.name in THROTTLED_REPLICAS:
                continue  # a topic's throttled replicas: resource_configs
            if config.config_operation == SET:
                result[config.name] = _not_null(config.name, config.value)
            elif config.config_operation == DELETE:
                if config.name not in PROPERTY_FIELDS:
                    check_changeable([config.name])  # a read-only one is refused as such
                    raise InvalidConfig(config.name, None, "unknown property")
                result[config.name] = None  # removed from the topic's configs: its default applies
            else:
                raise Refused(
                    ErrorCode.invalid_request,
                    f"{config.name}: APPEND and SUBTRACT apply to list properties; raftlog has none",
                )
        return result

    return await _alter(door, request, changes, incremental=True)


def _not_null(name: str, value: str | None) -> str:
    if value is None:
        raise Refused(ErrorCode.invalid_config, f"{name}: a config value must not be null")
    return value


async def _alter(door: Door, request: wire.Request, changes: Any, incremental: bool = False) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    response_cls = wire.sibling(cls, "AlterConfigsResourceResponse")
    admin = door.node.cluster.admin

    async def alter(resource: Any) -> Any:
        code, message = ErrorCode.none, None
        with Caught() as caught:  # every error is this resource's answer
            _authorized(door, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
            if resource.resource_type == BROKER_LOGGER_RESOURCE and incremental:
                broker_loggers.alter(door, resource, body.validate_only)
                return _resource_answer(response_cls, resource, code, message)
            kind = resource_configs.KINDS.get(resource.resource_type)
            if resource.resource_type == BROKER_RESOURCE and incremental:
                kind = BROKER
            if kind is not None and incremental:
                name = resource.resource_name
                if kind == BROKER:
                    name = resource_configs.broker_name(name)
                current = await resource_configs.stored(door, kind, name)
                wanted_configs = resource_configs.changes(resource.configs, kind, current)
                await resource_configs.alter_resource(door, kind, name, wanted_configs, body.validate_only)
                return _resource_answer(response_cls, resource, code, message)
            if resource.resource_type != TOPIC_RESOURCE:
                raise Refused(ErrorCode.invalid_request, "only topic configs can be changed")
            throttled = [c for c in resource.configs if c.name in THROTTLED_REPLICAS] if incremental else []
            topic = await admin.call(AdminService.topic, resource.resource_name, fresh=True)
            if throttled:
                current = await resource_configs.topic_throttles(door, resource.resource_name)
                wanted_throttles = resource_configs.changes(throttled, TOPIC_KIND, current)
                await resource_configs.alter_resource(
                    door, TOPIC_KIND, resource.resource_name, wanted_throttles, body.validate_only
                )
                if len(throttled) == len(resource.configs):
                    return _resource_answer(response_cls, resource, code, message)
            wanted = changes(resource, topic.configs)
            typed = LogConfig.from_properties(merge_configs(topic.configs, alterable(wanted))).to_properties()
            # typed, as the HTTP API sends them; None removes the property
            wanted = {k: None if value is None else typed[stored_name(k)] for k, value in wanted.items()}
            if not body.validate_only:
                await admin.call(AdminService.alter_configs, resource.resource_name, wanted)
        return _resource_answer(response_cls, resource, caught.code, caught.message)

    results = await asyncio.gather(*(alter(resource) for resource in body.resources))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, responses=tuple(results))


# -- DescribeCluster --------------------------------------------------------------------------------


async def describe_cluster(door: Door, request: wire.Request) -> Any:
    """Any authenticated client may ask, as a Kafka broker answers (Kafka's Java admin client asks before
    it describes topics); DESCRIBE on the cluster only decides its authorized operations, when asked:
    omitted with it, none without."""
    cls = wire.response_class(request.api_key, request.api_version)
    broker_cls = wire.sibling(cls, "DescribeClusterBroker")
    operations = wire.AUTHORIZED_OPERATIONS_OMITTED
    if request.body.include_cluster_authorized_operations and not door.allows(AclOperation.DESCRIBE, CLUSTER):
        operations = 0
    # Kafka lists its unfenced brokers, and from v2 (KIP-1073) the fenced ones too when asked: a node gossip
    # holds dead, or one kept out of a cluster whose formats its code cannot read, takes no part until it
    # is back, as a fenced broker
    with_fenced = getattr(request.body, "include_fenced_brokers", False)
    brokers = []
    for node in door.node.metadata.nodes():
        address = door.broker_address(node.node_id)
        fenced = node.state == "dead" or node.kept_out is not None
        if address is None or node.state == "left" or (fenced and not with_fenced):
            continue
        host, port = address
        brokers.append(
            wire.build(
                broker_cls,
                broker_id=broker_id(node.node_id),
                host=host,
                port=port,
                rack=None,
                is_fenced=fenced,
            )
        )
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=door.cluster_id,
        controller_id=broker_id(door.controller_for_clients()),
        brokers=tuple(brokers),
        cluster_authorized_operations=operations,
    )
