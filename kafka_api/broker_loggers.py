"""The ``BROKER_LOGGER`` resource (KIP-412): a node's loggers and their levels described by DescribeConfigs
and changed by IncrementalAlterConfigs, as ``kafka-configs --entity-type broker-loggers`` reads and sets a
Kafka broker's. The rule is ``partitions.node_loggers``'s; here the resource's node id and the answer's
entries."""

from __future__ import annotations

import logging
from typing import Any

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.resource_configs import TYPES
from partitions import node_loggers
from partitions.errors import InvalidConfigRequest
from partitions.names import broker_id

log = logging.getLogger("kafka_api.admin_apis")


def entries(entry_cls: Any, keys: tuple[str, ...] | None, source: int) -> list[Any]:
    """The node's loggers and their levels, as Kafka describes a broker's (``root`` first)."""
    described = []
    for name in node_loggers.names():
        if keys is not None and name not in keys:
            continue
        described.append(
            wire.build(
                entry_cls,
                name=name,
                value=node_loggers.level_of(name),
                read_only=False,
                is_default=False,
                config_source=source,
                is_sensitive=False,
                synonyms=(),
                config_type=TYPES["STRING"],
                documentation=None,
            )
        )
    return described


def alter(door: Door, resource: Any, validate_only: bool) -> None:
    """This node's loggers' levels (Kafka's ``RuntimeLoggerManager``): the resource names this node by its
    broker id, each change checked as Kafka checks it, then made unless only validated."""
    name, own = resource.resource_name, broker_id(door.node.node_id)
    try:
        asked = int(name)
    except ValueError:
        raise InvalidConfigRequest(f"Node id must be an integer, but it is: {name}") from None
    if asked != own:
        raise InvalidConfigRequest(f"Unexpected node id. Expected {own}, but received {asked}")
    changes = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
    node_loggers.check(changes)
    if not validate_only:
        node_loggers.change(changes, log)
