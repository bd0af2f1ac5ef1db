"""A topic deleted by its id (Kafka's DeleteTopics v6) on the controller leader's own topic changes
(``TopicChanges.delete_topic``): another topic of the name is refused before anything is proposed, and the
id travels in the command (checked again where it applies) only once ``features.TOPIC_DELETE_BY_ID`` is
finalized, so a node of the previous release never meets a command it cannot read."""

from __future__ import annotations

from test_topic_change_time import controller

from partitions.controller.commands import DeleteTopic, SetFeatureLevel, decode, encode
from partitions.errors import TopicIdGone
from partitions.features import RAFTLOG_VERSION


async def test_an_id_of_another_topic_of_the_name_deletes_nothing() -> None:
    topics, group, _ = controller(write_ms=0)
    first = await topics.create_topic("t", 1, 3, {})
    await topics.delete_topic("t")
    again = await topics.create_topic("t", 1, 3, {})
    proposed = len(group.given)
    try:
        await topics.delete_topic("t", topic_id=first.topic_id)
    except TopicIdGone as refused:
        assert refused.topic_id == first.topic_id
    else:
        raise AssertionError("the topic of another creation was deleted")
    assert len(group.given) == proposed and topics._frontend.topic("t") == again


async def test_the_id_is_written_only_once_every_node_reads_it() -> None:
    topics, group, _ = controller(write_ms=0)
    written: list[DeleteTopic] = []
    propose = group.propose

    async def recording(command: bytes, timeout_ms: int) -> object:
        decoded = decode(command)
        if isinstance(decoded, DeleteTopic):
            written.append(decoded)
        return await propose(command, timeout_ms)

    group.propose = recording  # type: ignore[method-assign]
    old = await topics.create_topic("old", 1, 3, {})
    await topics.delete_topic("old", topic_id=old.topic_id)  # a cluster still at level 1: by name
    machine = topics._frontend._machine
    machine.apply(machine.applied_index + 1, 1, encode(SetFeatureLevel(RAFTLOG_VERSION, 2)))
    new = await topics.create_topic("new", 1, 3, {})
    await topics.delete_topic("new", topic_id=new.topic_id)
    assert written == [DeleteTopic("old"), DeleteTopic("new", new.topic_id)]
