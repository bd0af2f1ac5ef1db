"""The fast record renderer writes exactly what ``json.dumps`` of ``render_record``'s rows gives, for any
records (null keys and values, headers with any names, both timestamp types) in both flavours."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from api.records import rows_by
from api.rendering import records_json, rows_of
from api.schemas import Flavour, render_record
from raftlog.storage.batch import (
    ProducerRecord,
    Record,
    TimestampType,
    encode_batch,
    encode_retained,
    with_log_append_time,
)
from raftlog.storage.batch_reads import decode_batch, records_from

maybe_bytes = (
    st.none() | st.binary(max_size=40) | st.sampled_from([b"null", b'{"a": [1, 2]}', b'"\xe2\x82\xac"'])
)
records = st.builds(
    Record,
    offset=st.integers(0, 2**63 - 1),
    timestamp_ms=st.integers(-1, 2**63 - 1),
    key=maybe_bytes,
    value=maybe_bytes,
    headers=st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3).map(tuple),
    timestamp_type=st.sampled_from(list(TimestampType)),
)
parts = st.lists(
    st.tuples(
        st.sampled_from(["t", "orders.v1", "a-b_c"]), st.integers(0, 1000), st.lists(records, max_size=5)
    ),
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(parts=parts, flavour=st.sampled_from(list(Flavour)))
def test_rendered_text_is_json_dumps_of_the_rows(
    parts: list[tuple[str, int, list[Record]]], flavour: Flavour
) -> None:
    rows = [render_record(topic, partition, r, flavour) for topic, partition, rs in parts for r in rs]
    assert records_json(parts, flavour) == json.dumps(rows).encode("utf-8")


produced = st.builds(
    ProducerRecord,
    value=maybe_bytes,
    key=maybe_bytes,
    headers=st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3).map(tuple),
    timestamp_ms=st.none() | st.integers(0, 2**40),
)


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(st.lists(produced, min_size=1, max_size=4), min_size=1, max_size=3),
    start=st.integers(0, 12),
    append_time=st.booleans(),
    flavour=st.sampled_from(list(Flavour)),
)
def test_a_fetch_answer_is_json_dumps_of_the_rows_of_its_records(
    batches: list[list[ProducerRecord]], start: int, append_time: bool, flavour: Flavour
) -> None:
    """The fetch path (stored batches read as the C reader's rows, a batch's rows written at once) gives
    the text of ``render_record``'s rows of the records the batches decode to, from any offset, in
    batches stamped LogAppendTime and in one compaction emptied of some records."""
    stored, base = [], 0
    for records in batches:
        batch = encode_batch(base, records, 1, 1_000)
        stored.append(with_log_append_time(batch, 5_000) if append_time else batch)
        base += len(records)
    first = decode_batch(stored[0])
    kept = [r for r in first.records if r.offset % 2 == 0]  # compaction kept every other record
    stored[0] = encode_retained(
        stored[0], first.header, kept, first.header.base_offset, first.header.end_offset
    )
    data = b"".join(stored)
    offset = min(start, base - 1)
    expected = json.dumps([render_record("t", 3, r, flavour) for r in records_from(data, offset)])
    assert _answer("t", 3, data, offset, flavour) == expected.encode()


def _answer(topic: str, partition: int, data: bytes, offset: int, flavour: Flavour) -> bytes:
    """The answer ``api.answers.json_array`` writes of the rows."""
    texts = [b"".join(parts) for parts in rows_of(topic, partition, rows_by(data, offset), flavour) if parts]
    return b"[" + b", ".join(texts) + b"]"
