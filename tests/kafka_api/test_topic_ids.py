"""The Kafka door's map of topic ids to names (``kafka_api.topic_ids``) is made once per set of topics and
made again when a topic changes, on the controller's real applied metadata: Produce and Fetch v13 ask for
it with every request, and made per request it cost every batch of a Kafka 4 producer a pass over every
topic of the cluster."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka_api.pacing import Pacer
from kafka_api.topic_ids import TopicIds, kafka_topic_id
from partitions.controller.commands import CreateTopic, DeleteTopic, encode
from partitions.controller.resource_configs import AlterResourceConfigs
from partitions.controller.state import ControllerStateMachine

CLUSTER = "cluster-a"


def _apply(machine: ControllerStateMachine, command: Any) -> None:
    index = machine.metadata.applied_index + 1
    machine.apply(index, 1, encode(command))
    assert machine.metadata.applied_index == index


def _expected(machine: ControllerStateMachine) -> dict[Any, str]:
    return {kafka_topic_id(CLUSTER, topic): name for name, topic in machine.metadata.topics.items()}


def test_the_map_is_kept_while_the_topics_stay_and_made_again_when_one_changes() -> None:
    machine = ControllerStateMachine()
    for name in ("a", "b", "c"):
        _apply(machine, CreateTopic(name, [["n1"]]))
    ids = TopicIds()
    first = ids.names(CLUSTER, machine.metadata.topics)
    assert first == _expected(machine) and len(first) == 3
    _apply(machine, AlterResourceConfigs("client-metrics", "sub", (("interval.ms", "1000"),)))
    assert ids.names(CLUSTER, machine.metadata.topics) is first, "made again though no topic changed"
    _apply(machine, DeleteTopic("b"))
    _apply(machine, CreateTopic("b", [["n1"]]))  # the name again: another id
    again = ids.names(CLUSTER, machine.metadata.topics)
    assert again == _expected(machine) and again is not first
    assert set(first.values()) == set(again.values()) and set(first) != set(again)
    assert ids.names("cluster-b", machine.metadata.topics) != again, "another cluster's ids answered"


def test_the_paced_map_yields_while_it_is_made_and_not_once_it_is_kept() -> None:
    machine = ControllerStateMachine()
    for index in range(7):
        _apply(machine, CreateTopic(f"t{index}", [["n1"]]))
    ids = TopicIds()

    async def turns_taken(made: Any) -> tuple[Any, int]:
        """What ``made`` returns, and how many turns another task had meanwhile."""
        turns = 0
        done = False

        async def other() -> None:
            nonlocal turns
            while not done:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.ensure_future(other())
        await asyncio.sleep(0)  # the other task's first turn
        turns = 0
        result = await made
        done = True
        await task
        return result, turns

    async def scenario() -> None:
        topics = machine.metadata.topics
        first, turns = await turns_taken(ids.names_paced(CLUSTER, topics, Pacer(items_per_turn=2)))
        assert first == _expected(machine) and turns == 3  # 7 topics, a yield after every 2
        kept, turns = await turns_taken(ids.names_paced(CLUSTER, topics, Pacer(items_per_turn=1)))
        assert kept is first and turns == 0

    asyncio.run(scenario())
