"""The connector's decisions without a Spark session: options, offsets JSON, range splitting, rate limits,
Arrow batches, producer ids, and reading a range (data loss) straight from a real cluster."""

from __future__ import annotations

import json
import pickle
import socket
import time

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from spark_cluster import SparkTestCluster

from raftlog.storage.batch import Compression, ProducerRecord, RecordBatch
from raftlog.storage.batch_reads import decode_batch, split_batches
from raftlog.storage.partitioner import partition_for_key
from raftlog_client.blocking import BlockingClient, Page
from raftlog_client.errors import OffsetOutOfRange, RequestFailed, Unavailable
from raftlog_spark import spark_kafka
from raftlog_spark.arrow import ARROW_SCHEMA, LOG_APPEND_TIME, record_batch
from raftlog_spark.errors import BadRow, DataLoss, OptionError, SchemaError
from raftlog_spark.offsets import (
    EARLIEST,
    LATEST,
    Bounds,
    OffsetRange,
    at_timestamps,
    from_json,
    ranges,
    rate_limit,
    resolve,
    split,
    timestamps_for,
    to_json,
)
from raftlog_spark.options import parse_read_options, parse_write_options
from raftlog_spark.reader import BatchReader, StreamReader, read_range
from raftlog_spark.writer import TaskWriter, _Topic, check_schema, producer_id

SERVERS = "http://127.0.0.1:1, http://127.0.0.1:2/"


def options(**values: str) -> CaseInsensitiveDict:
    return CaseInsensitiveDict(values)  # what Spark passes: case-insensitive names, string values


# -- options -------------------------------------------------------------------------------------------


def test_read_options_follow_kafka_names_and_defaults() -> None:
    parsed = parse_read_options(options(SERVERS=SERVERS, subscribe="a, b"), streaming=False)
    assert parsed.servers == ("http://127.0.0.1:1", "http://127.0.0.1:2")
    assert parsed.topics == {"a": None, "b": None}
    assert (parsed.starting, parsed.ending) == (EARLIEST, LATEST)
    assert parsed.fail_on_data_loss and parsed.fetch_format == "columnar"
    streaming = parse_read_options(options(servers=SERVERS, assign='{"a": [1, 0]}'), streaming=True)
    assert streaming.topics == {"a": (0, 1)} and streaming.starting == LATEST
    explicit = parse_read_options(
        options(servers=SERVERS, subscribe="a", startingOffsets='{"a": {"0": 5, "1": -2}}'), streaming=False
    )
    assert explicit.starting == {("a", 0): 5, ("a", 1): EARLIEST}
    assert (explicit.starting_timestamps, explicit.starting_none_late_enough) == (None, "error")
    by_time = parse_read_options(
        options(
            servers=SERVERS,
            subscribe="a",
            startingOffsets="latest",  # startingTimestamp wins, as in Spark
            startingTimestamp=" 1000 ",
            startingOffsetsByTimestamp='{"a": {"0": 5}}',
            endingOffsetsByTimestamp='{"a": {"1": 2000}}',
            startingOffsetsByTimestampStrategy="LATEST",
        ),
        streaming=False,
    )
    assert (by_time.starting_timestamps, by_time.starting_timestamps_option) == (1000, "startingTimestamp")
    assert by_time.ending_timestamps == {("a", 1): 2000}
    assert by_time.ending_timestamps_option == "endingOffsetsByTimestamp"
    assert by_time.starting_none_late_enough == "latest"


@pytest.mark.parametrize(
    ("given", "streaming", "option"),
    [
        ({"subscribe": "a"}, False, "servers"),
        ({"servers": "localhost:8081", "subscribe": "a"}, False, "servers"),
        ({"servers": SERVERS}, False, "subscribe"),
        ({"servers": SERVERS, "subscribe": "a", "assign": '{"a": [0]}'}, False, "subscribe"),
        ({"servers": SERVERS, "subscribePattern": "a.*"}, False, "subscribePattern"),
        ({"servers": SERVERS, "assign": "[0]"}, False, "assign"),
        ({"servers": SERVERS, "assign": '{"a": [-1]}'}, False, "assign"),
        ({"servers": SERVERS, "subscribe": "a", "startingOffsets": "latest"}, False, "startingOffsets"),
        ({"servers": SERVERS, "subscribe": "a", "startingOffsets": "soon"}, False, "startingOffsets"),
        (
            {"servers": SERVERS, "subscribe": "a", "startingOffsets": '{"b": {"0": 1}}'},
            False,
            "startingOffsets",
        ),
        (
            {"servers": SERVERS, "subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'},
            False,
            "startingOffsets",
        ),
        ({"servers": SERVERS, "subscribe": "a", "endingOffsets": "earliest"}, False, "endingOffsets"),
        ({"servers": SERVERS, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "endingOffsets"),
        ({"servers": SERVERS, "subscribe": "a", "endingOffsets": "latest"}, True, "endingOffsets"),
        ({"servers": SERVERS, "subscribe": "a", "maxOffsetsPerTrigger": "10"}, False, "maxOffsetsPerTrigger"),
        ({"servers": SERVERS, "subscribe": "a", "maxOffsetsPerTrigger": "ten"}, True, "maxOffsetsPerTrigger"),
        ({"servers": SERVERS, "subscribe": "a", "minPartitions": "0"}, False, "minPartitions"),
        ({"servers": SERVERS, "subscribe": "a", "failOnDataLoss": "yes"}, False, "failOnDataLoss"),
        ({"servers": SERVERS, "subscribe": "a", "fetchFormat": "avro"}, False, "fetchFormat"),
        ({"servers": SERVERS, "subscribe": "a", "startingTimestamp": "soon"}, False, "startingTimestamp"),
        ({"servers": SERVERS, "subscribe": "a", "startingTimestamp": "-1"}, True, "startingTimestamp"),
        (
            {"servers": SERVERS, "subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": -2}}'},
            False,
            "startingOffsetsByTimestamp",
        ),
        (
            {"servers": SERVERS, "subscribe": "a", "startingOffsetsByTimestamp": '{"b": {"0": 1}}'},
            True,
            "startingOffsetsByTimestamp",
        ),
        (
            {"servers": SERVERS, "subscribe": "a", "startingOffsetsByTimestamp": "1000"},
            False,
            "startingOffsetsByTimestamp",
        ),
        ({"servers": SERVERS, "subscribe": "a", "endingTimestamp": "1000"}, True, "endingTimestamp"),
        (
            {"servers": SERVERS, "subscribe": "a", "endingOffsetsByTimestamp": '{"a": {"0": 1}}'},
            True,
            "endingOffsetsByTimestamp",
        ),
        (
            {"servers": SERVERS, "subscribe": "a", "startingTimestamp": "2000", "endingTimestamp": "1000"},
            False,
            "endingTimestamp",
        ),
        (
            {"servers": SERVERS, "subscribe": "a", "startingOffsetsByTimestampStrategy": "earliest"},
            True,
            "startingOffsetsByTimestampStrategy",
        ),
        ({"servers": SERVERS, "subscribe": "a", "groupIdPrefix": "x"}, True, "groupIdPrefix"),
        ({"servers": SERVERS, "subscribe": "a", "startingOffset": "earliest"}, False, "startingoffset"),
        (
            {"servers": SERVERS, "subscribe": "a", "kafka.bootstrap.servers": "h:9092"},
            True,
            "kafka.bootstrap.servers",
        ),
        ({"servers": SERVERS, "subscribe": "a", "includeHeaders": "false"}, False, "includeHeaders"),
        ({"servers": SERVERS, "subscribe": "a", "minOffsetsPerTrigger": "5"}, False, "minOffsetsPerTrigger"),
        ({"servers": SERVERS, "subscribe": "a", "maxTriggerDelay": "5s"}, False, "maxTriggerDelay"),
        ({"servers": SERVERS, "subscribe": "a", "maxTriggerDelay": "soon"}, True, "maxTriggerDelay"),
        (
            {"servers": SERVERS, "subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            True,
            "minOffsetsPerTrigger",
        ),
    ],
)
def test_a_bad_read_option_is_named(given: dict[str, str], streaming: bool, option: str) -> None:
    with pytest.raises(OptionError) as raised:
        parse_read_options(options(**given), streaming)
    assert raised.value.option == option and f"'{option}'" in str(raised.value)


def test_trigger_delays_parse_as_spark_time_strings() -> None:
    given = options(servers=SERVERS, subscribe="a", minOffsetsPerTrigger="100")
    assert parse_read_options(given, streaming=True).max_trigger_delay_ms == 15 * 60 * 1000
    for text, ms in (("30s", 30_000), ("2m", 120_000), ("1h", 3_600_000), ("250ms", 250), ("40", 40)):
        parsed = parse_read_options({**given, "maxTriggerDelay": text}, streaming=True)
        assert (parsed.min_offsets_per_trigger, parsed.max_trigger_delay_ms) == (100, ms)


def test_write_options_and_the_sink_schema() -> None:
    parsed = parse_write_options(options(servers=SERVERS, topic=" out ", batchRecords="10"))
    assert (parsed.topic, parsed.batch_records) == ("out", 10)
    with pytest.raises(
        OptionError, match="'startingoffsets': not an option of the raftlog format for writing"
    ):
        parse_write_options(options(servers=SERVERS, startingOffsets="earliest"))
    assert parse_write_options(options(servers=SERVERS, checkpointLocation="/tmp/c")).topic is None
    with pytest.raises(OptionError, match="'batchRecords'"):
        parse_write_options(options(servers=SERVERS, batchRecords="20000"))
    assert parsed.compression is Compression.NONE
    assert parse_write_options(options(servers=SERVERS, compression=" ZSTD ")).compression is Compression.ZSTD
    with pytest.raises(
        OptionError, match="'compression': 'brotli': use one of none, gzip, snappy, lz4, zstd"
    ):
        parse_write_options(options(servers=SERVERS, compression="brotli"))
    with pytest.raises(OptionError, match=r"'kafka\.compression\.type': use the option 'compression'"):
        parse_write_options(options(servers=SERVERS, **{"kafka.compression.type": "lz4"}))
    value = StructField("value", StringType())
    check_schema(StructType([value]), parsed)
    no_topic = parse_write_options(options(servers=SERVERS))
    with pytest.raises(SchemaError, match="option 'topic'"):
        check_schema(StructType([value]), no_topic)
    with pytest.raises(SchemaError, match="'value' column"):
        check_schema(StructType([StructField("key", StringType())]), parsed)
    with pytest.raises(SchemaError, match="column 'value' must be string or binary"):
        check_schema(StructType([StructField("value", IntegerType())]), parsed)
    with pytest.raises(SchemaError, match="column 'partition'"):
        check_schema(StructType([value, StructField("partition", StringType())]), parsed)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    for stamp in (TimestampType(), LongType()):
        check_schema(
            StructType([value, StructField("headers", ArrayType(header)), StructField("timestamp", stamp)]),
            parsed,
        )
    with pytest.raises(SchemaError, match="column 'timestamp' must be a timestamp or a long"):
        check_schema(StructType([value, StructField("timestamp", DoubleType())]), parsed)
    numeric = StructType([StructField("key", StringType()), StructField("value", IntegerType())])
    with pytest.raises(SchemaError, match="column 'headers' must be array<struct<key: string"):
        check_schema(StructType([value, StructField("headers", ArrayType(numeric))]), parsed)


HTTPS = "https://127.0.0.1:1,https://127.0.0.1:2"


def test_a_secured_cluster_is_reached_with_a_ca_and_a_user_or_a_token() -> None:
    """``ca`` for https servers, and a user's password or API token: parsed alike for reads and writes,
    and the secrets never printed with the options."""
    read = parse_read_options(
        options(servers=HTTPS, subscribe="a", ca=" /etc/ca.pem ", user="alice", password="s3 cret"), False
    )
    assert read.servers == ("https://127.0.0.1:1", "https://127.0.0.1:2")
    assert (read.access.ca, read.access.user, read.access.user_token) == (
        "/etc/ca.pem",
        ("alice", "s3 cret"),
        None,
    )
    assert "s3 cret" not in repr(read)
    write = parse_write_options(options(servers=HTTPS, userToken="rlt_abc_def"))
    assert (write.access.ca, write.access.user, write.access.user_token) == (None, None, "rlt_abc_def")
    assert "rlt_abc_def" not in repr(write)
    assert (
        parse_write_options(options(servers=SERVERS)).access
        == parse_read_options(options(servers=SERVERS, subscribe="a"), False).access
    )


@pytest.mark.parametrize(
    ("given", "option", "words"),
    [
        ({"servers": "ftp://h:1"}, "servers", "is not an http(s)://HOST:PORT base URL"),
        ({"servers": SERVERS, "ca": "/etc/ca.pem"}, "ca", "only for https:// servers"),
        ({"servers": HTTPS, "ca": " "}, "ca", "empty"),
        ({"servers": HTTPS, "user": "alice"}, "user", "'user' and 'password' go together"),
        ({"servers": HTTPS, "password": "p"}, "password", "'user' and 'password' go together"),
        ({"servers": HTTPS, "user": " ", "password": "p"}, "user", "empty"),
        ({"servers": HTTPS, "user": "a", "password": "p", "userToken": "rlt_x"}, "userToken", "not both"),
        ({"servers": HTTPS, "userToken": ""}, "userToken", "empty"),
    ],
)
def test_a_bad_access_option_is_named(given: dict[str, str], option: str, words: str) -> None:
    for parse in (lambda o: parse_read_options({**o, "subscribe": "a"}, False), parse_write_options):
        with pytest.raises(OptionError) as raised:
            parse(options(**given))
        assert raised.value.option == option and words in str(raised.value)


# -- offsets -------------------------------------------------------------------------------------------


def test_offsets_json_is_sorted_so_equal_offsets_are_equal_text() -> None:
    offsets = {("b", 10): 1, ("a", 2): 5, ("b", 2): 3}
    assert json.dumps(to_json(offsets)) == '{"a": {"2": 5}, "b": {"2": 3, "10": 1}}'
    assert from_json(json.loads(json.dumps(to_json(offsets)))) == offsets


def test_resolve_sentinels_and_defaults() -> None:
    bounds = {("t", 0): Bounds(3, 10), ("t", 1): Bounds(0, 4)}
    assert resolve(EARLIEST, bounds, LATEST) == {("t", 0): 3, ("t", 1): 0}
    assert resolve({("t", 0): LATEST}, bounds, EARLIEST) == {("t", 0): 10, ("t", 1): 0}
    assert resolve({("t", 1): 2}, bounds, LATEST) == {("t", 0): 10, ("t", 1): 2}


def test_offsets_at_timestamps_take_the_end_or_fail_when_no_record_is_that_late() -> None:
    bounds = {("t", 0): Bounds(0, 10), ("t", 1): Bounds(4, 7)}
    assert timestamps_for(500, bounds.keys(), "startingTimestamp") == {("t", 0): 500, ("t", 1): 500}
    named = "startingOffsetsByTimestamp"
    assert timestamps_for({("t", 1): 9}, bounds.keys(), named) == {("t", 1): 9}
    with pytest.raises(OptionError, match=f"'{named}': t-5, u-0: no such partition"):
        timestamps_for({("t", 1): 9, ("t", 5): 1, ("u", 0): 1}, bounds.keys(), named)
    found = {("t", 0): 3, ("t", 1): None}
    timestamps = {("t", 0): 500, ("t", 1): 500}
    assert at_timestamps(timestamps, found, bounds, "endingTimestamp", "latest") == {("t", 0): 3, ("t", 1): 7}
    with pytest.raises(OptionError, match="no record of t-1 has a timestamp at or after 500") as raised:
        at_timestamps(timestamps, found, bounds, "startingTimestamp", "error")
    assert raised.value.option == "startingTimestamp"
    assert "startingOffsetsByTimestampStrategy=latest" in str(raised.value)


@given(
    st.lists(st.integers(0, 500), min_size=1, max_size=5),
    st.integers(1, 40),
)
def test_split_covers_every_offset_once(sizes: list[int], min_partitions: int) -> None:
    parts = ranges({}, {("t", p): n for p, n in enumerate(sizes)})
    pieces = split(parts, min_partitions)
    covered = sorted((r.partition, o) for r in pieces for o in range(r.start, r.end))
    assert covered == [(p, o) for p, n in enumerate(sizes) for o in range(n)]
    if sum(sizes) >= min_partitions:
        assert len(pieces) >= min(min_partitions, sum(sizes))


def test_rate_limit_is_proportional_and_starves_no_partition() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 100, ("t", 1): 50, ("t", 2): 1}  # partition 2 is new: it starts at 0
    limited = rate_limit(start, latest, 30)
    assert limited == {("t", 0): 19, ("t", 1): 9, ("t", 2): 1}
    assert rate_limit(start, latest, 1000) == latest


@given(
    st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 50), st.integers(0, 50))), st.integers(1, 60)
)
def test_rate_limit_never_goes_back_nor_past_the_end(
    spans: dict[int, tuple[int, int]], max_rows: int
) -> None:
    start = {("t", p): min(a, b) for p, (a, b) in spans.items()}
    latest = {("t", p): max(a, b) for p, (a, b) in spans.items()}
    limited = rate_limit(start, latest, max_rows)
    assert all(start[tp] <= limited[tp] <= latest[tp] for tp in latest)
    waiting = sum(latest[tp] - start[tp] for tp in latest)
    if waiting <= max_rows:
        assert limited == latest


# -- Arrow ---------------------------------------------------------------------------------------------


def test_record_batch_matches_the_spark_schema_exactly() -> None:
    page = Page(
        [7, 8, 9],
        [1000, 2000, 3000],
        [None, b"k", b""],
        [b"a", b"", b"c"],
        [[], [("h", b"x")], []],
        [0, 0, 0],
    )
    batch = record_batch("t", 2, page, 2)
    assert batch.schema == ARROW_SCHEMA and batch.num_rows == 2
    assert batch.column("key").to_pylist() == [None, b"k"]
    assert batch.column("offset").to_pylist() == [7, 8]
    assert batch.column("partition").type == pa.int32() and batch.column("topic").to_pylist() == ["t", "t"]
    assert batch.column("timestamp").type == pa.timestamp("us", tz="UTC")
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [1_000_000, 2_000_000]
    assert batch.column("headers").to_pylist() == [[], [{"key": "h", "value": b"x"}]]
    assert batch.column("timestampType").to_pylist() == [0, 0]
    plain = record_batch("t", 0, Page([1], [5], [None], [b"v"], [[]], [0]), 1)
    assert plain.column("headers").to_pylist() == [[]]


def test_record_batch_keeps_nulls_and_timestamp_types() -> None:
    """Tombstones (null values), keyless records and header values that are null stay null; each row
    says whether its timestamp is the producer's (0) or the leader's append time (1)."""
    page = Page(
        [0, 1, 2],
        [10, 20, 30],
        [b"k", None, None],
        [None, b"v", None],
        [[("a", None), ("b", b"")], [], [("c", b"x")]],
        [0, LOG_APPEND_TIME, 0],
    )
    batch = record_batch("t", 0, page, 3)
    assert batch.schema == ARROW_SCHEMA
    assert [f.name for f in ARROW_SCHEMA].index("timestampType") == 6  # Spark's Kafka order
    assert batch.column("value").to_pylist() == [None, b"v", None]
    assert batch.column("key").to_pylist() == [b"k", None, None]
    assert batch.column("headers").to_pylist() == [
        [{"key": "a", "value": None}, {"key": "b", "value": b""}],
        [],
        [{"key": "c", "value": b"x"}],
    ]
    assert batch.column("timestampType").to_pylist() == [0, 1, 0]
    appended = record_batch("t", 0, Page([5, 6], [1, 2], [None, None], [b"", b""], [[], []], [1, 1]), 1)
    assert appended.column("timestampType").to_pylist() == [LOG_APPEND_TIME]


def test_sink_records_carry_tombstones_null_header_values_and_timestamps() -> None:
    """The records one task builds from Arrow rows, and the partitions it puts them in, before anything
    is sent: a keyed row by Kafka's murmur2, a keyless one on the topic's sticky partition."""
    writer = TaskWriter(parse_write_options(options(servers=SERVERS, topic="t")), producer=7)
    writer.topics["t"] = _Topic(partitions=3, sticky=1)  # as the topic's partition count sets it up
    micros = pa.array([1_500, None, 7_000_999], pa.timestamp("us", tz="UTC"))
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([None, b"v", b"w"]),
            pa.array(["k", None, None]),
            pa.array([[{"key": "h", "value": None}], None, []], header_type),
            micros,
            pa.array(["ignored", "ignored", "ignored"]),
        ],
        names=["value", "key", "headers", "timestamp", "other"],
    )
    unused = BlockingClient(["http://127.0.0.1:1"], 100)  # nothing is sent below batchRecords
    writer._add(unused, batch)
    keyed = partition_for_key(b"k", 3)
    assert keyed == 2  # murmur2, as Kafka's producer places it
    assert writer.pending[("t", keyed)].records[-1] == ProducerRecord(None, b"k", (("h", None),), 1)
    assert writer.pending[("t", 1)].records[-2:] == [
        ProducerRecord(b"v", None, (), None),  # no timestamp: the task's clock when the batch is encoded
        ProducerRecord(b"w", None, (), 7000),
    ]
    longs = pa.RecordBatch.from_arrays(
        [pa.array([b"v"]), pa.array([42], pa.int64()), pa.array([0], pa.int32())],
        ["value", "timestamp", "partition"],
    )
    writer._add(unused, longs)
    assert writer.pending[("t", 0)].records == [ProducerRecord(b"v", None, (), 42)]
    before_1970 = pa.RecordBatch.from_arrays([pa.array([b"v"]), pa.array([-1])], ["value", "timestamp"])
    with pytest.raises(BadRow, match="timestamp -1 ms, before 1970"):
        writer._add(unused, before_1970)
    beyond = pa.RecordBatch.from_arrays([pa.array([b"v"]), pa.array([3], pa.int32())], ["value", "partition"])
    with pytest.raises(BadRow, match="partition 3: topic 't' has partitions 0 to 2"):
        writer._add(unused, beyond)


# -- the sink's producer ids ---------------------------------------------------------------------------


def test_producer_ids_are_stable_and_63_bit() -> None:
    first = producer_id("stream", "query-uuid", 12, 3)
    assert first == producer_id("stream", "query-uuid", 12, 3)  # the same in every process
    assert first != producer_id("stream", "query-uuid", 12, 4) and 0 <= first < 2**63
    assert first != producer_id("stream", "query-uuid", 13, 3)  # each micro-batch its own producer


# -- the sink without Spark, against the real cluster ---------------------------------------------------


def stored_batches(cluster: SparkTestCluster, topic: str, partition: int) -> list[RecordBatch]:
    """A partition's batches as stored (Kafka RecordBatch v2), decoded."""
    with cluster.client() as client:
        answer = client.request(
            "GET",
            f"/topics/{topic}/partitions/{partition}/records?offset=0&max_bytes=67108864",
            headers={"Accept": "application/vnd.raftlog.batch.v2"},
        )
    return [decode_batch(batch) for batch in split_batches(answer.body)]


def rows(values: list[bytes], keys: list[bytes | None]) -> list[pa.RecordBatch]:
    return [pa.RecordBatch.from_arrays([pa.array(values), pa.array(keys, pa.binary())], ["value", "key"])]


def test_a_task_sends_kafka_batches_with_sequences_and_a_retry_appends_nothing(
    raftlog_cluster: SparkTestCluster,
) -> None:
    """Each partition's rows travel as compressed Kafka batches carrying the task's producer id and
    Kafka's base sequences (records sent to that partition before); the same task run again (a Spark
    task retry) is recognised batch by batch and appends nothing."""
    topic = raftlog_cluster.create_topic(3)
    values = [b"v%03d" % i for i in range(90)]
    keys: list[bytes | None] = [None if i % 3 == 0 else b"k%d" % (i % 7) for i in range(90)]
    given = parse_write_options(
        options(servers=raftlog_cluster.servers, topic=topic, batchRecords="8", compression="lz4")
    )
    first = TaskWriter(given, producer=producer_id("test", topic)).write(iter(rows(values, keys)))
    again = TaskWriter(given, producer=producer_id("test", topic)).write(iter(rows(values, keys)))
    assert first.records == again.records == 90

    stored: dict[int, list[bytes]] = {}
    for partition in range(3):
        sequence = 0
        for batch in stored_batches(raftlog_cluster, topic, partition):
            header = batch.header
            assert header.producer_id == producer_id("test", topic)
            assert header.sequence == sequence  # Kafka's rule: the records sent to it before
            assert header.compression is Compression.LZ4 and header.record_count <= 8
            sequence += header.record_count
            stored.setdefault(partition, []).extend(r.value for r in batch.records)
    assert sorted(v for part in stored.values() for v in part) == values  # each row once
    for written in stored.values():  # in row order within a partition
        assert written == sorted(written)
    for i, key in enumerate(keys):
        if key is not None:
            assert values[i] in stored[partition_for_key(key, 3)]
    assert len(stored) == 3  # keyless rows move on from partition to partition, as Kafka's sticky rule


def test_a_batch_above_max_message_bytes_is_split_and_still_written_once(
    raftlog_cluster: SparkTestCluster,
) -> None:
    topic = raftlog_cluster.create_topic(1, **{"max.message.bytes": "4096"})
    values = [b"%04d" % i + b"x" * 300 for i in range(40)]  # 12 KB: three times what one batch may hold
    given = parse_write_options(options(servers=raftlog_cluster.servers, topic=topic, batchBytes="1048576"))
    for _ in range(2):  # the second run is a task retry: the halves are recognised too
        TaskWriter(given, producer=producer_id("split", topic)).write(iter(rows(values, [None] * 40)))
    batches = stored_batches(raftlog_cluster, topic, 0)
    assert len(batches) > 1
    assert [r.value for b in batches for r in b.records] == values
    one = [b"y" * 5000]
    with pytest.raises(BadRow, match="41301"):  # one record alone is too large: the row fails, clearly
        TaskWriter(given, producer=producer_id("huge", topic)).write(iter(rows(one, [None])))


# -- readers without Spark, against the real cluster ---------------------------------------------------


def test_readers_pickle_and_plan_ranges(raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(2)
    raftlog_cluster.produce(topic, 0, ["a"] * 100)
    raftlog_cluster.produce(topic, 1, ["b"] * 50)
    given = options(servers=raftlog_cluster.servers, subscribe=topic, maxOffsetsPerTrigger="30")
    stream = pickle.loads(pickle.dumps(StreamReader(given)))
    assert stream.getDefaultReadLimit() == ReadMaxRows(30)
    start = {topic: {"0": 0}}
    end = stream.latestOffset(start, ReadMaxRows(30))
    assert end == {topic: {"0": 20, "1": 10}}
    assert stream.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 100, "1": 50}}
    assert [(p.partition, p.start, p.end) for p in stream.partitions(start, end)] == [(0, 0, 20), (1, 0, 10)]
    stream.prepareForTriggerAvailableNow()
    raftlog_cluster.produce(topic, 0, ["late"] * 5)
    assert stream.latestOffset(end, ReadAllAvailable()) == {topic: {"0": 100, "1": 50}}
    # Starting by timestamp: no record is an hour ahead of the nodes' clocks, which fails the query
    # (Spark's default) or starts at the end; a partition the JSON does not name takes startingOffsets.
    later = str(int(time.time() * 1000) + 3_600_000)
    by_time = {"servers": raftlog_cluster.servers, "subscribe": topic}
    with pytest.raises(OptionError, match=f"no record of {topic}-0 has a timestamp at or after {later}"):
        BatchReader(options(**by_time, startingTimestamp=later)).partitions()
    at_end = StreamReader(
        options(**by_time, startingTimestamp=later, startingOffsetsByTimestampStrategy="latest")
    )
    assert at_end.initialOffset() == {topic: {"0": 105, "1": 50}}
    from_zero = StreamReader(options(**by_time, startingOffsetsByTimestamp=json.dumps({topic: {"1": 0}})))
    assert from_zero.initialOffset() == {topic: {"0": 105, "1": 0}}
    batch = BatchReader(options(servers=raftlog_cluster.servers, subscribe=topic, minPartitions="5"))
    parts = batch.partitions()
    assert sum(p.count for p in parts if isinstance(p, OffsetRange)) == 155 and len(parts) >= 5


def test_read_range_skips_or_refuses_deleted_offsets(raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(1, **{"internal.segment.bytes": 1024, "retention.bytes": 2048})
    raftlog_cluster.produce(topic, 0, [f"{i:040d}" for i in range(200)], chunk=10)
    raftlog_cluster.wait_for_log_start(topic, 0)
    log_start, _ = raftlog_cluster.bounds(topic, 0)
    strict = parse_read_options(options(servers=raftlog_cluster.servers, subscribe=topic), streaming=False)
    with pytest.raises(DataLoss, match=f"{topic}-0: offsets \\[0, {log_start}\\) were deleted"):
        list(read_range(strict, OffsetRange(topic, 0, 0, 200)))
    lenient = parse_read_options(
        options(
            servers=raftlog_cluster.servers, subscribe=topic, failOnDataLoss="false", fetchMaxBytes="100"
        ),
        streaming=False,
    )
    batches = list(read_range(lenient, OffsetRange(topic, 0, 0, 200)))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(log_start, 200)) and len(batches) > 1


def test_read_range_reads_a_compacted_partition_across_its_gaps(raftlog_cluster: SparkTestCluster) -> None:
    """Compaction removed records but no offset moved: a range over the gaps reads exactly the records
    kept, at their offsets, and is no data loss."""
    topic = raftlog_cluster.create_topic(
        1, **{"internal.segment.bytes": 1024, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01}
    )
    raftlog_cluster.produce(topic, 0, [f"{i:040d}" for i in range(200)], key="same", chunk=10)
    strict = parse_read_options(
        options(servers=raftlog_cluster.servers, subscribe=topic, fetchMaxBytes="100"), streaming=False
    )
    deadline = time.monotonic() + 60
    while True:  # until the cleaner has compacted the partition (every 200 ms here)
        batches = list(read_range(strict, OffsetRange(topic, 0, 0, 200)))
        offsets = [o for b in batches for o in b.column("offset").to_pylist()]
        if len(offsets) < 100:
            break
        assert time.monotonic() < deadline, "the partition was not compacted"
        time.sleep(0.2)
    values = [v.decode() for b in batches for v in b.column("value").to_pylist()]
    assert offsets == sorted(offsets) and offsets[-1] == 199 and len(offsets) < 100
    assert values == [f"{o:040d}" for o in offsets]  # each record at the offset it was written at


def test_a_stream_whose_partition_went_backwards_is_data_loss(raftlog_cluster: SparkTestCluster) -> None:
    topic = raftlog_cluster.create_topic(1)
    raftlog_cluster.produce(topic, 0, ["a"] * 5)
    checkpointed = {topic: {"0": 50}}  # as if the topic was deleted and created again since
    strict = StreamReader(options(servers=raftlog_cluster.servers, subscribe=topic))
    with pytest.raises(DataLoss, match=f"{topic}-0 ends at 5 < 50"):
        strict.latestOffset(checkpointed, ReadAllAvailable())
    lenient = StreamReader(options(servers=raftlog_cluster.servers, subscribe=topic, failOnDataLoss="false"))
    end = lenient.latestOffset(checkpointed, ReadAllAvailable())
    assert end == {topic: {"0": 5}} and lenient.partitions(checkpointed, end) == []


def test_fewer_records_than_min_offsets_per_trigger_wait_until_max_trigger_delay(
    raftlog_cluster: SparkTestCluster,
) -> None:
    topic = raftlog_cluster.create_topic(1)
    raftlog_cluster.produce(topic, 0, ["a"] * 3)
    reader = StreamReader(
        options(
            servers=raftlog_cluster.servers, subscribe=topic, minOffsetsPerTrigger="5", maxTriggerDelay="2s"
        )
    )
    start = {topic: {"0": 0}}
    first = reader.latestOffset(start, ReadAllAvailable())
    assert first == {topic: {"0": 3}}  # the first micro-batch is never delayed
    raftlog_cluster.produce(topic, 0, ["b"] * 2)
    assert reader.latestOffset(first, ReadAllAvailable()) == first  # 2 waiting < 5: no micro-batch
    raftlog_cluster.produce(topic, 0, ["c"] * 3)
    second = reader.latestOffset(first, ReadAllAvailable())
    assert second == {topic: {"0": 8}}  # 5 waiting: it goes
    raftlog_cluster.produce(topic, 0, ["d"])
    assert reader.latestOffset(second, ReadAllAvailable()) == second
    time.sleep(2.1)  # maxTriggerDelay since the last micro-batch: one record is enough
    assert reader.latestOffset(second, ReadAllAvailable()) == {topic: {"0": 9}}


def test_client_fails_over_retries_and_names_errors(raftlog_cluster: SparkTestCluster) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed again: nothing listens there
    topic = raftlog_cluster.create_topic(2)
    with BlockingClient([dead, raftlog_cluster.urls[1]], 5000) as client:
        assert client.partition_count(topic) == 2  # the dead server is skipped
    with (
        BlockingClient([dead], 300) as client,
        pytest.raises(Unavailable, match=r"no usable answer within 0\.3 s"),
    ):
        client.partition_count(topic)
    with BlockingClient(raftlog_cluster.urls, 5000) as client:
        with pytest.raises(RequestFailed) as raised:
            client.partition_count("no-such-topic")
        assert (raised.value.status, raised.value.error_code) == (404, 40401)
        with pytest.raises(OffsetOutOfRange) as out_of_range:
            client.fetch_page(topic, 0, 99, 1024, 0, columnar=True)
        assert (out_of_range.value.log_start_offset, out_of_range.value.end_offset) == (0, 0)


def test_read_range_waits_for_planned_offsets_then_calls_it_data_loss(
    raftlog_cluster: SparkTestCluster,
) -> None:
    topic = raftlog_cluster.create_topic(1)
    raftlog_cluster.produce(topic, 0, [str(i) for i in range(5)])
    planned = OffsetRange(topic, 0, 0, 8)  # as if planned against offsets a recreated topic no longer has
    given = {"servers": raftlog_cluster.servers, "subscribe": topic, "requestTimeoutMs": "400"}
    strict = parse_read_options(options(**given), streaming=False)
    with pytest.raises(DataLoss, match=f"{topic}-0: no record at offset 5"):
        list(read_range(strict, planned))
    lenient = parse_read_options(options(**given, failOnDataLoss="false"), streaming=False)
    assert [o for b in read_range(lenient, planned) for o in b.column("offset").to_pylist()] == list(range(5))


def test_kafka_options_log_in_with_a_password_or_a_delegation_token() -> None:
    servers = "127.0.0.1:9092"
    plain = spark_kafka.options(servers)
    assert plain == {"kafka.bootstrap.servers": servers, "kafka.security.protocol": "PLAINTEXT"}
    as_user = spark_kafka.options(servers, ca="ca.pem", user="ann", password='p"w\\')
    assert as_user["kafka.security.protocol"] == "SASL_SSL"
    assert as_user["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert as_user["kafka.sasl.jaas.config"].endswith('username="ann" password="p\\"w\\\\";')
    token = spark_kafka.options(servers, user="tid", password="hmac", mechanism="SCRAM-SHA-256", token=True)
    assert token["kafka.sasl.jaas.config"].endswith('username="tid" password="hmac" tokenauth="true";')
    for wrong in ({"user": "tid", "password": "hmac", "mechanism": "PLAIN"}, {}):
        with pytest.raises(ValueError, match="delegation token logs in with SCRAM"):
            spark_kafka.options(servers, token=True, **wrong)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="come together"):
        spark_kafka.options(servers, user="ann")
