"""The fast record renderer writes exactly what ``json.dumps`` of ``render_record``'s rows gives, for any
records (null keys and values, headers with any names, both timestamp types) in both flavours."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from api.rendering import records_json
from api.schemas import Flavour, render_record
from raftlog.storage.batch import Record, TimestampType

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
