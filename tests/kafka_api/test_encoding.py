"""The door's answers encoded by ``kafka_api.encoding`` are kio's to the byte: every response class of every
version the listener serves, filled by hypothesis from kio's own types (its phantom integers bound to
their widths, nullable and tagged fields, nested and repeated entities), written both ways. That a
fetch's large records leave as a part of their own, uncopied: ``test_kafka_wire.py``."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.primitive import Records

from kafka_api import encoding, wire
from kafka_api.apis import APIS

# kio registers a strategy for each of its primitive types but for the records' bytes
st.register_type_strategy(Records, st.binary(max_size=2 * encoding.BY_REFERENCE_BYTES))

ANSWERS = sorted(
    {
        wire.response_class(key, version)
        for key, api in APIS.items()
        for version in range(api.min_version, api.max_version + 1)
    },
    key=lambda cls: cls.__module__,
)
EXAMPLES = 4  # a class; 269 classes: each kind of field and nesting is met many times over


def _kio(correlation_id: int, answer: Any) -> bytes:
    header_class = answer.__header_schema__
    body = io.BytesIO()
    entity_writer(header_class)(body, header_class(correlation_id=correlation_id))
    entity_writer(type(answer))(body, answer)
    return len(body.getvalue()).to_bytes(4, "big", signed=True) + body.getvalue()


@pytest.mark.parametrize("cls", ANSWERS, ids=lambda cls: cls.__module__.removeprefix("kio.schema."))
def test_every_answer_is_encoded_as_kio_encodes_it(cls: type) -> None:
    @settings(max_examples=EXAMPLES, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
    @given(answer=st.from_type(cls), correlation_id=st.integers(-(2**31), 2**31 - 1))
    def same(answer: Any, correlation_id: int) -> None:
        try:
            expected = _kio(correlation_id, answer)
        except TypeError:  # a value kio refuses (None where the schema has none): refused here too
            with pytest.raises(TypeError):
                encoding.encode(correlation_id, answer)
            return
        assert b"".join(encoding.encode(correlation_id, answer)) == expected

    same()
