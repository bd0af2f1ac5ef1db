"""What the checkers share (``jepsen.checker``: the queue and compaction workloads;
``jepsen.txn_checker``: the transactional one; the group and share checkers): record values in a comparable
form, an anomaly with the exact operations that show it, availability per fault window (with each heal's
recovery and the windows without faults: ``jepsen.recovery``), and the results dict they return (verdict,
reasons, anomaly_counts, anomalies, unseen, stats, availability, history, classes). Pure, as they are.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeAlias, TypeVar

from jepsen import recovery
from jepsen.history import History, JsonDict, Operation

Value: TypeAlias = int | str  # an int as sent; anything else a poll returned, as canonical JSON text
T = TypeVar("T")

# The anomaly classes both checkers report (each defines them in its CLASSES, in its own words).
LOST_WRITE: Final = "lost-write"
DUPLICATE: Final = "duplicate"
INCONSISTENT_OFFSETS: Final = "inconsistent-offsets"
NONMONOTONIC_POLL: Final = "nonmonotonic-poll"
PHANTOM_READ: Final = "phantom-read"

EXAMPLES_PER_CLASS: Final = 10
WITNESSES_PER_ITEM: Final = 3  # operations shown for each place, value or transaction an anomaly names
LISTED_MAX: Final = 32  # offsets, values or records listed in one anomaly
REASONS_LISTED: Final = 5  # names per class in an invalid verdict's reason


def freeze(value: Any) -> Value:
    """A hashable, comparable form of a record value: ints unchanged, anything else as canonical JSON."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return "json:" + json.dumps(value, sort_keys=True, separators=(",", ":"))


def key_of(op: Operation) -> str:
    key = op.key
    if key is None:  # validated by jepsen.history; a None here is a bug in the checker's caller
        raise ValueError(f"operation at index {op.invoke_index} has no key")
    return key


def records_of(op: Operation) -> list[tuple[int, Value]]:
    """(offset, value) of every record a poll returned, in its order."""
    return [(int(offset), freeze(value)) for offset, value in op.result("records", [])]


def backwards(records: Sequence[tuple[int, Value]], start: int) -> list[JsonDict]:
    """Where a poll from ``start`` went back (nonmonotonic-poll): a record below the offset asked for, or
    at or below the one before it; each as the offset it came after and its own."""
    found: list[JsonDict] = [
        {"after": a[0], "offset": b[0]} for a, b in itertools.pairwise(records) if b[0] <= a[0]
    ]
    if records and records[0][0] < start:
        found.insert(0, {"after": start - 1, "offset": records[0][0]})
    return found


@dataclasses.dataclass
class Anomaly:
    kind: str
    detail: JsonDict
    operations: list[Operation]

    def first_index(self) -> int:
        return min((op.invoke_index for op in self.operations), default=-1)

    def to_json(self) -> JsonDict:
        events: dict[int, JsonDict] = {}
        for op in self.operations:
            for raw in op.events():
                events[int(raw["index"])] = raw
        return {
            "class": self.kind,
            **self.detail,
            "indexes": sorted(events),
            "ops": [events[index] for index in sorted(events)],
        }


def inconsistent_offsets(
    log: Mapping[str, Mapping[int, Mapping[Value, Sequence[T]]]], op_of: Callable[[T], Operation]
) -> Iterator[Anomaly]:
    """inconsistent-offsets: an offset of a key (or partition) that ``log`` (key -> offset -> value ->
    what placed it there, ``op_of`` each one's operation) holds two values at."""
    for key in sorted(log):
        for offset in sorted(log[key]):
            by_value = log[key][offset]
            if len(by_value) < 2:
                continue
            ops = [op_of(placed) for each in by_value.values() for placed in each[:WITNESSES_PER_ITEM]]
            yield Anomaly(
                INCONSISTENT_OFFSETS,
                {"key": key, "offset": offset, "values": sorted(by_value, key=repr)},
                ops,
            )


def results(
    history: History,
    *,
    workload: str,
    classes: dict[str, str],
    found: Sequence[Anomaly],
    names: Callable[[Sequence[Anomaly]], Iterable[str]],
    doubts: Callable[[], list[str]],
    examples_per_class: int,
    unseen: JsonDict,
    stats: JsonDict,
    warnings: Sequence[str] = (),
) -> JsonDict:
    """The results of a check: ``invalid`` with any anomaly found (a reason per class, naming the first
    of what ``names`` says each anomaly is about), else ``unknown`` when the history is truncated or
    ``doubts`` (called only then) gives reasons, else ``valid``; up to ``examples_per_class`` anomalies of
    each class, the earliest first."""
    by_class: dict[str, list[Anomaly]] = {kind: [] for kind in classes}
    for anomaly in found:
        by_class[anomaly.kind].append(anomaly)
    reasons: list[str] = []
    if found:
        verdict = "invalid"
        reasons.extend(
            f"{len(items)} {kind} ({_first(items, names)})" for kind, items in by_class.items() if items
        )
    else:
        if history.truncated:
            reasons.append("the history ends mid-line (truncated)")
        reasons.extend(doubts())
        verdict = "unknown" if reasons else "valid"
    return {
        "verdict": verdict,
        "workload": workload,
        "reasons": reasons,
        "anomaly_counts": {kind: len(items) for kind, items in by_class.items()},
        "anomalies": {
            kind: [a.to_json() for a in sorted(items, key=Anomaly.first_index)[:examples_per_class]]
            for kind, items in by_class.items()
            if items
        },
        "unseen": unseen,
        "stats": stats,
        "availability": availability(history),
        "history": {
            "events": len(history.events),
            "truncated": history.truncated,
            "pending_operations": len(history.pending),
            "warnings": [*history.warnings, *warnings],
        },
        "classes": dict(classes),
    }


def _first(anomalies: Sequence[Anomaly], names: Callable[[Sequence[Anomaly]], Iterable[str]]) -> str:
    """The distinct names of the anomalies, earliest first, the first REASONS_LISTED of them."""
    listed: list[str] = []
    for name in names(sorted(anomalies, key=Anomaly.first_index)):
        if name not in listed:
            listed.append(name)
    more = f" and {len(listed) - REASONS_LISTED} more" if len(listed) > REASONS_LISTED else ""
    return ", ".join(listed[:REASONS_LISTED]) + more


# ---------------------------------------------------------------------------------------------------
# Availability and operation counts


def outcomes_by_f(operations: Iterable[Operation]) -> dict[str, dict[str, int]]:
    """How many operations of each f completed ok, fail or info, or are pending."""
    table: dict[str, dict[str, int]] = {}
    for op in operations:
        _count(table, op.f, "pending" if op.pending else op.type)
    return table


def availability(history: History) -> JsonDict:
    """For each fault window, outside all windows, and per fault kind: completion counts per op f; and
    ``recoveries`` and ``fault_free`` (``jepsen.recovery``): each heal's time to the first write
    acknowledged against its nodes' ready time and its bound, and the writes acknowledged while no fault
    was active and every node was ready."""
    windows: list[JsonDict] = []
    open_windows: dict[str, JsonDict] = {}
    for event in history.nemesis:
        fault = str(event.get("fault"))
        if event.f == "start" and fault not in open_windows:
            window: JsonDict = {
                "fault": fault,
                "value": event.get("value"),
                "start": event.time,
                "stop": None,
                "start_index": event.index,
                "stop_index": None,
            }
            open_windows[fault] = window
            windows.append(window)
        elif event.f == "stop" and fault in open_windows:
            window = open_windows.pop(fault)
            window["stop"], window["stop_index"] = event.time, event.index
    outside: dict[str, dict[str, int]] = {}
    per_window: list[dict[str, dict[str, int]]] = [{} for _ in windows]
    by_fault: dict[str, dict[str, dict[str, int]]] = {}
    for op in history.operations:
        time = op.invoke.time
        inside = [
            i
            for i, window in enumerate(windows)
            if window["start"] <= time and (window["stop"] is None or time < window["stop"])
        ]
        outcome = "pending" if op.pending else op.type
        if not inside:
            _count(outside, op.f, outcome)
        for i in inside:
            _count(per_window[i], op.f, outcome)
        for fault in sorted({windows[i]["fault"] for i in inside}):
            _count(by_fault.setdefault(fault, {}), op.f, outcome)
    return {
        "windows": [
            {**window, "ops": fractions(counts)} for window, counts in zip(windows, per_window, strict=True)
        ],
        "outside": fractions(outside),
        "by_fault": {fault: fractions(counts) for fault, counts in sorted(by_fault.items())},
        **recovery.measure(history),
    }


def _count(table: dict[str, dict[str, int]], f: str, outcome: str) -> None:
    row = table.setdefault(f, {"ok": 0, "fail": 0, "info": 0, "pending": 0})
    row[outcome] += 1


def fractions(table: dict[str, dict[str, int]]) -> dict[str, JsonDict]:
    """Each f's counts with their total and the fraction that completed ok."""
    result: dict[str, JsonDict] = {}
    for f in sorted(table):
        row = table[f]
        total = sum(row.values())
        result[f] = {**row, "total": total, "ok_fraction": round(row["ok"] / total, 4) if total else None}
    return result
