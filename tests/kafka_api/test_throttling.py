"""What the Kafka door does with a request past a client quota (``kafka_api.throttling``), without a
cluster: the answer's ``throttle_time_ms``, a throttled Fetch answered empty with its bytes taken back,
old versions' answers held back instead, the exempt APIs."""

from __future__ import annotations

import datetime
from typing import Any

from kafka_api import throttling, wire
from partitions.security.quotas import ClientQuotas, Entity

FETCH, PRODUCE, SHARE_FETCH = 1, 0, 78
Quotas = dict[Entity, dict[str, float]]


def _fetch_answer(records: bytes) -> Any:
    cls = wire.response_class(FETCH, 12)
    partition = wire.build(
        wire.sibling(cls, "PartitionData"), partition_index=0, error_code=0, high_watermark=1,
        last_stable_offset=1, log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
        records=records,
    )  # fmt: skip
    topic = wire.build(wire.sibling(cls, "FetchableTopicResponse"), topic="t", partitions=(partition,))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=0, session_id=0, responses=(topic,))


def test_a_fetch_past_its_quota_is_answered_empty_with_the_throttle_and_its_bytes_taken_back() -> None:
    table: Quotas = {(("client-id", "c"),): {"consumer_byte_rate": 100.0}}
    quotas = ClientQuotas(lambda: table)
    within, throttle_ms = throttling.throttle(quotas, FETCH, None, "c", 50, _fetch_answer(b"r" * 500), 0.0, 0)
    assert throttle_ms == 0 and throttling.record_bytes(within) == 500  # 500 B over ten seconds: within
    quotas.record("consumer_byte_rate", None, "c", 1000, 5)  # another connection of the client used it up
    past, throttle_ms = throttling.throttle(quotas, FETCH, None, "c", 50, _fetch_answer(b"r" * 5000), 0.0, 10)
    assert throttle_ms > 0 and past.responses == ()
    assert past.throttle_time == datetime.timedelta(milliseconds=throttle_ms)
    before = quotas.over("consumer_byte_rate", None, "c", 10)
    window_ms = 10_010  # ten whole windows, and the 10 ms since the first value
    assert before == round((1500 / (window_ms / 1000) - 100) / 100 * window_ms)  # the 5000 B not counted
    assert throttling.fetch_max_bytes(quotas, None, "c", 55 * 2**20) == 1000  # the quota's ten seconds
    assert throttling.fetch_max_bytes(quotas, None, "other", 4096) == 4096


def test_a_fetch_within_its_quota_is_answered_whole_however_large_and_throttled_after() -> None:
    """A batch larger than the quota's window (a consumer's max.partition.fetch.bytes above ten times its
    quota) is served to a client within its quota, and its throttle keeps the client back until its
    rate is at the quota again: progress, at the quota's rate."""
    table: Quotas = {(("client-id", "c"),): {"consumer_byte_rate": 100.0}}
    quotas = ClientQuotas(lambda: table)
    served, throttle_ms = throttling.throttle(
        quotas, FETCH, None, "c", 50, _fetch_answer(b"r" * 5000), 0.0, 0
    )
    assert throttling.record_bytes(served) == 5000 and throttle_ms == round((500 - 100) / 100 * 10_000)
    assert served.throttle_time == datetime.timedelta(milliseconds=throttle_ms)
    after = throttle_ms  # the client waits it out: its rate is at the quota, and the next is served
    assert quotas.over("consumer_byte_rate", None, "c", after) == 0
    again, _ = throttling.throttle(quotas, FETCH, None, "c", 50, _fetch_answer(b"r" * 5000), 0.0, after)
    assert throttling.record_bytes(again) == 5000
    assert 10_000 / (after + 11_000) <= 100.0  # both answers, over the time they took and a window


def test_a_share_fetch_counts_against_the_consumer_quota_and_keeps_its_acquired_records() -> None:
    table: Quotas = {(("user", None),): {"consumer_byte_rate": 100.0}}
    quotas = ClientQuotas(lambda: table)
    big = _fetch_answer(b"r" * 5000)  # a ShareFetch answer's records are read the same way
    answer, throttle_ms = throttling.throttle(quotas, SHARE_FETCH, "alice", "c", 50, big, 0.0, 0)
    assert throttle_ms > 0 and throttling.record_bytes(answer) == 5000  # acquired: never emptied
    assert quotas.over("consumer_byte_rate", "alice", "c", 1) > 0  # counted: the next is throttled too
    _, again = throttling.throttle(quotas, SHARE_FETCH, "alice", "c", 50, _fetch_answer(b"r"), 0.0, 1)
    assert again > 0
    assert throttling.throttle(quotas, SHARE_FETCH, "bob", "c", 50, _fetch_answer(b"r"), 0.0, 1)[1] == 0


def test_a_produce_counts_its_request_bytes_and_old_versions_are_held_back() -> None:
    table: Quotas = {(("user", None),): {"producer_byte_rate": 1000.0}}
    quotas = ClientQuotas(lambda: table)
    answer = wire.build(wire.response_class(PRODUCE, 9), responses=(), throttle_time=wire.NO_THROTTLE)
    _, throttle_ms = throttling.throttle(quotas, PRODUCE, "alice", "p", 50_000, answer, 0.0, 0)
    assert throttle_ms > 0
    _, other = throttling.throttle(quotas, PRODUCE, "bob", "p", 100, answer, 0.0, 0)
    assert other == 0  # the default user's quota meters each user alone
    assert throttling.client_waits(PRODUCE, 9) and not throttling.client_waits(PRODUCE, 5)
    assert throttling.client_waits(FETCH, 8) and not throttling.client_waits(FETCH, 7)
    assert throttling.throttle(quotas, 18, "alice", "p", 10**9, answer, 100.0, 0)[1] == 0  # ApiVersions
