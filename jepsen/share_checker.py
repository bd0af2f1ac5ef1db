"""The share group checker: what KIP-932 promises the members of one share group.

`check(history)` is a pure function of a validated `History` (jepsen/history.py): producers' `send`s
(`ok` with the record's offset; `key` is `topic/partition`), members' `acquire`s (`ok` with `records`,
each `[key, offset, value, delivery_count]`) and `ack`s (the invoke's `acks`, each `[key, offset, type]`,
type `accept`, `release` or `reject`; `ok`: every one applied, `fail`: none, `info`: unknown). An acquire
whose invoke says `final: true` is one of the drain at the end, after every send completed and every
lock had time to expire; one that says `partial` (a partition's leader could not be asked) does not
show the group drained. A member is a process. Real time is the order of the history.

What KIP-932 allows, and so what is never flagged: a record delivered again (its lock expired, it was
released, its member left, or its partition's leader changed before it was acknowledged), to the same or
another member, each time with a higher delivery count; a record never delivered again once its delivery
count reached the delivery limit (archived); an acknowledgement refused or of unknown outcome.

The anomaly classes:

- `accepted-twice`: two acknowledgements ACCEPT of one record both acknowledged. The share partition
  takes an acknowledgement only from the member holding the record's lock, and an accepted record is
  never locked again.
- `delivered-after-accept`: a record delivered by an acquire invoked after an ACCEPT of it was
  acknowledged: an accepted record is done with.
- `delivery-count-regression`: a record delivered with a delivery count not above the count of a
  delivery of it that completed before this one was invoked (the counts are replicated with the locks).
- `lost-record`: an acknowledged send whose record no member was ever delivered, although the drain at
  the end acquired nothing more: the group passed a record nobody got.
- `inconsistent-offsets`: one offset of a partition holding two values across sends and deliveries;
  `phantom-read`: a value delivered that was never sent.

Verdict: `invalid` with any anomaly; else `unknown` when the history is truncated, nothing was delivered,
or no final acquire came back empty after the last send (the group did not drain); else `valid`.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from typing import Final

from jepsen.history import SHARE_FS, History, JsonDict, Operation
from jepsen.results import (
    EXAMPLES_PER_CLASS,
    INCONSISTENT_OFFSETS,
    PHANTOM_READ,
    Anomaly,
    outcomes_by_f,
    results,
)

ACCEPTED_TWICE: Final = "accepted-twice"
DELIVERED_AFTER_ACCEPT: Final = "delivered-after-accept"
DELIVERY_COUNT_REGRESSION: Final = "delivery-count-regression"
LOST_RECORD: Final = "lost-record"
CLASSES: Final = {
    ACCEPTED_TWICE: "one record accepted twice, both acknowledged",
    DELIVERED_AFTER_ACCEPT: "a record delivered after its acceptance was acknowledged",
    DELIVERY_COUNT_REGRESSION: "a record delivered again with a delivery count not above an earlier one",
    LOST_RECORD: "an acknowledged record never delivered, though the group drained",
    INCONSISTENT_OFFSETS: "one offset of a partition with two values",
    PHANTOM_READ: "a value delivered that was never sent",
}
Record = tuple[str, int]  # (key, offset)


def is_share(history: History) -> bool:
    """Whether the history is the share workload's (it has acquires or acknowledgements)."""
    return any(op.f in SHARE_FS for op in history.operations)


class _Analysis:
    def __init__(self, history: History) -> None:
        self.sends = [op for op in history.operations if op.f == "send"]
        self.acquires = [op for op in history.operations if op.f == "acquire" and op.type == "ok"]
        self.accepts: dict[Record, list[Operation]] = collections.defaultdict(list)
        for op in history.operations:
            if op.f == "ack" and op.type == "ok":
                for key, offset, kind in op.invoke.get("acks", []):
                    if kind == "accept":
                        self.accepts[(key, offset)].append(op)
        # every delivery: record -> [(acquire, value, delivery count)], in the order acquires were invoked
        self.deliveries: dict[Record, list[tuple[Operation, int, int]]] = collections.defaultdict(list)
        for op in self.acquires:
            for key, offset, value, count in op.result("records", []):
                self.deliveries[(key, offset)].append((op, value, count))
        self.sent: dict[Record, tuple[Operation, int]] = {}
        self.values: set[tuple[str, int]] = set()
        for op in self.sends:
            self.values.add((str(op.key), int(op.invoke.get("value"))))
            if op.type == "ok":
                self.sent[(str(op.key), int(op.result("offset")))] = (op, int(op.invoke.get("value")))

    def drained(self) -> bool:
        """Whether a final acquire that found nothing was invoked after every send completed."""
        last_send = max((op.complete_index or op.invoke_index for op in self.sends), default=-1)
        return any(
            op.invoke.get("final", False)
            and not op.result("records")
            and not op.result("partial", False)  # a partition's leader not asked: not all was seen
            and op.invoke_index > last_send
            for op in self.acquires
        )


def _accepted_twice(a: _Analysis) -> Iterable[Anomaly]:
    for (key, offset), ops in sorted(a.accepts.items()):
        if len(ops) > 1:
            yield Anomaly(ACCEPTED_TWICE, {"key": key, "offset": offset, "times": len(ops)}, ops[:2])


def _delivered_after_accept(a: _Analysis) -> Iterable[Anomaly]:
    for record, accepts in sorted(a.accepts.items()):
        for acquire, _, count in a.deliveries.get(record, []):
            accept = next((op for op in accepts if op.precedes(acquire)), None)
            if accept is not None:
                detail = {"key": record[0], "offset": record[1], "delivery_count": count}
                yield Anomaly(DELIVERED_AFTER_ACCEPT, detail, [accept, acquire])
                break


def _count_regressions(a: _Analysis) -> Iterable[Anomaly]:
    for (key, offset), seen in sorted(a.deliveries.items()):
        for i, (later, _, count) in enumerate(seen):
            earlier = next(((op, c) for op, _, c in seen[:i] if op.precedes(later) and c >= count), None)
            if earlier is not None:
                detail = {"key": key, "offset": offset, "delivery_count": count, "earlier_count": earlier[1]}
                yield Anomaly(DELIVERY_COUNT_REGRESSION, detail, [earlier[0], later])
                break


def _lost(a: _Analysis) -> Iterable[Anomaly]:
    if not a.drained():
        return
    for record, (send, value) in sorted(a.sent.items()):
        if record not in a.deliveries:
            yield Anomaly(LOST_RECORD, {"key": record[0], "offset": record[1], "value": value}, [send])


def _inconsistent_and_phantoms(a: _Analysis) -> Iterable[Anomaly]:
    for record, seen in sorted(a.deliveries.items()):
        sent = a.sent.get(record)
        for acquire, value, _ in seen:
            if (record[0], value) not in a.values:
                yield Anomaly(
                    PHANTOM_READ, {"key": record[0], "offset": record[1], "value": value}, [acquire]
                )
                break
            if sent is not None and sent[1] != value:
                detail = {"key": record[0], "offset": record[1], "values": [sent[1], value]}
                yield Anomaly(INCONSISTENT_OFFSETS, detail, [sent[0], acquire])
                break


def check(history: History, examples_per_class: int = EXAMPLES_PER_CLASS) -> JsonDict:
    """Check a share group history: verdict, anomaly counts and examples, stats."""
    a = _Analysis(history)
    found: list[Anomaly] = [
        *_accepted_twice(a),
        *_delivered_after_accept(a),
        *_count_regressions(a),
        *_lost(a),
        *_inconsistent_and_phantoms(a),
    ]

    def doubts() -> list[str]:
        reasons = []
        if not a.deliveries:
            reasons.append("no record was delivered: nothing was checked")
        if not a.drained():
            reasons.append("no final acquire came back empty after the last send: the group did not drain")
        return reasons

    counts = [c for seen in a.deliveries.values() for _, _, c in seen]
    return results(
        history,
        workload="share",
        classes=CLASSES,
        found=found,
        names=_names,
        doubts=doubts,
        examples_per_class=examples_per_class,
        unseen={"count": sum(1 for r in a.sent if r not in a.deliveries)},
        stats={
            "outcomes": outcomes_by_f(history.operations),
            "sent": len(a.sent),
            "delivered": len(a.deliveries),
            "redeliveries": sum(len(seen) - 1 for seen in a.deliveries.values()),
            "accepted": len(a.accepts),
            "delivery_count_max": max(counts, default=0),
        },
    )


def _names(anomalies: Sequence[Anomaly]) -> Iterable[str]:
    return (f"{anomaly.detail.get('key')}@{anomaly.detail.get('offset')}" for anomaly in anomalies)
