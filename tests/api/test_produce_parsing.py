"""The produce path's shortcuts give exactly what the general path gives: records of the common shape
{"value": "<base64>"} parse to the same records, bad base64 is refused naming the record, and the answer
text is the one json.dumps would write."""

from __future__ import annotations

import base64
import json

import pytest

from api.schemas import Flavour, ParsedRecord, parse_produce, produce_answer, produce_entry
from raftlog.storage.errors import InvalidRecord


def test_answer_text_matches_json_dumps() -> None:
    for partition, base, count in ((0, 0, 1), (7, 123_456, 5), (2, 2**40, 3)):
        expected = json.dumps({"offsets": [produce_entry(partition, base + i) for i in range(count)]})
        assert produce_answer(partition, base, count) == expected.encode()


def test_common_shape_parses_like_the_general_path() -> None:
    values = [b"", b"\x00\xff", b"hello" * 40]
    plain = {"records": [{"value": base64.b64encode(v).decode()} for v in values]}
    # an explicit "key": null takes the general path and must give the same records
    general = {"records": [{"value": base64.b64encode(v).decode(), "key": None} for v in values]}
    fast = parse_produce(plain, Flavour.BINARY, 3)
    slow = parse_produce(general, Flavour.BINARY, 3)
    assert fast.records == slow.records == [ParsedRecord(None, v, (), 3) for v in values]


@pytest.mark.parametrize("bad", ["not base64!", "YQ", "é"])
def test_bad_base64_is_refused_naming_the_record(bad: str) -> None:
    body = {"records": [{"value": "YQ=="}, {"value": bad}]}
    with pytest.raises(InvalidRecord, match=r"records\[1\]\.value"):
        parse_produce(body, Flavour.BINARY, 0)
