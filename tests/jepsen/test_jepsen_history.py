"""Reading, validating and pairing history.jsonl: errors name the line, pairing follows processes."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from jepsen_history_builder import HistoryBuilder

from jepsen.history import HistoryError, build, parse_lines, read_history, write_history

K = "t0/0"


def lines(events: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(event) + "\n" for event in events]


def sample() -> HistoryBuilder:
    h = HistoryBuilder()
    h.send(0, K, 1, 0)
    h.nemesis("start", "kill", "n1")
    h.invoke(1, "poll", key=K, offset=0)
    h.send(0, K, 2, type="info")
    h.complete(1, "ok", records=[[0, 1]])
    h.nemesis("stop", "kill")
    h.invoke(2, "commit", key=K, group="g", offset=1)
    return h


def test_round_trip_and_pairing(tmp_path: pathlib.Path) -> None:
    events = sample().events
    write_history(tmp_path / "history.jsonl", events)
    history = read_history(tmp_path / "history.jsonl")
    assert [e.raw for e in history.events] == events
    assert [(op.f, op.invoke_index, op.complete_index, op.type) for op in history.operations] == [
        ("send", 0, 1, "ok"),
        ("poll", 3, 6, "ok"),
        ("send", 4, 5, "info"),
        ("commit", 8, None, "info"),  # still in flight: outcome unknown
    ]
    assert [e.f for e in history.nemesis] == ["start", "stop"]
    assert history.operations[1].result("records") == [[0, 1]]
    assert len(history.pending) == 1 and not history.truncated


def test_a_cut_off_last_line_marks_the_history_truncated() -> None:
    text = lines(sample().events)
    text.append('{"index": 9, "time": 9.0, "proc')
    history = parse_lines(text)
    assert history.truncated
    assert len(history.events) == 9


def error_for(events: list[dict[str, Any]]) -> HistoryError:
    with pytest.raises(HistoryError) as caught:
        parse_lines(lines(events), source="h.jsonl")
    return caught.value


def test_bad_json_in_the_middle_names_the_line() -> None:
    text = lines(sample().events)
    text.insert(2, "{oops\n")
    with pytest.raises(HistoryError, match=r"^h.jsonl:3: not valid JSON"):
        parse_lines(text, source="h.jsonl")


@pytest.mark.parametrize(
    ("line", "change", "message"),
    [
        (1, {"index": 5}, "index is 5, expected 0"),
        (1, {"type": "done"}, "type must be one of"),
        (2, {"process": "n1"}, "process must be an int or 'nemesis'"),
        (1, {"time": "soon"}, "time must be a number"),
        (2, {"offset": None}, "send ok: needs 'offset'"),
        (2, {"key": "t9/9"}, "does not repeat its invoke at index 0"),
        (3, {"type": "ok"}, "nemesis events are type 'info'"),
        (1, {"value": "x"}, "send invoke: value must be an int"),
        (1, {"producer_id": 4}, "producer_id and sequence go together"),
    ],
)
def test_validation_errors_name_the_line(line: int, change: dict[str, Any], message: str) -> None:
    events = sample().events
    events[line - 1] = {**events[line - 1], **change}
    error = error_for(events)
    assert error.line == line
    assert message in str(error)
    assert str(error).startswith(f"h.jsonl:{line}: ")


def test_a_process_with_two_operations_in_flight_is_rejected() -> None:
    h = HistoryBuilder()
    h.invoke(0, "send", key=K, value=1)
    events = [
        *h.events,
        {"index": 1, "time": 1.0, "process": 0, "type": "invoke", "f": "poll", "key": K, "offset": 0},
    ]
    assert "still in flight" in str(error_for(events))


def test_a_completion_without_invoke_is_rejected() -> None:
    events = [{"index": 0, "time": 0.0, "process": 3, "type": "ok", "f": "send", "key": K, "offset": 0}]
    error = error_for(events)
    assert error.line == 1 and "without a preceding invoke" in str(error)


def test_malformed_poll_records_are_rejected() -> None:
    h = HistoryBuilder()
    h.invoke(0, "poll", key=K, offset=0)
    h.complete(0, "ok", records=[[0, 1], ["x", 2]])
    assert "records[1] must be [offset, value]" in str(error_for(h.events))


def test_unknown_client_operations_are_kept_with_a_warning() -> None:
    h = HistoryBuilder()
    h.invoke(0, "offsets", key=K)
    h.complete(0, "ok", end_offset=3)
    history = build(h.events)
    assert [op.f for op in history.operations] == ["offsets"]
    assert any("unknown f" in warning for warning in history.warnings)
