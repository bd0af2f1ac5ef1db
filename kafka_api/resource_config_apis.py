"""ListConfigResources (74, what ``kafka-client-metrics --list`` asks): the resources with configs of the
types asked, DESCRIBE_CONFIGS on the cluster. Their configs are ``admin_apis``' DescribeConfigs and
IncrementalAlterConfigs, translated by ``resource_configs``.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import Caught
from kafka_api.resource_configs import (
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    GROUP_RESOURCE,
    KINDS,
    TOPIC_RESOURCE,
    of_kind,
)
from partitions.names import broker_id
from partitions.security.acls import AclOperation, ResourceType


async def list_config_resources(door: Door, request: wire.Request) -> Any:
    """v0: the client metrics subscriptions (ListClientMetricsResources); v1: the resources of the types
    asked (none: every type raftlog describes)."""
    cls = wire.response_class(request.api_key, request.api_version)
    resource_cls = wire.sibling(cls, "ConfigResource")
    asked = tuple(getattr(request.body, "resource_types", ())) or (
        (CLIENT_METRICS_RESOURCE,)
        if request.api_version == 0
        else (
            TOPIC_RESOURCE,
            BROKER_RESOURCE,
            BROKER_LOGGER_RESOURCE,
            CLIENT_METRICS_RESOURCE,
            GROUP_RESOURCE,
        )
    )

    def answer(code: ErrorCode, found: list[tuple[int, str]]) -> Any:
        built = tuple(
            wire.build(
                resource_cls, resource_name=name, **({"resource_type": kind} if request.api_version else {})
            )
            for kind, name in found
        )
        return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=code, config_resources=built)

    if not door.allows(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return answer(ErrorCode.cluster_authorization_failed, [])
    known = {TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE}
    if any(kind not in known for kind in asked):
        return answer(ErrorCode.unsupported_version, [])
    found: list[tuple[int, str]] = []
    for kind in dict.fromkeys(asked):
        if kind in KINDS:
            with Caught() as caught:  # the answer's error
                names = sorted(await of_kind(door, KINDS[kind]))
            if caught.failed:
                return answer(caught.code, [])
        elif kind == TOPIC_RESOURCE:
            names = sorted(door.node.metadata.topics())
        else:
            names = sorted(
                str(broker_id(node.node_id))
                for node in door.node.metadata.nodes()
                if node.state not in ("dead", "left")
            )
        found.extend((kind, name) for name in names)
    return answer(ErrorCode.none, found)
