"""ShareFetch and ShareAcknowledge v2 (Kafka 4.2's, KIP-1206 and KIP-1222) against a real node process,
in raw requests: a fetch in record-limit mode acquires exactly ``max_records`` records, splitting a batch;
a RENEW keeps a record its member's past its first lock while a record not renewed goes to another
member; and the refusals Kafka 4.4's ``KafkaApis`` answers (RENEW in a v1 request or one not flagged
``is_renew_ack``, a renewing fetch asking for records). The rules without a node:
``tests/partitions/groups/test_share_partition.py``."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from test_connection_limits import RunningNode, _http, log_in, one_node
from test_share_quotas import _call
from test_share_session_bounds import TOPIC, _coordinator_ready, _join, _topic_id

from kafka_api import wire
from partitions.groups.share.partition import ACCEPT, RENEW

BOB = ("bob", "bob's password")
LOCK_MS = 10_000  # every group's lock duration on this node
SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    limits = ("--group-share-record-lock-duration-ms", str(LOCK_MS))
    with one_node(tmp_path_factory.mktemp("share-v2"), False, limits, (BOB,)) as running:
        assert _http(running.http, None, "POST", "/v1/topics", {"name": TOPIC, "partitions": 1}) == 201
        yield running


def _bob(node: RunningNode) -> RawKafka:
    raw, answer = log_in(node, *BOB)
    assert answer.error_code == 0, answer
    return raw


def _produce(node: RunningNode, count: int) -> None:
    """``count`` records in one request: one batch."""
    records = [{"value": f"record {i}"} for i in range(count)]
    status, body = _call(node, BOB, "POST", f"/topics/{TOPIC}/partitions/0", {"records": records})
    assert status == 200, body


def _batches(cls: type, acks: tuple[tuple[int, int, int], ...]) -> tuple[Any, ...]:
    return tuple(
        wire.build(
            wire.sibling(cls, "AcknowledgementBatch"), first_offset=f, last_offset=la, acknowledge_types=(t,)
        )
        for f, la, t in acks
    )


def _fetch(
    raw: RawKafka,
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    version: int = 2,
    acks: tuple[tuple[int, int, int], ...] = (),
    max_records: int = 10,
    wait_ms: int = 0,
    mode: int = BATCH_OPTIMIZED,
    renew: bool = False,
) -> Any:
    cls = wire.request_class(SHARE_FETCH, version)
    partition = wire.build(
        wire.sibling(cls, "FetchPartition"), partition_index=0, acknowledgement_batches=_batches(cls, acks)
    )
    asked = 0 if renew else 1  # a renewing fetch asks for nothing
    body = wire.build(
        cls, group_id=group, member_id=member, share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=asked, max_bytes=asked * 1024 * 1024,
        max_records=max_records, batch_size=max_records, share_acquire_mode=mode, is_renew_ack=renew,
        topics=(wire.build(wire.sibling(cls, "FetchTopic"), topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
    )  # fmt: skip
    return raw.call(SHARE_FETCH, version, body)


def _acknowledge(
    raw: RawKafka,
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    acks: tuple[tuple[int, int, int], ...],
    renew: bool | None = None,
) -> Any:
    """A ShareAcknowledge v2, flagged ``is_renew_ack`` when it renews (unless ``renew`` says otherwise)."""
    cls = wire.request_class(SHARE_ACKNOWLEDGE, 2)
    batches = _batches(cls, acks)
    partition = wire.build(
        wire.sibling(cls, "AcknowledgePartition"), partition_index=0, acknowledgement_batches=batches
    )
    flagged = any(t == RENEW for _, _, t in acks) if renew is None else renew
    topic = wire.build(wire.sibling(cls, "AcknowledgeTopic"), topic_id=topic_id, partitions=(partition,))
    body = wire.build(
        cls,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        is_renew_ack=flagged,
        topics=(topic,),
    )
    return raw.call(SHARE_ACKNOWLEDGE, 2, body)


def _acquired(answer: Any) -> list[tuple[int, int, int]]:
    assert answer.error_code == ErrorCode.none, answer
    found = [r for t in answer.responses for p in t.partitions for r in p.acquired_records]
    return [(int(r.first_offset), int(r.last_offset), int(r.delivery_count)) for r in found]


def _partition(answer: Any) -> Any:
    assert answer.error_code == ErrorCode.none, answer
    ((partition,),) = [t.partitions for t in answer.responses]
    return partition


def test_record_limit_mode_splits_a_batch_and_v1_and_unflagged_renews_are_refused(node: RunningNode) -> None:
    bob = _bob(node)
    group = "record-limit"
    _coordinator_ready(bob, group)
    member, topic_id = _join(bob, group), _topic_id(bob)
    assert _acquired(_fetch(bob, group, member, 0, topic_id)) == []  # the group starts at the log's end
    _produce(node, 5)
    limited = _fetch(bob, group, member, 1, topic_id, max_records=2, wait_ms=10_000, mode=RECORD_LIMIT)
    first = _acquired(limited)
    assert len(first) == 1 and first[0][1] - first[0][0] + 1 == 2, first  # 2 of the batch's 5, exactly
    start = first[0][0]
    rest = _acquired(_fetch(bob, group, member, 2, topic_id, max_records=1))  # batch-optimized: whole
    assert rest == [(start + 2, start + 4, 1)], rest

    renew = ((start + 1, start + 1, RENEW),)
    v1 = _fetch(bob, group, member, 3, topic_id, version=1, acks=renew)
    assert _partition(v1).acknowledge_error_code == ErrorCode.invalid_request  # v1 knows no RENEW
    unflagged = _acknowledge(bob, group, member, 4, topic_id, renew, renew=False)
    assert _partition(unflagged).error_code == ErrorCode.invalid_request  # RENEW, not flagged is_renew_ack
    unflagged_fetch = _fetch(bob, group, member, 5, topic_id, acks=renew, max_records=5)
    assert _partition(unflagged_fetch).acknowledge_error_code == ErrorCode.invalid_request
    asking = _fetch(bob, group, member, 6, topic_id, acks=renew, renew=True)  # max_records 10, not 0
    assert asking.error_code == ErrorCode.invalid_request, asking
    assert "maxRecords must be set to 0" in (asking.error_message or ""), asking.error_message
    accepted = _acknowledge(bob, group, member, 6, topic_id, ((start, start + 4, ACCEPT),))
    assert _partition(accepted).error_code == ErrorCode.none, "every refusal above changed nothing"
    bob.close()


def test_a_renewed_record_stays_its_members_past_its_first_lock(node: RunningNode) -> None:
    bob, other = _bob(node), _bob(node)
    group = "renewed"
    _coordinator_ready(bob, group)
    member, second, topic_id = _join(bob, group), _join(other, group), _topic_id(bob)
    assert _acquired(_fetch(bob, group, member, 0, topic_id)) == []
    assert _acquired(_fetch(other, group, second, 0, topic_id)) == []
    _produce(node, 2)
    ((first, last, deliveries),) = _acquired(_fetch(bob, group, member, 1, topic_id, wait_ms=10_000))
    acquired_at = time.monotonic()
    assert (last - first, deliveries) == (1, 1)
    time.sleep(LOCK_MS / 3000)
    renewed = _fetch(
        bob, group, member, 2, topic_id, acks=((first, first, RENEW),), max_records=0, renew=True
    )
    assert time.monotonic() - acquired_at < LOCK_MS / 1000, "the renew came after the first lock expired"
    partition = _partition(renewed)
    assert partition.acknowledge_error_code == 0, partition
    assert list(partition.acquired_records) == [], "a renewing fetch acquires nothing"
    assert renewed.acquisition_lock_timeout == datetime.timedelta(milliseconds=LOCK_MS)

    time.sleep(max(0.0, acquired_at + LOCK_MS / 1000 + 0.5 - time.monotonic()))  # past the first lock
    got = _acquired(_fetch(other, group, second, 1, topic_id))
    assert got == [(last, last, 2)], got  # the record not renewed, delivered again; the renewed one not
    accepted = _acknowledge(bob, group, member, 3, topic_id, ((first, first, ACCEPT),))
    assert _partition(accepted).error_code == ErrorCode.none, "the renewed record was still bob's"
    assert accepted.acquisition_lock_timeout == datetime.timedelta(milliseconds=LOCK_MS)
    late = _acknowledge(bob, group, member, 4, topic_id, ((last, last, ACCEPT),))
    assert _partition(late).error_code == ErrorCode.invalid_record_state  # its lock expired: not bob's
    bob.close()
    other.close()
