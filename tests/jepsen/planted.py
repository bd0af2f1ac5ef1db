"""A fault planted in a real run's history, for the fault-run tests' own negative control: their runs are
short, and a short run must still hold enough for the checker to catch what it exists to catch. The
history of a valid run, with one acknowledged record taken out of every read of it (as if the cluster
had lost it), must check invalid; with every recovery delayed past its bound, its availability must
break its bounds (tests/jepsen/available.py)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from jepsen import recovery
from jepsen.checking import check
from jepsen.history import parse_lines, read_history


def _without(event: dict[str, Any], value: Any) -> dict[str, Any]:
    if event.get("type") != "ok":
        return event
    if event.get("f") == "poll" and event.get("records"):  # [[offset, value], ...]
        return {**event, "records": [r for r in event["records"] if r[1] != value]}
    if event.get("f") == "consume" and event.get("items"):  # ["record", key, offset, value, generation]
        return {**event, "items": [i for i in event["items"] if i[0] != "record" or i[3] != value]}
    return event


def one_acknowledged_record_lost(history: pathlib.Path) -> dict[str, Any]:
    """The checker's results on ``history`` with its first acknowledged send's record read nowhere."""
    acked = next(op for op in read_history(history).operations if op.f == "send" and op.type == "ok")
    value = acked.invoke.get("value")
    events = [json.loads(line) for line in history.read_text().splitlines()]
    return check(parse_lines([json.dumps(_without(event, value)) + "\n" for event in events]))


def one_record_consumed_twice(history: pathlib.Path) -> dict[str, Any]:
    """The checker's results on the group workload's ``history`` with its first delivered record also
    delivered, under the same generation, to another member in that member's next ``consume``: two
    members of one generation holding one partition at once."""
    events = [json.loads(line) for line in history.read_text().splitlines()]
    first = next(
        (e, item)
        for e in events
        if e.get("f") == "consume" and e.get("type") == "ok"
        for item in e.get("items", [])
        if item[0] == "record"
    )
    owner, item = first[0]["process"], first[1]
    other = next(
        e for e in events[events.index(first[0]) :] if e.get("f") == "consume" and e.get("type") == "ok"
        and e["process"] != owner
    )  # fmt: skip
    other["items"] = [*other["items"], list(item)]
    return check(parse_lines([json.dumps(event) + "\n" for event in events]))


def recovery_past_bound(history: pathlib.Path) -> dict[str, Any]:
    """The availability measured on ``history`` with every recovery delayed past its bound: after each
    heal, no write acknowledged until the bound has passed and then as long again as the cluster took to
    acknowledge one (or its nodes to report ready), as if it had been down for its whole bound first
    (those writes answered as unknown). The bound is what the guarantee allows (jepsen/recovery.py), so
    this is the slowest recovery the run's history must be seen to break; a factor of the measured
    recovery instead (five times, before) passes on a quiet machine whenever recoveries are much shorter
    than the bound's fixed part (an election's longest timeout and a client's next attempt, 4.5 s)."""
    events = [json.loads(line) for line in history.read_text().splitlines()]
    measured = recovery.measure(parse_lines([json.dumps(event) + "\n" for event in events]))
    silent = [
        (w["healed_at"], w["healed_at"] + w["bound_s"] + max(w["recovery_s"] or 0.0, w["ready_s"]))
        for w in measured["recoveries"]
    ]
    for event in events:
        quiet = any(start <= event["time"] < end for start, end in silent)
        if event.get("type") == "ok" and event.get("f") in recovery.WRITE_FS and quiet:
            event["type"] = "info"
            event.pop("offset", None)
    delayed: dict[str, Any] = recovery.measure(parse_lines([json.dumps(event) + "\n" for event in events]))
    return delayed
