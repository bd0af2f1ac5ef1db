"""Issue 72 item 5 against a real node process (``raftlog serve --require-auth``): one user sending
ShareFetches that open sessions for 2,000 made-up member ids on one connection is answered
UNKNOWN_MEMBER_ID for each and opens none, while the node's liveness answers within a second; a user's
real members hold at most ``--kafka-share-sessions-per-connection-max`` sessions on one connection and
``--kafka-share-sessions-per-user-max`` on the node; and another user's share consumer opens its session
and acquires a record all along. The bounds' rules: ``tests/kafka_api/test_share_sessions.py``; the
coordinator's check: ``tests/partitions/groups/test_share_coordinator.py``."""

from __future__ import annotations

import datetime
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from loop_held import never_held
from test_connection_limits import TOKEN, RunningNode, _http, log_in, one_node

from kafka_api import wire
from tests.waiting import wait_for

MALLORY = ("mallory", "mallory's password")
BOB = ("bob", "bob's password")
PER_CONNECTION, PER_USER = 2, 3
MADE_UP = 2_000  # the count: as many as the node's whole room (Kafka's 2,000)
MANY = 50_000  # partition entries of one ShareFetch (a 300 KiB frame)
LIVE_WITHIN_S = 1.0  # the liveness bound: the node's loop held less than that of CPU (loop_held)
TOPIC = "shared-records"
HEARTBEAT, SHARE_FETCH, FIND_COORDINATOR, METADATA = 76, 78, 10, 3


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    limits = (
        "--kafka-share-sessions-per-connection-max", str(PER_CONNECTION),
        "--kafka-share-sessions-per-user-max", str(PER_USER),
    )  # fmt: skip
    with one_node(tmp_path_factory.mktemp("share-bounds"), False, limits, (MALLORY, BOB)) as running:
        assert _http(running.http, None, "POST", "/v1/topics", {"name": TOPIC, "partitions": 1}) == 201
        yield running


def _logged_in(node: RunningNode, user: tuple[str, str]) -> RawKafka:
    raw, answer = log_in(node, *user)
    assert answer.error_code == 0, answer
    return raw


def _coordinator_ready(raw: RawKafka, group: str) -> None:
    """FindCoordinator until the node names itself (it makes the groups' topic on the first ask)."""
    request = wire.build(wire.request_class(FIND_COORDINATOR, 4), key_type=0, coordinator_keys=(group,))
    wait_for(
        lambda: raw.call(FIND_COORDINATOR, 4, request).coordinators[0].error_code == ErrorCode.none,
        f"the node to coordinate {group}",
    )


# what a share consumer's heartbeat asks again (Kafka's ShareHeartbeatRequestManager): the node named by
# FindCoordinator answers NOT_COORDINATOR while it leads the groups' partition but may not read its table
# yet (its term's first entry not applied, or its Raft thread stood still under load and its leadership is
# not confirmed since); COORDINATOR_LOAD_IN_PROGRESS as Kafka's loading coordinator does
COORDINATOR_RETRIED = (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress)


def _join(raw: RawKafka, group: str) -> str:
    """A new member of ``group`` subscribed to ``TOPIC`` (ShareGroupHeartbeat, epoch 0): its id, once the
    coordinator took it (asked again while it answers as a coordinator not ready, as a client does)."""
    member = str(uuid.uuid4())
    cls = wire.request_class(HEARTBEAT, 1)
    body = wire.build(
        cls, group_id=group, member_id=member, member_epoch=0, rack_id=None, subscribed_topic_names=(TOPIC,)
    )

    def answered() -> Any:
        answer = raw.call(HEARTBEAT, 1, body)
        return None if answer.error_code in COORDINATOR_RETRIED else answer

    answer = wait_for(answered, f"{group}'s coordinator to take a member")
    assert answer.error_code == ErrorCode.none, answer
    return member


def _share_fetch(
    raw: RawKafka, group: str, member: str, epoch: int, topic_id: uuid.UUID | None = None, wait_ms: int = 0
) -> Any:
    cls = wire.request_class(SHARE_FETCH, 1)
    topics: tuple[Any, ...] = ()
    if topic_id is not None:
        partition = wire.build(
            wire.sibling(cls, "FetchPartition"), partition_index=0, acknowledgement_batches=()
        )
        topics = (wire.build(wire.sibling(cls, "FetchTopic"), topic_id=topic_id, partitions=(partition,)),)
    body = wire.build(
        cls, group_id=group, member_id=member, share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1, max_bytes=1024 * 1024, max_records=10, batch_size=10, topics=topics,
        forgotten_topics_data=(),
    )  # fmt: skip
    return raw.call(SHARE_FETCH, 1, body)


def _topic_id(raw: RawKafka) -> uuid.UUID:
    cls = wire.request_class(METADATA, 12)
    asked = wire.build(wire.sibling(cls, "MetadataRequestTopic"), topic_id=None, name=TOPIC)
    body = wire.build(
        cls, topics=(asked,), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    (topic,) = raw.call(METADATA, 12, body).topics
    assert topic.error_code == ErrorCode.none, topic
    return uuid.UUID(str(topic.topic_id))


class _Liveness(threading.Thread):
    """Asks the node's ``/status/live`` over and over while an attack runs: the slowest answer."""

    def __init__(self, http: str) -> None:
        super().__init__(daemon=True)
        self._http, self.stop, self.slowest_s, self.asked = http, threading.Event(), 0.0, 0

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self._http + "/status/live", timeout=5) as answer:
                    assert answer.status == 200
                took = time.monotonic() - started
            except OSError:
                took = float("inf")
            self.slowest_s, self.asked = max(self.slowest_s, took), self.asked + 1
            self.stop.wait(0.05)


def test_made_up_members_open_no_share_session_and_one_user_holds_only_its_bounds(node: RunningNode) -> None:
    mallory, bob = _logged_in(node, MALLORY), _logged_in(node, BOB)
    _coordinator_ready(bob, "bob-group")
    bob_member = _join(bob, "bob-group")
    liveness = _Liveness(node.http)
    liveness.start()
    try:
        with never_held(node.http, LIVE_WITHIN_S, TOKEN, node.context()):
            answers = [
                _share_fetch(mallory, "mallory-group", str(uuid.uuid4()), 0).error_code
                for _ in range(MADE_UP)
            ]
    finally:
        liveness.stop.set()
        liveness.join()
    assert answers.count(ErrorCode.unknown_member_id) == MADE_UP, {a: answers.count(a) for a in set(answers)}
    # answered all along; how long each waited is the machine's load as well: the bound is never_held's
    assert liveness.asked >= 3 and liveness.slowest_s < float("inf"), (liveness.asked, liveness.slowest_s)

    _coordinator_ready(mallory, "mallory-group")
    members = [_join(mallory, "mallory-group") for _ in range(PER_USER + 1)]
    opened = [_share_fetch(mallory, "mallory-group", m, 0) for m in members[: PER_CONNECTION + 1]]
    assert [a.error_code for a in opened] == [ErrorCode.none] * PER_CONNECTION + [
        ErrorCode.share_session_limit_reached
    ]
    assert "--kafka-share-sessions-per-connection-max" in opened[-1].error_message
    second = _logged_in(node, MALLORY)
    assert _share_fetch(second, "mallory-group", members[PER_CONNECTION], 0).error_code == ErrorCode.none
    past_user = _share_fetch(second, "mallory-group", members[PER_USER], 0)
    assert past_user.error_code == ErrorCode.share_session_limit_reached
    assert "user 'mallory'" in past_user.error_message, past_user.error_message

    topic_id = _topic_id(bob)  # another user's share consumer: its session opens, and it gets a record
    assert _share_fetch(bob, "bob-group", bob_member, 0, topic_id).error_code == ErrorCode.none
    producer = Producer({**node.client_settings(), "sasl.username": BOB[0], "sasl.password": BOB[1]})
    producer.produce(TOPIC, b"for bob")
    assert producer.flush(30) == 0
    got = _share_fetch(bob, "bob-group", bob_member, 1, topic_id, wait_ms=10_000)
    assert got.error_code == ErrorCode.none, got
    acquired = [r for t in got.responses for p in t.partitions for r in p.acquired_records]
    assert acquired, got
    for raw in (mallory, second, bob):
        raw.close()


def test_a_share_fetch_naming_many_partitions_keeps_the_node_live_and_only_real_ones_in_its_session(
    node: RunningNode,
) -> None:
    """50,000 partition entries of a one-partition topic: each answered, the node live meanwhile (the
    handler goes through them in turns), and the session keeps only the partition that exists (it kept
    every entry, each looked for in a list: minutes of the event loop)."""
    bob = _logged_in(node, BOB)
    _coordinator_ready(bob, "bob-many")
    member = _join(bob, "bob-many")
    topic_id = _topic_id(bob)
    cls = wire.request_class(SHARE_FETCH, 1)
    entries = tuple(
        wire.build(wire.sibling(cls, "FetchPartition"), partition_index=index, acknowledgement_batches=())
        for index in range(MANY)
    )
    body = wire.build(
        cls, group_id="bob-many", member_id=member, share_session_epoch=0,
        max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1024 * 1024, max_records=10, batch_size=10,
        topics=(wire.build(wire.sibling(cls, "FetchTopic"), topic_id=topic_id, partitions=entries),),
        forgotten_topics_data=(),
    )  # fmt: skip
    liveness = _Liveness(node.http)
    liveness.start()
    try:
        bob.sock.settimeout(120)
        with never_held(node.http, LIVE_WITHIN_S, TOKEN, node.context()):
            answer = bob.call(SHARE_FETCH, 1, body)
    finally:
        liveness.stop.set()
        liveness.join()
    codes = [p.error_code for t in answer.responses for p in t.partitions]
    assert answer.error_code == ErrorCode.none and len(codes) == MANY, answer.error_code
    assert codes[0] == ErrorCode.none and set(codes[1:]) == {ErrorCode.unknown_topic_or_partition}
    # answered all along; how long each waited is the machine's load as well: the bound is never_held's
    assert liveness.asked >= 3 and liveness.slowest_s < float("inf"), (liveness.asked, liveness.slowest_s)
    session = _share_fetch(bob, "bob-many", member, 1)  # naming nothing: what the session holds
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in session.responses] == [
        (topic_id, [0])
    ]
    bob.close()
