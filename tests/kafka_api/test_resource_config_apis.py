"""Client metrics subscriptions, group configs and replication throttles translated by the Kafka door
(IncrementalAlterConfigs, DescribeConfigs, ListConfigResources) against a stand-in node (no processes)
whose controller applies ``partitions.controller.resource_configs``: Kafka's resource types, operations,
sources and error codes, a topic's throttled replicas kept apart from its log configs. The same steps
against Apache Kafka itself: ``tests/kafka_reference/test_differential_configs.py`` and
``test_differential_tools.py``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.admin_apis import describe_configs, incremental_alter_configs
from kafka_api.resource_config_apis import list_config_resources
from partitions.controller import resource_configs as controller_configs
from partitions.controller.state import TopicMetadata
from partitions.metadata.service import AdminService, NodeInfo

SET, DELETE, APPEND = 0, 1, 2


class Controller:
    """The admin calls the handlers make, answered as the controller leader would."""

    def __init__(self) -> None:
        self.resources: dict[tuple[str, str], dict[str, str]] = {}
        self.topic = TopicMetadata("t", 1, (("n1", "n2"),), {})

    async def call(self, method: Any, *args: Any, **_: Any) -> Any:
        name = method.__name__
        if name == AdminService.resource_configs.__name__:
            return {n: dict(v) for (kind, n), v in self.resources.items() if kind == args[0]}
        if name == AdminService.alter_resource_configs.__name__:
            kind, resource, changes, validate_only = args
            command = controller_configs.AlterResourceConfigs(kind, resource, tuple(changes.items()))
            after = controller_configs.apply(self.resources, command)
            if not validate_only:
                self.resources = after
            return None
        if name == AdminService.topic.__name__:
            return self.topic
        raise AssertionError(f"unexpected call {name}{args}")


def _door(controller: Controller) -> Any:
    nodes = [NodeInfo(f"n{i}", f"http://n{i}", "alive") for i in (1, 2, 3)]
    metadata = SimpleNamespace(nodes=lambda: nodes, topics=lambda: ["t"])
    node = SimpleNamespace(metadata=metadata, cluster=SimpleNamespace(admin=controller))
    return SimpleNamespace(node=node, allows=lambda *_: True)


def _request(api_key: int, version: int, **body: Any) -> wire.Request:
    return wire.Request(api_key, version, 1, "test", wire.build(wire.request_class(api_key, version), **body))


def _alter(resource_type: int, name: str, *configs: tuple[int, str, str | None]) -> wire.Request:
    cls = wire.request_class(44, 1)
    resource_cls, config_cls = wire.sibling(cls, "AlterConfigsResource"), wire.sibling(cls, "AlterableConfig")
    built = tuple(wire.build(config_cls, config_operation=op, name=n, value=v) for op, n, v in configs)
    resource = wire.build(resource_cls, resource_type=resource_type, resource_name=name, configs=built)
    return _request(44, 1, resources=(resource,), validate_only=False)


def _describe(resource_type: int, name: str) -> wire.Request:
    cls = wire.request_class(32, 4)
    resource = wire.build(
        wire.sibling(cls, "DescribeConfigsResource"),
        resource_type=resource_type,
        resource_name=name,
        configuration_keys=None,
    )
    return _request(32, 4, resources=(resource,), include_synonyms=True, include_documentation=False)


async def _described(
    door: Any, resource_type: int, name: str
) -> tuple[ErrorCode, dict[str, tuple[str, int]]]:
    (result,) = (await describe_configs(door, _describe(resource_type, name))).results
    return result.error_code, {c.name: (c.value, c.config_source) for c in result.configs}


async def _altered(door: Any, request: wire.Request) -> tuple[ErrorCode, str | None]:
    (response,) = (await incremental_alter_configs(door, request)).responses
    return response.error_code, response.error_message


async def test_a_subscription_is_set_described_listed_and_refused_with_kafkas_codes() -> None:
    controller = Controller()
    door = _door(controller)
    done = await _altered(
        door, _alter(16, "sub", (SET, "metrics", "org.apache.kafka.producer."), (SET, "interval.ms", "1000"))
    )
    assert done == (ErrorCode.none, None)
    code, configs = await _described(door, 16, "sub")
    assert code == ErrorCode.none
    assert configs == {
        "interval.ms": ("1000", 7),
        "metrics": ("org.apache.kafka.producer.", 7),
        "match": ("", 5),
    }
    assert (await _altered(door, _alter(16, "sub", (SET, "interval.ms", "10"))))[
        0
    ] == ErrorCode.invalid_request
    refused = await _altered(door, _alter(16, "sub", (SET, "match", "client_color=red")))
    assert refused == (ErrorCode.invalid_config, "Illegal client matching pattern: client_color=red")
    await _altered(door, _alter(16, "sub", (APPEND, "metrics", "org.apache.kafka.consumer.")))
    assert controller.resources[("client-metrics", "sub")]["metrics"] == (
        "org.apache.kafka.producer.,org.apache.kafka.consumer."
    )
    v0 = await list_config_resources(door, _request(74, 0))
    assert [r.resource_name for r in v0.config_resources] == ["sub"]
    v1 = await list_config_resources(door, _request(74, 1, resource_types=(16, 2)))
    assert [(r.resource_type, r.resource_name) for r in v1.config_resources] == [(16, "sub"), (2, "t")]
    await _altered(door, _alter(16, "sub", (DELETE, "metrics", None), (DELETE, "interval.ms", None)))
    assert controller.resources == {}


async def test_a_groups_configs_are_described_with_sources_and_bounded() -> None:
    controller = Controller()
    door = _door(controller)
    await _altered(door, _alter(32, "g", (SET, "share.auto.offset.reset", "earliest")))
    code, configs = await _described(door, 32, "g")
    assert code == ErrorCode.none
    assert configs["share.auto.offset.reset"] == ("earliest", 8)  # GROUP_CONFIG
    assert configs["consumer.session.timeout.ms"] == ("45000", 5)  # DEFAULT_CONFIG
    refused = await _altered(door, _alter(32, "g", (SET, "consumer.session.timeout.ms", "1000")))
    assert refused[0] == ErrorCode.invalid_config
    assert (await _described(door, 32, ""))[0] == ErrorCode.invalid_request


async def test_throttles_are_kept_apart_from_a_topics_log_configs() -> None:
    controller = Controller()
    door = _door(controller)
    rate = (SET, "leader.replication.throttled.rate", "1048576")
    assert await _altered(door, _alter(4, "1", rate)) == (ErrorCode.none, None)
    replicas = (SET, "leader.replication.throttled.replicas", "0:1,0:2")
    assert await _altered(door, _alter(2, "t", replicas)) == (ErrorCode.none, None)
    assert controller.resources == {
        ("broker", "1"): {"leader.replication.throttled.rate": "1048576"},
        ("topic", "t"): {"leader.replication.throttled.replicas": "0:1,0:2"},
    }
    _, broker = await _described(door, 4, "1")
    assert broker["leader.replication.throttled.rate"] == ("1048576", 2)  # DYNAMIC_BROKER_CONFIG
    _, topic = await _described(door, 2, "t")
    assert topic["leader.replication.throttled.replicas"] == ("0:1,0:2", 1)  # DYNAMIC_TOPIC_CONFIG
    assert topic["follower.replication.throttled.replicas"] == ("", 5)
    cleared = (DELETE, "leader.replication.throttled.rate", None)
    await _altered(
        door, _alter(4, "1", cleared, (DELETE, "replica.alter.log.dirs.io.max.bytes.per.second", None))
    )
    assert ("broker", "1") not in controller.resources
