"""A JSON schema's patterns are matched with RE2, in time linear in the text: a pattern that makes
Python's ``re`` backtrack exponentially (``(a+)+$`` on fifty a's and a "!": 2**50 steps, the GIL held all
along) answers at once wherever the node matches it (a record's string, a property name, a compatibility
check); what RE2 cannot express is refused when the schema is registered, saying why."""

from __future__ import annotations

import json

import pytest

from partitions.registry.json_schema import JSON_TYPE
from partitions.registry.schema_types import InvalidRecord, InvalidSchema

EXPONENTIAL = "(a+)+$"
HOSTILE = "a" * 50 + "!"


def test_a_record_s_string_is_matched_in_linear_time() -> None:
    schema = JSON_TYPE.parse(json.dumps({"type": "string", "pattern": EXPONENTIAL}), {})
    with pytest.raises(InvalidRecord, match="does not match"):
        schema.decode(json.dumps(HOSTILE).encode())
    assert schema.decode(json.dumps("aaa").encode()) == "aaa"


def test_a_property_name_is_matched_in_linear_time_by_records_and_by_compatibility_checks() -> None:
    text = {"type": "object", "patternProperties": {EXPONENTIAL: {"type": "integer"}}}
    schema = JSON_TYPE.parse(json.dumps(text), {})
    assert schema.decode(json.dumps({HOSTILE: "not an integer, but no match"}).encode())
    with pytest.raises(InvalidRecord):
        schema.decode(json.dumps({"aaa": "x"}).encode())
    wider = {**text, "properties": {HOSTILE: {"type": "string"}}, "additionalProperties": False}
    assert isinstance(JSON_TYPE.parse(json.dumps(wider), {}).backward_incompatibilities(schema), list)


@pytest.mark.parametrize("pattern", ["(?=a)b", "(a)\\1", "(?<!x)y"])
def test_a_pattern_re2_cannot_express_is_refused_at_registration(pattern: str) -> None:
    for schema in ({"type": "string", "pattern": pattern}, {"patternProperties": {pattern: {}}}):
        with pytest.raises(InvalidSchema, match=r"not supported.*RE2"):
            JSON_TYPE.parse(json.dumps(schema), {})
