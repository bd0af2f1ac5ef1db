"""A stopping node's Kafka listener (``KafkaServer.drain``, ``kafka_api.draining``): no new connection, a
connection without a Produce closed at once, a Produce begun before the stop answered as usual before its
connection closes, a Produce handled once draining answered NOT_LEADER_OR_FOLLOWER with nothing written. A
Produce that does not end within the bound leaves the listener closed anyway, counted unanswered."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import pathlib
import select
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from waiting import wait_for

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "partitions"))  # in_process
from in_process import Served, configs, on_controller, until

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.draining import STOPPING_MESSAGE
from kafka_api.server import KafkaServer
from partitions.broker.node import Node
from partitions.names import broker_id
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog_client.local_cluster import LocalCluster
from raftlog_dev.layout import free_port

PRODUCE_VERSION = 9
METADATA_VERSION = 8
TOPIC = "drained"


@dataclasses.dataclass
class Listening:
    node: Node
    server: KafkaServer
    address: str


@pytest.fixture
async def listening(tmp_path: pathlib.Path) -> AsyncIterator[Listening]:
    """One node in this process, a one-partition topic on it, and its Kafka listener."""
    [config] = configs(tmp_path, 1)
    served = Served(config)
    await served.start()
    node = served.node
    await on_controller([node], lambda n: n.topic_changes.create_topic(TOPIC, 1, 1, {}))
    await until(lambda: node.data.offsets_now(TOPIC, 0), what="the partition led here")
    server = KafkaServer(Door(node, "draining-test-cluster", node.groups))
    port = free_port()
    await server.start("127.0.0.1", port)
    try:
        yield Listening(node, server, f"127.0.0.1:{port}")
    finally:
        await server.close()
        await served.stop()


async def _offsets(listening: Listening) -> Any:
    """The partition's offsets, asked again while its one replica has no leader known (an election
    under load: this is a read, nothing is resent)."""
    return await until(lambda: listening.node.data.offsets_now(TOPIC, 0), what="the partition's offsets")


def _produce_request(value: bytes) -> Any:
    cls = wire.request_class(0, PRODUCE_VERSION)
    batch = encode_batch(0, [ProducerRecord(None, value, ())], 0, int(time.time() * 1000))
    part = wire.build(wire.sibling(cls, "PartitionProduceData"), index=0, records=batch)
    data = wire.build(wire.sibling(cls, "TopicProduceData"), name=TOPIC, partition_data=(part,))
    return wire.build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                      topic_data=(data,))  # fmt: skip


def _answer(raw: RawKafka, value: bytes) -> Any:
    return raw.call(0, PRODUCE_VERSION, _produce_request(value)).responses[0].partition_responses[0]


def _hold_produces(
    listening: Listening, monkeypatch: pytest.MonkeyPatch
) -> tuple[asyncio.Event, asyncio.Event]:
    """Every produce through the node's data plane waits for the first returned event before it appends;
    the second is set once one does."""
    data = listening.node.local.data
    release, held_one = asyncio.Event(), asyncio.Event()
    appending = data.produce_batch

    async def held(*args: Any, **kwargs: Any) -> Any:
        held_one.set()
        await release.wait()
        return await appending(*args, **kwargs)

    monkeypatch.setattr(data, "produce_batch", held)
    return release, held_one


async def test_a_produce_in_flight_is_answered_before_its_connection_closes_the_others_close_at_once(
    listening: Listening, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = listening.server
    producing, idle = RawKafka(listening.address), RawKafka(listening.address)
    try:
        release, held_one = _hold_produces(listening, monkeypatch)
        in_flight = asyncio.ensure_future(asyncio.to_thread(_answer, producing, b"begun before the stop"))
        await asyncio.wait_for(held_one.wait(), 30)  # the produce in flight
        drain = asyncio.ensure_future(server.drain(30.0))
        assert await asyncio.to_thread(idle.closed_by_server), "a connection with no produce closes at once"
        with pytest.raises(ConnectionRefusedError):  # no new connection
            await asyncio.to_thread(RawKafka, listening.address)
        assert not drain.done(), "the listener waits for the produce begun before the stop"
        release.set()
        answered = await in_flight
        assert (answered.error_code, answered.base_offset) == (ErrorCode.none, 0)
        assert await drain == 0
        assert await asyncio.to_thread(producing.closed_by_server), "closed once its produce was answered"
        assert (await _offsets(listening)).high_watermark == 1
    finally:
        producing.close()
        idle.close()


async def test_a_produce_handled_once_the_listener_drains_appends_nothing(listening: Listening) -> None:
    """A Produce read before the drain whose handling begins after it (the listener reads no more once
    draining): each of its partitions NOT_LEADER_OR_FOLLOWER, nothing written, the client sends it to
    the partition's next leader."""
    raw = RawKafka(listening.address)
    try:
        before = await asyncio.to_thread(_answer, raw, b"before the stop")  # the connection admitted
        assert (before.error_code, before.base_offset) == (ErrorCode.none, 0)
        listening.server.door.draining.stopping = True
        refused = await asyncio.to_thread(_answer, raw, b"handled during the stop")
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.not_leader_or_follower,
            STOPPING_MESSAGE,
        )
        assert refused.base_offset == -1
        assert (await _offsets(listening)).high_watermark == 1
    finally:
        raw.close()


async def test_a_produce_that_does_not_end_within_the_bound_is_counted_and_the_listener_closes(
    listening: Listening, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = listening.server
    raw = RawKafka(listening.address)
    try:
        _, held_one = _hold_produces(listening, monkeypatch)  # never released
        in_flight = asyncio.ensure_future(asyncio.to_thread(_answer, raw, b"never appended"))
        await asyncio.wait_for(held_one.wait(), 30)  # the produce in flight
        assert await server.drain(0.2) == 1
        with pytest.raises(ConnectionError):  # the connection closed without an answer
            await in_flight
    finally:
        raw.close()


def _brokers(raw: RawKafka) -> set[int]:
    """The broker ids a Metadata answer lists (no topic asked)."""
    cls = wire.request_class(3, METADATA_VERSION)
    request = wire.build(
        cls,
        topics=(),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return {broker.node_id for broker in raw.call(3, METADATA_VERSION, request).brokers}


def _closed_already(raw: RawKafka) -> bool:
    """Whether the server's close of the connection has arrived (read without waiting)."""
    readable, _, _ = select.select([raw.sock], [], [], 0)
    if not readable:
        return False
    try:
        return raw.sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.slow
def test_a_stopping_node_has_closed_its_kafka_connections_before_the_others_drop_it(
    kafka_cluster: LocalCluster,
) -> None:
    """With real node processes: once another node's Metadata no longer lists a node being stopped
    (SIGTERM), a Kafka connection to that node is closed already, so a client that drops the broker has
    nothing waiting on it (librdkafka would send such a request again: ``kafka_api.draining``)."""
    victim, other = "n3", "n1"
    to_victim, to_other = RawKafka(kafka_cluster.kafka[victim]), RawKafka(kafka_cluster.kafka[other])
    stopping = threading.Thread(target=kafka_cluster.control, args=("stop", victim))
    try:
        assert broker_id(victim) in _brokers(to_victim), "the connection is admitted and served"
        assert broker_id(victim) in _brokers(to_other)
        stopping.start()
        wait_for(lambda: broker_id(victim) not in _brokers(to_other), f"{other}'s Metadata without {victim}")
        assert _closed_already(to_victim), f"{victim} dropped from the metadata while its connection was open"
    finally:
        stopping.join(60)
        to_victim.close()
        to_other.close()
        if victim in kafka_cluster.stopped():
            kafka_cluster.control("start", victim)
