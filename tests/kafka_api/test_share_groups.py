"""Share groups (KIP-932) with Kafka's own KafkaShareConsumer 4.x and real nodes: records acquired,
accepted, released (delivered again, its delivery count 2) and rejected (never again); a partition
leader's kill -9 loses no acknowledgement and delivers again what was acquired but not acknowledged;
ListGroups v5 names each group's type; a lock that expires delivers its record again; an HTTP share
member (``api/share_groups.py``) and a Kafka one share a group's records. The shared ``kafka_cluster``
(``kafka_fixtures.py``) holds locks ``SHARE_LOCK_MS`` (4 s), not Kafka's 30 s. The records' rules
are the pure state machine's (``tests/partitions/groups/test_share_partition.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import subprocess
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka_fixtures import SHARE_LOCK_MS, RawKafka, http_client, set_group_configs
from kafka_jvm import tool_jvm
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest

from kafka_api import wire
from kafka_api.apis import APIS
from kafka_api.security import Session
from kafka_api.share_group_apis import share_group_describe, share_group_heartbeat
from partitions.errors import UnknownTopic
from partitions.groups.group_commands import KafkaGeneration, encode
from partitions.groups.group_model import Recorded
from partitions.groups.share.coordinator import ShareGroupCoordinator
from raftlog_cli.cli import main
from raftlog_client.client import Message, RaftlogClient
from raftlog_client.errors import RequestFailed
from raftlog_client.local_cluster import LocalCluster
from raftlog_client.share import ACCEPT, REJECT, RELEASE, RENEW, Acknowledged, ShareConsumer, ShareRecord
from tests.partitions.groups.share_table import ShareTable
from tests.waiting import wait_for, wait_until


def test_api_versions_advertise_the_share_group_apis() -> None:
    served = {key: (APIS[key].name, APIS[key].min_version, APIS[key].max_version) for key in (76, 77, 78, 79)}
    assert served == {
        76: ("ShareGroupHeartbeat", 1, 1),
        77: ("ShareGroupDescribe", 1, 1),
        78: ("ShareFetch", 1, 2),  # v2: KIP-1206's record-limit mode, KIP-1222's RENEW
        79: ("ShareAcknowledge", 1, 2),
    }
    assert APIS[16].max_version == 5  # ListGroups with group types


@pytest.mark.timeout(300)
def test_a_share_consumer_accepts_releases_and_rejects(kafka_cluster: LocalCluster, java_client: Any) -> None:
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    observed = java_client("share", settings, f"share-{uuid.uuid4().hex[:6]}")
    released = [i for i in range(20) if i % 4 == 1]
    assert observed == {
        "accepted": 15,
        "accepted_twice": 0,
        "rejected": 5,
        "rejected_seen_again": [],
        "redelivered": sorted(f"r{i}@2" for i in released),
    }


def _leader(cluster: LocalCluster, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def found() -> int | None:
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        return leader if leader >= 0 else None

    return f"n{wait_for(found, f'a leader of {topic}/0', timeout_s=30)}"


@pytest.mark.timeout(400)
def test_a_leader_kill_loses_no_acknowledgement_and_delivers_again_what_was_not_acknowledged(
    kafka_cluster: LocalCluster, java_client: Any
) -> None:
    """A member acquires 20 records, accepts 10 and halts holding the others; the partition's leader is
    killed; another member of the group gets exactly the 10 not acknowledged, each a second time."""
    topic = f"share-kill-{uuid.uuid4().hex[:6]}"
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    held = java_client("share-hold", settings, topic)
    assert held == {"held": 10, "acked": 10, "failed": 0}
    leader = _leader(kafka_cluster, topic)
    kafka_cluster.control("stop", leader, kill=True)
    try:
        drained = java_client("share-drain", settings, topic, "10")
    finally:
        kafka_cluster.control("start", leader)
    assert drained == {"got": sorted(f"r{i}@2" for i in range(10, 20))}


@pytest.mark.timeout(300)
def test_a_record_whose_lock_expired_is_delivered_again(
    kafka_cluster: LocalCluster, java_client: Any
) -> None:
    """A member acquires 20 records, accepts 10 and halts holding the others: once their locks expired,
    another member gets exactly those 10, each a second time."""
    topic = f"share-expiry-{uuid.uuid4().hex[:6]}"
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    assert java_client("share-hold", settings, topic) == {"held": 10, "acked": 10, "failed": 0}
    drained = java_client("share-drain", settings, topic, "10")
    assert drained == {"got": sorted(f"r{i}@2" for i in range(10, 20))}


def test_list_groups_v5_names_each_groups_type(kafka_cluster: LocalCluster) -> None:
    """The share groups of the tests above (they ran first) are listed with type share, filtered by type."""

    def listed(types: tuple[str, ...]) -> set[tuple[str, str]]:
        groups: set[tuple[str, str]] = set()
        for address in kafka_cluster.bootstrap_servers.split(","):
            raw = RawKafka(address)
            try:
                answer = raw.call(16, 5, ListGroupsRequest(states_filter=(), types_filter=types))
            finally:
                raw.close()
            groups |= {(g.group_id, g.group_type) for g in answer.groups}
        return groups

    shares = wait_for(
        lambda: {g for g in listed(("share",)) if g[0].startswith("share-")}, "share groups listed"
    )
    assert shares and all(kind == "share" for _, kind in shares)
    assert not {g for g in listed(("classic",)) if g[0].startswith("share-")}


@pytest.mark.timeout(300)
def test_kafka_console_share_consumer_reads_records_of_a_share_group(kafka_cluster: LocalCluster) -> None:
    """``kafka-console-share-consumer --max-messages 5`` of a group whose ``share.auto.offset.reset`` is
    ``by_duration:PT1H`` (KIP-1106): it starts at the first record of the last hour (two written before
    it ran, after two of two hours ago it never prints), then records produced while it runs; each
    printed once, and it exits."""
    topic = f"share-console-{uuid.uuid4().hex[:6]}"
    with http_client(kafka_cluster) as client:
        client.create_topic(topic, 1, 3)
    set_group_configs(kafka_cluster, f"{topic}-share", {"share.auto.offset.reset": "by_duration:PT1H"})
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    two_hours_ago = int(time.time() * 1000) - 7_200_000
    for value in (b"old0", b"old1"):
        producer.produce(topic, value=value, timestamp=two_hours_ago)
    for value in (b"c0", b"c1"):
        producer.produce(topic, value=value)
    producer.flush(30)
    jvm = tool_jvm(
        "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
        ["--bootstrap-server", kafka_cluster.bootstrap_servers, "--topic", topic, "--group", f"{topic}-share",
         "--max-messages", "5"],
    )  # fmt: skip
    console = subprocess.Popen(jvm.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sent = 2
    deadline = time.monotonic() + 240
    try:
        while console.poll() is None and time.monotonic() < deadline:
            producer.produce(topic, value=b"c%d" % sent)
            producer.flush(30)
            sent += 1
            with contextlib.suppress(subprocess.TimeoutExpired):
                console.wait(timeout=0.3)
    finally:
        if console.poll() is None:
            console.kill()
    out, err = console.communicate(timeout=60)
    jvm.ended(console.returncode)
    printed = out.splitlines()
    assert console.returncode == 0, err[-3000:]
    assert len(printed) == 5 and len(set(printed)) == 5, printed
    assert all(line.startswith("c") and int(line[1:]) < sent for line in printed), printed
    assert printed[:2] == ["c0", "c1"], printed


# -- share groups over HTTP -------------------------------------------------------------------------------


async def _acquire_until(member: ShareConsumer, count: int, max_records: int = 500) -> list[ShareRecord]:
    """Records acquired until ``count`` came or a minute passed, then one more acquire (nothing more)."""
    got: list[ShareRecord] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        got += await member.acquire(max_records=max_records, timeout_ms=2_000)
    got += await member.acquire(timeout_ms=500)
    return sorted(got, key=lambda r: (r.partition, r.offset))


@pytest.mark.timeout(300)
def test_an_http_share_member_and_a_kafka_share_consumer_share_a_groups_records(
    kafka_cluster: LocalCluster, java_client: Any
) -> None:
    """An HTTP member acquires 20 records (delivery count 1), accepts 10, releases 5 and rejects 5 in one
    request; an acknowledgement of a record no longer held is refused (40931). Kafka's share consumer
    in the same group then gets exactly the 5 released, each a second time."""
    topic = f"share-http-{uuid.uuid4().hex[:6]}"

    async def http_member() -> None:
        async with RaftlogClient(kafka_cluster.servers) as client:
            await client.create_topic(topic, partitions=1, replication_factor=3)
            member = ShareConsumer(client, f"{topic}-share")
            await member.join([topic])
            assert member.assignment == [(topic, 0)]
            assert await member.acquire(timeout_ms=0) == []  # the group starts at the end (latest)
            for i in range(20):
                await client.produce(topic, [Message(f"r{i}")])  # a batch each
            got = await _acquire_until(member, 20, max_records=7)
            assert [(r.offset, r.value, r.delivery_count) for r in got] == [
                (i, f"r{i}".encode(), 1) for i in range(20)
            ]
            kinds = [ACCEPT] * 10 + [RELEASE] * 5 + [REJECT] * 5
            assert await member.acknowledge(zip(got, kinds, strict=True)) == [Acknowledged(topic, 0, 20)]
            with pytest.raises(RequestFailed) as refused:
                await member.acknowledge([(got[0], ACCEPT)])
            assert (refused.value.status, refused.value.error_code) == (409, 40931)
            await member.leave()

    asyncio.run(http_member())
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    assert java_client("share-drain", settings, topic, "5") == {"got": [f"r{i}@2" for i in range(10, 15)]}


@pytest.mark.timeout(300)
def test_an_http_share_member_gets_what_a_kafka_consumer_held_once_its_locks_expired(
    kafka_cluster: LocalCluster, java_client: Any
) -> None:
    """Kafka's share consumer acquires 20 records, accepts 10 and halts holding the others: an HTTP
    member of the group gets exactly those 10 once their locks expired, each a second time, and nothing
    more after accepting them."""
    topic = f"share-held-{uuid.uuid4().hex[:6]}"
    settings = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    assert java_client("share-hold", settings, topic) == {"held": 10, "acked": 10, "failed": 0}

    async def http_member() -> tuple[list[tuple[bytes | None, int]], list[ShareRecord]]:
        async with RaftlogClient(kafka_cluster.servers) as client:
            member = ShareConsumer(client, f"{topic}-share")
            await member.join([topic])
            got = await _acquire_until(member, 10)
            await member.acknowledge((r, ACCEPT) for r in got)
            after = await member.acquire(timeout_ms=SHARE_LOCK_MS + 1_000)
            await member.leave()
            return [(r.value, r.delivery_count) for r in got], after

    got, after = asyncio.run(http_member())
    assert got == [(f"r{i}".encode(), 2) for i in range(10, 20)]
    assert after == []


@pytest.mark.timeout(120)
def test_an_http_share_member_renews_a_lock_and_keeps_its_record_past_the_first(
    kafka_cluster: LocalCluster,
) -> None:
    """An HTTP member renews the lock of one of the two records it holds (type renew, KIP-1222's RENEW,
    the rule below the doors): past the first lock another member gets only the record not renewed, a
    second time, and the renewed one is still the first member's to accept."""
    topic, lock_ms = f"share-renew-{uuid.uuid4().hex[:6]}", 15_000  # the least a group config may set
    group = f"{topic}-share"
    set_group_configs(kafka_cluster, group, {"share.record.lock.duration.ms": str(lock_ms)})

    async def http_members() -> None:
        async with RaftlogClient(kafka_cluster.servers) as client:
            await client.create_topic(topic, partitions=1, replication_factor=3)
            first, second = ShareConsumer(client, group), ShareConsumer(client, group)
            await first.join([topic])
            await second.join([topic])
            assert await first.acquire(timeout_ms=0) == []  # the group starts at the end (latest)
            await client.produce(topic, [Message("kept"), Message("let go")])
            before = time.monotonic()
            got = await _acquire_until(first, 2)
            after = time.monotonic()
            assert [r.value for r in got] == [b"kept", b"let go"]
            await asyncio.sleep(lock_ms / 2500)
            assert await first.acknowledge([(got[0], RENEW)]) == [Acknowledged(topic, 0, 1)]
            assert time.monotonic() - before < lock_ms / 1000, "renewed after the first lock expired"
            await asyncio.sleep(max(0.0, after + lock_ms / 1000 + 0.5 - time.monotonic()))  # past the first
            later = await second.acquire(timeout_ms=0)
            assert [(r.value, r.delivery_count) for r in later] == [(b"let go", 2)]
            assert await first.acknowledge([(got[0], ACCEPT)]) == [Acknowledged(topic, 0, 1)]
            await second.acknowledge([(later[0], ACCEPT)])
            await first.leave()
            await second.leave()

    asyncio.run(http_members())


@pytest.mark.timeout(120)
def test_an_http_share_member_leaves_joins_again_and_is_bounded(kafka_cluster: LocalCluster) -> None:
    """What a member held when it left goes to another (delivery count 2); the member gone is 404/40410
    (its client joins again); an acquire past the bound of records is refused before anything is
    locked; the group is listed as a share group of the HTTP door while it has a member."""
    topic = f"share-leave-{uuid.uuid4().hex[:6]}"
    group = f"{topic}-share"

    async def run() -> None:
        async with RaftlogClient(kafka_cluster.servers) as client:
            await client.create_topic(topic, partitions=2, replication_factor=3)
            first, second = ShareConsumer(client, group), ShareConsumer(client, group)
            await first.join([topic])
            await first.acquire(timeout_ms=0)
            for i in range(4):
                await client.produce(topic, [Message(f"v{i}")], partition=i % 2)
            held = await _acquire_until(first, 4)
            assert sorted((r.value, r.delivery_count) for r in held) == [
                (f"v{i}".encode(), 1) for i in range(4)
            ]
            gone = first.member_id
            await first.leave()
            await second.join([topic])
            assert sorted(second.assignment) == [(topic, 0), (topic, 1)]
            again = await _acquire_until(second, 4)
            assert sorted((r.value, r.delivery_count) for r in again) == [
                (f"v{i}".encode(), 2) for i in range(4)
            ]
            first.member_id = gone
            with pytest.raises(RequestFailed) as unknown:
                await first.heartbeat()
            assert (unknown.value.status, unknown.value.error_code) == (404, 40410)
            with pytest.raises(RequestFailed) as bounded:
                await second.acquire(max_records=1_001)
            assert bounded.value.status == 400
            listed = {g["group"]: g for g in await client.consumer_groups()}
            assert (listed[group]["group_type"], listed[group]["door"], listed[group]["members"]) == (
                "share",
                "http",
                1,
            )
            await second.leave()

    asyncio.run(run())


async def _moved(client: RaftlogClient, partition: int) -> str:
    """Leadership of ``__consumer_groups`` ``partition`` handed to another of its replicas (asked again
    while a move or an election is under way); the node that leads it then."""

    async def handed() -> str | None:
        state = await client.cluster.partition_state("__consumer_groups", partition)
        leader = state["leader"]
        target = next(r["node"] for r in state["replicas"] if r["node"] != leader)
        try:
            await client.cluster.transfer_leadership("__consumer_groups", partition, target)
        except RequestFailed as refused:
            if refused.status in (409, 503):
                return None
            raise
        state = await client.cluster.partition_state("__consumer_groups", partition)
        return str(target) if state["leader"] == target else None

    return str(await wait_until(handed, f"__consumer_groups/{partition} handed to another node"))


@pytest.mark.timeout(120)
def test_an_http_share_member_goes_on_through_a_move_of_its_coordinator(kafka_cluster: LocalCluster) -> None:
    """The group's coordinator partition is handed to another node while a member holds records: the
    member is listed there at once, keeps its id, heartbeats on and acknowledges what it held; nothing it
    held is delivered to it again (the group's members are in the group table, as Kafka records them)."""
    topic = f"share-moved-{uuid.uuid4().hex[:6]}"
    group = f"{topic}-share"

    async def run() -> None:
        async with RaftlogClient(kafka_cluster.servers) as client:
            await client.create_topic(topic, partitions=1, replication_factor=3)
            member = ShareConsumer(client, group)
            await member.join([topic])
            await member.acquire(timeout_ms=0)
            for i in range(4):
                await client.produce(topic, [Message(f"v{i}")])
            held = await _acquire_until(member, 4)
            assert [(r.value, r.delivery_count) for r in held] == [(f"v{i}".encode(), 1) for i in range(4)]
            before = {g["group"]: g for g in await client.consumer_groups()}[group]
            coordinator = await _moved(client, before["coordinator_partition"])
            listed = {g["group"]: g for g in await client.consumer_groups()}[group]
            assert (listed["door"], listed["members"], listed["group_type"]) == ("http", 1, "share")
            member_id = member.member_id
            assert await member.heartbeat() == [(topic, 0)] and member.member_id == member_id
            assert await member.acknowledge((r, ACCEPT) for r in held) == [Acknowledged(topic, 0, 4)]
            assert await member.acquire(timeout_ms=500) == []
            print(f"{group}: its coordinator moved to {coordinator}; the member went on")
            await member.leave()

    asyncio.run(run())


@pytest.mark.timeout(120)
def test_raftlog_share_consume_acknowledges_each_record_within_its_bounds(
    kafka_cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """``raftlog share consume``: 3 records released (``--ack release``, ``--max-records 3``), then 6
    accepted, the released ones a second time; then nothing within ``--duration``. Progress on stderr."""
    topic = f"share-cli-{uuid.uuid4().hex[:6]}"

    async def produce() -> None:
        async with RaftlogClient(kafka_cluster.servers) as client:
            await client.create_topic(topic, partitions=1, replication_factor=3)
            for i in range(6):
                await client.produce(topic, [Message(f"v{i}")])

    asyncio.run(produce())
    server = ("--server", kafka_cluster.servers[0])

    def consume(*options: str) -> tuple[list[tuple[str, int, str]], str]:
        capsys.readouterr()
        assert (
            main(["share", "consume", f"{topic}-share", topic, "--from", "earliest", *options, *server]) == 0
        )
        out, err = capsys.readouterr()
        rows = [json.loads(line) for line in out.splitlines()]
        return [(r["value"], r["delivery_count"], r["acknowledged"]) for r in rows], err

    released, err = consume("--ack", "release", "--max-records", "3")
    assert released == [(f"v{i}", 1, "release") for i in range(3)] and "released 3" in err
    accepted, err = consume("--max-records", "6")
    assert sorted(accepted) == [(f"v{i}", 2 if i < 3 else 1, "accept") for i in range(6)]
    assert "accepted 6" in err
    assert consume("--duration", "1")[0] == []


@pytest.mark.timeout(120)
def test_an_http_share_member_naming_no_reset_starts_where_the_groups_config_says(
    kafka_cluster: LocalCluster,
) -> None:
    """The group's ``share.auto.offset.reset`` ``by_duration:PT1H`` (KIP-1106): an HTTP member whose
    acquires name no reset gets the two records of the last hour, not the two of two hours ago (the
    log's start) nor nothing (the end, ``latest``); a reset it names must be one (400 otherwise)."""
    topic = f"share-reset-{uuid.uuid4().hex[:6]}"
    group = f"{topic}-share"
    two_hours_ago = int(time.time() * 1000) - 7_200_000

    async def run() -> None:
        async with RaftlogClient(kafka_cluster.servers) as client:
            await client.create_topic(topic, partitions=1, replication_factor=3)
            old = [Message(f"old{i}", timestamp_ms=two_hours_ago) for i in range(2)]
            await client.produce(topic, [*old, Message("new0"), Message("new1")])
            set_group_configs(kafka_cluster, group, {"share.auto.offset.reset": "by_duration:PT1H"})
            member = ShareConsumer(client, group)
            await member.join([topic])
            got = await _acquire_until(member, 2)
            assert [r.value for r in got] == [b"new0", b"new1"]
            await member.acknowledge((r, ACCEPT) for r in got)
            member.offset_reset = "by_duration:P1X"
            with pytest.raises(RequestFailed) as refused:
                await member.acquire(timeout_ms=0)
            assert refused.value.status == 400 and "by_duration" in str(refused.value)
            await member.leave()

    asyncio.run(run())


def test_a_share_group_heartbeat_past_the_bound_of_share_groups_is_refused_naming_it() -> None:
    """The Kafka door's answer to a join creating one share group past ``--group-share-max-groups``:
    GROUP_MAX_SIZE_REACHED (the code Kafka's share consumer fails on with the message), the message
    naming the bound (the rule's own tests: ``tests/partitions/groups/test_share_coordinator.py``)."""
    door = _share_door(ShareGroupCoordinator(ShareTable({"t": 1}), lambda: 0, groups_max=1))

    def join(group: str) -> Any:
        body = SimpleNamespace(
            group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None,
            subscribed_topic_names=("t",),
        )  # fmt: skip
        return asyncio.run(share_group_heartbeat(door, wire.Request(76, 1, 1, "test", body)))  # type: ignore[arg-type]

    assert join("first").error_code == ErrorCode.none
    refused = join("second")
    assert refused.error_code == ErrorCode.group_max_size_reached and refused.member_id is None
    assert (
        "'second' not created" in refused.error_message
        and "--group-share-max-groups" in refused.error_message
    )
    assert join("first").error_code == ErrorCode.none  # a group there is still takes members


def test_share_group_describe_of_no_share_group_answers_in_kafka_s_words() -> None:
    """ShareGroupDescribe of a name no group has, and of a group of another protocol: GROUP_ID_NOT_FOUND
    with Kafka 4.4's words ("Group ... not found.", "Group ... is not a share group."), which
    ``kafka-share-groups --describe`` prints; a share group there is described."""
    table = ShareTable({"t": 1})
    table.table.apply(encode(KafkaGeneration("classic", "consumer", "range", 1, 5)))
    door = _share_door(
        ShareGroupCoordinator(table, lambda: 0),
        recorded=lambda name: Recorded(1, table.table.groups.get(name)),
        classic=SimpleNamespace(live=lambda name: None),
    )
    heartbeat = SimpleNamespace(
        group_id="shared",
        member_id=uuid.uuid4().hex,
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=("t",),
    )
    assert asyncio.run(share_group_heartbeat(door, wire.Request(76, 1, 1, "test", heartbeat))).error_code == 0  # type: ignore[arg-type]
    body = SimpleNamespace(group_ids=("missing", "classic", "shared"), include_authorized_operations=False)
    answer = asyncio.run(share_group_describe(door, wire.Request(77, 1, 2, "test", body)))  # type: ignore[arg-type]
    found = {g.group_id: (g.error_code, g.error_message) for g in answer.groups}
    assert found == {
        "missing": (ErrorCode.group_id_not_found, "Group missing not found."),
        "classic": (ErrorCode.group_id_not_found, "Group classic is not a share group."),
        "shared": (ErrorCode.none, None),
    }


def _share_door(share: ShareGroupCoordinator, **coordinator: Any) -> Any:
    """The Kafka door as the share group handlers use it, over ``share`` and what else of the node's
    group coordinator a test gives (``coordinator``)."""
    return SimpleNamespace(
        allows=lambda *_: True,
        cluster_id="c",
        coordinator_of=lambda *_: "n1",
        node=SimpleNamespace(node_id="n1", metadata=_NoTopics()),
        session=Session(host="127.0.0.1"),
        coordinator=SimpleNamespace(share=share, ensure_topic=_nothing, **coordinator),
    )


async def _nothing() -> None:
    return None


class _NoTopics:
    def topic(self, name: str) -> None:
        raise UnknownTopic(name)


def test_a_share_member_is_refused_an_empty_consumer_protocol_group_as_kafka_refuses_it(
    kafka_cluster: LocalCluster,
) -> None:
    """Kafka 4.4 makes no share group of a group of another type, even one whose consumer protocol
    members all left (its offsets and epoch kept): GROUP_ID_NOT_FOUND, "Group ... is not a share group".
    Through the Kafka door of a real cluster, at the group's coordinator; once deleted, the name is free."""
    group = f"empty-consumer-{uuid.uuid4().hex[:8]}"
    consumer, share = wire.request_class(68, 0), wire.request_class(76, 1)

    def at_coordinator() -> tuple[RawKafka, Any] | None:
        for address in kafka_cluster.bootstrap_servers.split(","):
            connection = RawKafka(address)  # as a client asks first: the groups' topic made if need be
            connection.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
            joined = connection.call(
                68, 0,
                wire.build(
                    consumer, group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
                    instance_id=None, rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
                    subscribed_topic_names=("share-refused",), server_assignor=None, topic_partitions=(),
                ),
            )  # fmt: skip
            if joined.error_code not in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
                return connection, joined
            connection.close()
        return None

    connection, joined = wait_for(at_coordinator, f"the coordinator of {group}", 120)
    try:
        assert joined.error_code == ErrorCode.none, joined
        left = connection.call(
            68, 0,
            wire.build(
                consumer, group_id=group, member_id=joined.member_id, member_epoch=-1, instance_id=None,
                rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
                subscribed_topic_names=None, server_assignor=None, topic_partitions=None,
            ),
        )  # fmt: skip
        assert left.error_code == ErrorCode.none, left

        def share_join() -> Any:
            return connection.call(
                76, 1,
                wire.build(
                    share, group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, rack_id=None,
                    subscribed_topic_names=("share-refused",),
                ),
            )  # fmt: skip

        refused = share_join()
        assert refused.error_code == ErrorCode.group_id_not_found, refused
        assert refused.error_message.startswith(f"Group {group} is not a share group"), refused
        admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
        admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=60)
        assert share_join().error_code == ErrorCode.none
    finally:
        connection.close()
