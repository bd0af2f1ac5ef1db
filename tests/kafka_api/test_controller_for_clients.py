"""The controller Metadata and DescribeCluster name to Kafka clients is a node they can reach: the controller
leader while gossip holds it alive, else the node answering (it forwards controller requests, as a KRaft
broker forwards them to the active controller). Named a leader just killed, librdkafka's admin client waits
for it until its request times out."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafka_api.door import Door


def _door(controller: str | None, states: dict[str, str]) -> SimpleNamespace:
    nodes = [SimpleNamespace(node_id=node, state=state) for node, state in states.items()]
    metadata = SimpleNamespace(controller=lambda: controller, nodes=lambda: nodes)
    return SimpleNamespace(node=SimpleNamespace(node_id="n1", metadata=metadata))


@pytest.mark.parametrize(
    ("controller", "n3_state", "named"),
    [
        ("n3", "alive", "n3"),  # the leader, reachable
        ("n3", "suspect", "n1"),  # the leader as gossip suspects it: this node, which forwards
        ("n3", "dead", "n1"),
        (None, "alive", "n1"),  # none leads yet: this node answers NOT_CONTROLLER, and the client retries
        ("n9", "alive", "n1"),  # a leader gossip does not know
    ],
)
def test_the_controller_named_to_clients_is_reachable(
    controller: str | None, n3_state: str, named: str
) -> None:
    door = _door(controller, {"n1": "alive", "n2": "alive", "n3": n3_state})
    assert Door.controller_for_clients(door) == named  # type: ignore[arg-type]
