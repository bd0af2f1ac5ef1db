"""The pure parts of the API: partition choice, forwarding decisions, body parsing and rendering, metrics."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from api.errors import BadRequest, UnsupportedMediaType
from api.metrics import HttpMetrics
from api.routing import (
    RoundRobin,
    assign_partitions,
    group_by_partition,
    keyless_partition,
)
from api.schemas import (
    BINARY_V2,
    Flavour,
    ParsedRecord,
    dump_json,
    parse_produce,
    query_int,
    record_flavour,
    render_record,
    request_flavour,
)
from raftlog.storage.batch import Record
from raftlog.storage.errors import InvalidRecord
from raftlog.storage.partitioner import partition_for_key
from raftlog_contract import JSON_V2, PLAIN_JSON


def record(key: bytes | None = None, partition: int | None = None) -> ParsedRecord:
    return ParsedRecord(key, b"v", (), partition)


def test_explicit_partition_wins_then_key_hash_then_the_keyless_choice() -> None:
    records = [record(b"a", 2), record(b"user-1"), record(), record(None, 0), record()]
    assigned = assign_partitions(records, 3, keyless=1)
    assert assigned == [2, partition_for_key(b"user-1", 3), 1, 0, 1]
    groups = group_by_partition([2, 0, 1, 0, 2])
    assert groups == {2: [0, 4], 0: [1, 3], 1: [2]}
    assert list(groups) == [2, 0, 1]  # partitions in first-seen order, indexes in request order


def test_keyless_partition_is_derived_from_the_producer_pair_so_retries_land_alike() -> None:
    rotation = RoundRobin()
    assert [keyless_partition(3, None, None, rotation) for _ in range(4)] == [0, 1, 2, 0]
    assert keyless_partition(4, 10, 3, rotation) == keyless_partition(4, 10, 3, RoundRobin(99)) == 1


def test_content_negotiation() -> None:
    assert request_flavour("application/json") is Flavour.JSON
    assert request_flavour("Application/Vnd.Kafka.Binary.V2+json") is Flavour.BINARY
    with pytest.raises(UnsupportedMediaType):
        request_flavour("application/vnd.kafka.avro.v2+json")
    assert record_flavour(JSON_V2) is record_flavour(PLAIN_JSON) is Flavour.JSON
    assert record_flavour(BINARY_V2) is Flavour.BINARY


def test_query_integers_are_checked() -> None:
    assert query_int({"a": "5"}, "a", None, 0, 10) == 5
    assert query_int({}, "a", 7, 0, 10) == 7
    for bad in ("11", "-1", "", "1.0", "0x1"):
        with pytest.raises(BadRequest, match="query parameter a"):
            query_int({"a": bad}, "a", None, 0, 10)


def test_produce_rejects_bad_base64_as_an_invalid_record() -> None:
    with pytest.raises(InvalidRecord, match=r"records\[0\].key"):
        parse_produce({"records": [{"key": "!!", "value": ""}]}, Flavour.BINARY)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)  # fmt: skip


@given(
    key=json_values,
    value=json_values,
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.text(max_size=5)), max_size=3),
    timestamp=st.none() | st.integers(0, 2**63 - 1),
)
def test_json_flavour_round_trips(
    key: Any, value: Any, headers: list[tuple[str, str | None]], timestamp: int | None
) -> None:
    record: dict[str, Any] = {
        "key": key,
        "value": value,
        "headers": [{"key": k, "value": v} for k, v in headers],
    }
    if timestamp is not None:
        record["timestamp"] = timestamp
    parsed = parse_produce({"records": [record]}, Flavour.JSON).records[0]
    assert parsed.timestamp_ms == timestamp
    stored = Record(0, 1, parsed.key, parsed.value, parsed.headers)
    rendered = render_record("t", 0, stored, Flavour.JSON)
    assert rendered["format"] == "json"
    assert rendered["value"] == value and rendered["key"] == key  # null: no key, or no value (a tombstone)
    assert rendered["headers"] == [{"key": k, "value": v} for k, v in headers]
    assert parsed.value == (None if value is None else dump_json(value))
    assert parsed.key == (None if key is None else dump_json(key))


def test_a_stored_json_null_text_is_rendered_binary_so_null_always_means_absent() -> None:
    """The 4 bytes ``null`` (a binary produce or a Kafka client can store them) are not a tombstone."""
    rendered = render_record("t", 0, Record(0, 1, b"null", b"null", (("h", None),)), Flavour.JSON)
    assert (rendered["format"], rendered["key"], rendered["value"]) == ("binary", "bnVsbA==", "bnVsbA==")
    assert rendered["headers"] == [{"key": "h", "value": None}]
    tombstone = render_record("t", 0, Record(0, 1, b'"k"', None), Flavour.JSON)
    assert (tombstone["format"], tombstone["key"], tombstone["value"]) == ("json", "k", None)


def test_produced_timestamps_are_checked() -> None:
    for bad, words in (
        (-1, "outside"),
        ("5", "must be an integer"),
        (True, "must be an integer"),
        (2**63, "outside"),
    ):
        with pytest.raises(BadRequest, match=rf"records\[0\].timestamp: .*{words}"):
            parse_produce({"records": [{"value": 1, "timestamp": bad}]}, Flavour.JSON)


@given(
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=50),
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
)
def test_binary_flavour_round_trips_any_bytes(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]
) -> None:
    stored = Record(3, 1, key, value, tuple(headers))
    rendered = render_record("t", 0, stored, Flavour.BINARY)
    body = {"records": [{k: rendered[k] for k in ("key", "value", "headers")}]}
    parsed = parse_produce(body, Flavour.BINARY).records[0]
    assert (parsed.key, parsed.value, parsed.headers) == (key, value, tuple(headers))
    fallback = render_record("t", 0, stored, Flavour.JSON)
    if fallback["format"] == "binary":
        assert fallback["value"] is None if value is None else base64.b64decode(fallback["value"]) == value


def test_metric_families_are_typed_and_histograms_cumulative() -> None:
    metrics = HttpMetrics()
    metrics.observe("GET", "/topics", 200, 0.0015)
    metrics.observe("GET", "/topics", 404, 100.0)
    node = {"produce_requests": 3, 'consumer_group_lag{group="g",topic="t",partition="0"}': 2, "mystery": 1}
    families = {f.name: f for f in text_string_to_metric_families(metrics.render(node).decode())}
    produced = families["raftlog_produce_requests"]
    assert (produced.type, produced.samples[0].name) == ("counter", "raftlog_produce_requests_total")
    lag = families["raftlog_consumer_group_lag"]
    assert lag.type == "gauge" and lag.samples[0].labels == {"group": "g", "topic": "t", "partition": "0"}
    assert families["raftlog_mystery"].type == "unknown"  # exported, and flagged as missing its entry
    buckets = {
        s.labels["le"]: s.value
        for s in families["raftlog_http_request_duration_seconds"].samples
        if s.name.endswith("_bucket")
    }
    assert (buckets["0.001"], buckets["0.002"], buckets["30.0"], buckets["+Inf"]) == (0, 1, 1, 2)
    requests = families["raftlog_http_requests"]
    assert {(s.labels["status"], s.value) for s in requests.samples} == {("200", 1), ("404", 1)}
    assert "raftlog_build_info" in families and "process_cpu_seconds" in families
