"""Configs of resources other than a topic's log as the Kafka door translates them
(``partitions.resource_configs`` holds the rules): CLIENT_METRICS (16) and GROUP (32) resources, a
broker's replication throttles (BROKER, 4) and a topic's throttled-replica lists. DescribeConfigs and
IncrementalAlterConfigs (``admin_apis``) hand these resources here, ListConfigResources
(``resource_config_apis``) lists them; this module only translates Kafka's resource types, operations and
config sources.

ACLs as Kafka checks them: DESCRIBE_CONFIGS / ALTER_CONFIGS on the group for a group's configs, on the
cluster for the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_api import wire
from kafka_api.door import Door
from partitions.errors import InvalidConfigRequest
from partitions.metadata.service import AdminService
from partitions.resource_configs import BROKER, CLIENT_METRICS, GROUP, KEYS, TOPIC, Described, describe, items
from partitions.resource_configs import topic_log_defaults as topic_log_defaults_of
from partitions.security.acls import ResourceType

TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8
CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 16, 32
KINDS = {CLIENT_METRICS_RESOURCE: CLIENT_METRICS, GROUP_RESOURCE: GROUP}  # resources stored whole here
# Kafka's ConfigSource codes
SOURCES = {
    "DYNAMIC_TOPIC_CONFIG": 1,
    "DYNAMIC_BROKER_CONFIG": 2,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
    "STATIC_BROKER_CONFIG": 4,
    "DEFAULT_CONFIG": 5,
    "DYNAMIC_BROKER_LOGGER_CONFIG": 6,
    "CLIENT_METRICS_CONFIG": 7,
    "GROUP_CONFIG": 8,
}
TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "LONG": 5, "DOUBLE": 6, "LIST": 7}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def acl_resource(resource_type: int, name: str) -> tuple[ResourceType, str] | None:
    """The ACL resource a config resource is checked on, when it is not a topic's or the cluster's."""
    return (ResourceType.GROUP, name) if resource_type == GROUP_RESOURCE else None


async def of_kind(door: Door, kind: str) -> dict[str, dict[str, str]]:
    """Every resource of ``kind`` with configs, as the controller leader has them (a client reads back
    the change it was just answered, whichever node it asks)."""
    found: dict[str, dict[str, str]] = await door.node.cluster.admin.call(AdminService.resource_configs, kind)
    return found


async def stored(door: Door, kind: str, name: str) -> Mapping[str, str]:
    return (await of_kind(door, kind)).get(name, {})


def entries(entry_cls: Any, described: list[Described], synonyms: bool) -> tuple[Any, ...]:
    synonym_cls = wire.sibling(entry_cls, "DescribeConfigsSynonym", missing_ok=True)  # v1 on
    return tuple(
        wire.build(
            entry_cls,
            name=entry.name,
            value=entry.value,
            read_only=False,
            is_default=entry.is_default,
            config_source=SOURCES[entry.source],
            is_sensitive=False,
            synonyms=tuple(
                wire.build(synonym_cls, name=name, value=value, source=SOURCES[source])
                for name, value, source in entry.synonyms
            )
            if synonyms and synonym_cls is not None
            else (),
            config_type=TYPES[entry.kind],
            documentation=None,
        )
        for entry in described
    )


async def describe_resource(door: Door, resource: Any, entry_cls: Any, synonyms: bool) -> tuple[Any, ...]:
    """A client metrics subscription's or a group's configs, every one with its source (Kafka's
    ``allConfigs``)."""
    kind, name = KINDS[resource.resource_type], resource.resource_name
    if not name:
        what = "Client metrics subscription" if kind == CLIENT_METRICS else "Group"
        raise InvalidConfigRequest(f"{what} name must not be empty")
    configs = await stored(door, kind, name)
    return entries(entry_cls, describe(kind, configs, resource.configuration_keys), synonyms)


async def describe_throttles(door: Door, name: str, keys: tuple[str, ...] | None) -> list[Described]:
    """A broker's dynamic replication throttles (``name`` its id; ``""`` the cluster's default)."""
    if keys is not None:
        keys = tuple(k for k in keys if k in KEYS[BROKER])
        if not keys:
            return []
    brokers = await of_kind(door, BROKER)
    default = brokers.get("", {})
    own = brokers.get(name, {}) if name else default
    return describe(BROKER, own, keys, None if not name else default)


async def topic_throttles(door: Door, topic: str) -> Mapping[str, str]:
    return await stored(door, TOPIC, topic)


async def topic_log_defaults(door: Door) -> dict[str, str]:
    """The cluster's defaults of topics' log configs, by topic config (``kafka-configs --entity-type
    brokers --entity-default``)."""
    return topic_log_defaults_of((await of_kind(door, BROKER)).get("", {}))


def changes(configs: Any, kind: str, current: Mapping[str, str]) -> dict[str, str | None]:
    """An IncrementalAlterConfigs resource's operations as the configs to set (None: remove): APPEND and
    SUBTRACT on a list config, as Kafka applies them."""
    result: dict[str, str | None] = {}
    for config in configs:
        op, name = config.config_operation, config.name
        if op == SET:
            if config.value is None:
                raise InvalidConfigRequest(f"Null value not supported for : {name}")
            result[name] = config.value
        elif op == DELETE:
            result[name] = None
        elif op in (APPEND, SUBTRACT):
            key = KEYS.get(kind, {}).get(name)
            if key is None or key.kind != "LIST":
                raise InvalidConfigRequest(
                    f"Config value append is not allowed for config key: {name}"
                    if op == APPEND
                    else f"Config value subtract is not allowed for config key: {name}"
                )
            have = items(result.get(name) or current.get(name, ""))
            given = items(config.value or "")
            after = (
                [*have, *(v for v in given if v not in have)]
                if op == APPEND
                else [v for v in have if v not in given]
            )
            result[name] = ",".join(after) if after else None
        else:
            raise InvalidConfigRequest(f"unknown config operation {op} for {name}")
    return result


async def alter_resource(
    door: Door, kind: str, name: str, wanted: dict[str, str | None], validate_only: bool
) -> None:
    await door.node.cluster.admin.call(AdminService.alter_resource_configs, kind, name, wanted, validate_only)


def broker_name(name: str) -> str:
    """A BROKER resource's name as stored: a broker's id, or ``""`` for the cluster's default."""
    if name and not name.isdigit():
        raise InvalidConfigRequest(f"Invalid broker id {name}")
    return name
