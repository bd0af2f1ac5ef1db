"""A JSON produce body becomes the same batches through orjson as through the standard library: the same
stored bytes for every key and value (so a key's partition stays where it was), and every refusal the
same error with the same text; what orjson would write differently (floats below 1e-4, integers past 64
bits, which it parses as floats) is written by the standard library."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.produce_encoding import encode_exactly, encode_fast, encode_json_produce
from api.schemas import Flavour
from raftlog.storage.batch_reads import decode_batch

NOW_MS = 1_700_000_000_000

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


def _outcome(encode: Any, body: bytes, flavour: Flavour, partition: int | None) -> Any:
    try:
        encoded = encode(body, flavour, partition, 4, 1, NOW_MS)
    except Exception as exc:  # the same refusal (a lone surrogate the JSON flavour cannot write: a 500)
        return type(exc), str(exc)
    return encoded


def _stored(body: bytes, flavour: Flavour) -> list[tuple[bytes | None, bytes | None]]:
    encoded = encode_json_produce(body, flavour, 0, 1, 0, NOW_MS)
    return [(r.key, r.value) for r in decode_batch(encoded.batches[0][1]).records]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries({"value": json_values}, optional={"key": json_values}), min_size=1, max_size=4
    )
)
def test_json_records_are_stored_as_the_standard_library_writes_them(records: list[dict[str, Any]]) -> None:
    body = json.dumps({"records": records}).encode()
    for partition in (0, None):
        assert _outcome(encode_json_produce, body, Flavour.JSON, partition) == _outcome(
            encode_exactly, body, Flavour.JSON, partition
        )


def test_what_orjson_would_write_otherwise_is_kept_exact() -> None:
    body = b'{"records": [{"key": 123456789012345678901234567890, "value": [1e-05, -9223372036854775809]}]}'
    assert encode_fast(body, Flavour.JSON, 0, 1, 0, NOW_MS) is None  # done by the standard library
    assert _stored(body, Flavour.JSON) == [
        (b"123456789012345678901234567890", b"[1e-05,-9223372036854775809]")
    ]
    plain = b'{"records": [{"key": {"id": 7}, "value": ["\\u00e9", 0.5, 1e15, 18446744073709551615]}]}'
    assert encode_fast(plain, Flavour.JSON, 0, 1, 0, NOW_MS) is not None  # orjson's own text is the same
    assert _stored(plain, Flavour.JSON) == [
        (b'{"id":7}', '["é",0.5,1000000000000000.0,18446744073709551615]'.encode())
    ]


BAD_BODIES = [
    b"",
    b"{",
    b'{"records": [{"value": "\\ud800"}]}',  # a lone surrogate: the standard library takes it
    b'{"records": [{"value": 1e400}]}',
    b'{"records": []}',
    b'{"records": [{"key": "a"}]}',
    b'{"records": [{"value": "YQ=="}, {"value": "not base64!"}]}',
    b'{"records": [{"value": "YQ==", "partition": 184467440737095516150}]}',
    b'{"records": [{"value": "YQ==", "timestamp": -1}]}',
    b'{"records": [{"value": "YQ=="}], "producer_id": 99999999999999999999, "sequence": 0}',
    b'{"records": [{"value": "YQ==", "headers": [{"key": 1, "value": "x"}]}]}',
    b'{"records": [{"value": "YQ==", "extra": 1}]}',
    b"\xff",
]


@pytest.mark.parametrize("body", BAD_BODIES)
@pytest.mark.parametrize("flavour", [Flavour.BINARY, Flavour.JSON])
def test_every_body_gives_what_the_standard_library_gives(body: bytes, flavour: Flavour) -> None:
    for partition in (0, None):
        fast, exact = (
            _outcome(encode_json_produce, body, flavour, partition),
            _outcome(encode_exactly, body, flavour, partition),
        )
        assert fast == exact


def test_binary_records_of_the_common_shapes_and_the_general_one_encode_alike() -> None:
    values = [b"", b"\x00\xff", b"hello" * 40]
    common = [{"value": base64.b64encode(v).decode(), "key": base64.b64encode(b"k").decode()} for v in values]
    general = [{**record, "headers": [], "timestamp": None} for record in common]
    first = encode_json_produce(json.dumps({"records": common}).encode(), Flavour.BINARY, 0, 1, 0, NOW_MS)
    second = encode_json_produce(json.dumps({"records": general}).encode(), Flavour.BINARY, 0, 1, 0, NOW_MS)
    assert first == second
    assert [(r.key, r.value) for r in decode_batch(first.batches[0][1]).records] == [
        (b"k", v) for v in values
    ]
