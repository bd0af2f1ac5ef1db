"""The transactional workload's checker: Kafka's transactions as read_committed readers see them.

`check(history)` is a pure function of a validated `History` (jepsen/history.py) of the transactional
workload (jepsen/txn_workload.py) and returns the shape `jepsen.checker.check` returns: verdict, reasons,
anomaly_counts, anomalies (with the exact operations, each naming its transaction), stats, availability.

A transaction is a `txn` operation (invoke: its writes `[key, value]` in the order it produced them, the
consumer offsets it sends `[group, key, offset]`, the input records it consumed `[key, offset, value]`;
completion: each write's offset from its delivery report, `written`) and the `end` operation that asked
to commit or abort it (`commit`: true or false). Its outcome:

- committed: an `end` with commit, ok (the commit was acknowledged);
- aborted: an `end` with commit that failed (the service acknowledged the abort that followed the refused
  commit); an `end` without commit, however it completed (an abort was asked for: no commit ever was); or
  no `end` at all (the worker's producer failed and a new producer with the same transactional id ended
  the transaction). A transaction whose commit was never requested cannot commit, so its records must never
  be visible;
- unknown: an `end` with commit that timed out or never completed. A read_committed read of any of its
  records shows that it committed (it is "visible"); a complete final read without them, that it did not.

Reads: `poll` operations with `isolation` read_committed (the reader's view that every check below is
about) or read_uncommitted (which see aborted records too: they only add to each partition's offsets, and
show in the statistics that aborted transactions really wrote records the committed readers had to skip).
A final read of a partition (`final`) is complete when a read_committed poll from offset 0 was answered
`ok` with `end`: the offset at which the consumer reached the partition's end, at or past the high
watermark taken after every transaction had ended.

The anomaly classes (CLASSES; jepsen/README.md, "Transactions"), modelled on Jepsen's Kafka checker
(`jepsen.tests.kafka`: G1a is its aborted read, precommitted-read its read of data not yet committed,
lost-write and duplicate as there):

- `aborted-read`: a read_committed poll returning a record of an aborted transaction.
- `uncommitted-read`: a read_committed poll returning a record of a transaction whose commit had not been
  requested when the poll completed (it returned before the transaction's `end` was invoked). A poll that
  completes after the commit was requested may return the records, whether or not the acknowledgement came
  back: a commit whose answer was lost may well have committed.
- `lost-write`: a record of a committed transaction missing from a complete final read of its partition,
  or passed over by a read_committed poll whose records span its offset.
- `non-atomic`: a transaction not aborted with a record visible to read_committed readers and another
  record that no such reader returned, missing from a complete final read or passed over (all-or-nothing
  across partitions; an aborted transaction with a visible record is an aborted read).
- `duplicate`: a value at more than one offset, or in more than one partition (each value is produced
  once, by an idempotent transactional producer).
- `inconsistent-offsets`: one offset of a partition with two values across delivery reports and polls.
- `nonmonotonic-poll`: a poll's offsets not strictly increasing, or below the offset asked for.
- `reordered`: a transaction's records in a partition not in the order it produced them, or two
  transactions of one transactional id whose records in a partition interleave or come in the other order
  (so between two records of a transaction only other producers' records may stand).
- `phantom-read`: a poll returning a value never written, or in a partition it was not written to.
- `uncommitted-offset`: a group's committed offset read (`committed`, which asks for stable offsets) as an
  offset that only aborted transactions, or transactions not yet asked to commit, had sent.
- `lost-offset`: a committed offset read lower than (or without) the offset of a transaction whose commit
  was acknowledged before the read was invoked, where no later transaction could have replaced it.
- `duplicate-processing`: an input record consumed by two committed (or visible) transactions of one
  group: exactly-once processing broken.

Verdict: `invalid` with any anomaly; else `unknown` when the history is truncated, no transaction
committed, no final read happened, or a partition written by a transaction that may have committed has no
complete final read; else `valid`.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from typing import Any, Final

from jepsen.history import TXN_FS, History, JsonDict, Operation
from jepsen.results import (
    DUPLICATE,
    EXAMPLES_PER_CLASS,
    INCONSISTENT_OFFSETS,
    LISTED_MAX,
    LOST_WRITE,
    NONMONOTONIC_POLL,
    PHANTOM_READ,
    WITNESSES_PER_ITEM,
    Anomaly,
    Value,
    backwards,
    freeze,
    inconsistent_offsets,
    key_of,
    outcomes_by_f,
    records_of,
    results,
)

ABORTED_READ: Final = "aborted-read"
UNCOMMITTED_READ: Final = "uncommitted-read"
NON_ATOMIC: Final = "non-atomic"
REORDERED: Final = "reordered"
UNCOMMITTED_OFFSET: Final = "uncommitted-offset"
LOST_OFFSET: Final = "lost-offset"
DUPLICATE_PROCESSING: Final = "duplicate-processing"

CLASSES: Final[dict[str, str]] = {
    ABORTED_READ: "a read_committed poll returning a record of an aborted transaction (its abort "
    "acknowledged or requested, or its commit never requested)",
    UNCOMMITTED_READ: "a read_committed poll returning a record of a transaction whose commit had not been "
    "requested when the poll completed",
    LOST_WRITE: "a record of a committed transaction missing from a complete final read of its partition, or "
    "passed over by a read_committed poll spanning its offset",
    NON_ATOMIC: "a transaction not aborted with records visible to read_committed readers and others never "
    "returned, missing from a complete final read or passed over: not all-or-nothing",
    DUPLICATE: "a value at more than one offset or in more than one partition",
    INCONSISTENT_OFFSETS: "one offset of a partition holding two values across delivery reports and polls",
    NONMONOTONIC_POLL: "a poll whose offsets are not strictly increasing or start below the offset asked for",
    REORDERED: "a transaction's records in a partition out of the order it produced them, or two "
    "transactions of one transactional id interleaved or inverted in a partition",
    PHANTOM_READ: "a poll returning a value never written, or in a partition it was not written to",
    UNCOMMITTED_OFFSET: "a committed offset read as one only aborted transactions, or transactions not yet "
    "asked to commit, had sent",
    LOST_OFFSET: "a committed offset read lower than the offset of a transaction whose commit was "
    "acknowledged before the read, and that no later transaction could have replaced",
    DUPLICATE_PROCESSING: "an input record consumed by two committed transactions of one group",
}

COMMITTED: Final = "committed"
ABORTED: Final = "aborted"
UNKNOWN: Final = "unknown"
READ_COMMITTED: Final = "read_committed"


def is_transactional(history: History) -> bool:
    """Whether the history is the transactional workload's (it has `txn`, `end` or `init` operations)."""
    return any(op.f in TXN_FS for op in history.operations)


@dataclasses.dataclass
class Txn:
    """One transaction: the operation that wrote it and the one that ended it."""

    name: str
    op: Operation
    end: Operation | None = None

    @property
    def transactional_id(self) -> str:
        return str(self.op.invoke.get("transactional_id"))

    @property
    def writes(self) -> list[tuple[str, int]]:
        return [(str(key), int(value)) for key, value in self.op.invoke.get("writes", [])]

    @property
    def offsets_sent(self) -> list[tuple[str, str, int]]:
        return [(str(g), str(k), int(o)) for g, k, o in self.op.invoke.get("offsets", [])]

    @property
    def consumed(self) -> list[tuple[str, int, Value]]:
        return [(str(k), int(o), freeze(v)) for k, o, v in self.op.invoke.get("consumed", [])]

    @property
    def written(self) -> dict[int, tuple[str, int]]:
        """value -> (key, offset) from the delivery reports the `txn` operation got."""
        rows = self.op.completion.raw.get("written", []) if self.op.completion is not None else []
        return {int(value): (str(key), int(offset)) for key, value, offset in rows}

    @property
    def commit_requested_at(self) -> int | None:
        """The history index at which a commit was requested (the `end` invoke), None if it never was."""
        if self.end is None or self.end.invoke.get("commit") is not True:
            return None
        return self.end.invoke_index

    @property
    def outcome(self) -> str:
        if self.end is None or self.commit_requested_at is None:
            return ABORTED
        if self.end.type == "ok":
            return COMMITTED
        return ABORTED if self.end.type == "fail" else UNKNOWN

    @property
    def why(self) -> str:
        """How the outcome is known, in words."""
        if self.end is None:
            return "commit never requested (no end)"
        if self.end.invoke.get("commit") is not True:
            return "abort requested" + (" and acknowledged" if self.end.type == "ok" else "")
        return {
            "ok": "commit acknowledged",
            "fail": "commit refused, abort acknowledged",
        }.get(self.end.type, "commit requested, outcome unknown")

    def ops(self) -> list[Operation]:
        return [self.op] if self.end is None else [self.op, self.end]

    def named(self) -> JsonDict:
        return {"txn": self.name, "transactional_id": self.transactional_id, "outcome": self.why}


def _read_committed(op: Operation) -> bool:
    return bool(op.invoke.get("isolation") == READ_COMMITTED)


class _Analysis:
    """The transactions, their records' places and who read them, built once for all checks."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.warnings: list[str] = []
        self.txns: dict[str, Txn] = {}
        for op in history.operations:
            if op.f == "txn":
                name = str(op.invoke.get("txn"))
                if name in self.txns:
                    self.warnings.append(f"transaction {name!r} begun twice (index {op.invoke_index})")
                    continue
                self.txns[name] = Txn(name, op)
        for op in history.operations:
            if op.f != "end":
                continue
            txn = self.txns.get(str(op.invoke.get("txn")))
            if txn is None or txn.end is not None:
                self.warnings.append(f"end at index {op.invoke_index} of no open transaction")
                continue
            txn.end = op
        self.writer: dict[Value, tuple[Txn, str]] = {}
        for txn in self.txns.values():
            for key, value in txn.writes:
                self.writer.setdefault(value, (txn, key))
        self.polls = [op for op in history.operations if op.f == "poll" and op.type == "ok"]
        self.committed_polls = [op for op in self.polls if _read_committed(op)]
        # key -> offset -> value -> operations that placed it there (delivery reports and polls)
        self.log: dict[str, dict[int, dict[Value, list[Operation]]]] = collections.defaultdict(
            lambda: collections.defaultdict(lambda: collections.defaultdict(list))
        )
        for txn in self.txns.values():
            for number, (key, offset) in txn.written.items():
                self.log[key][offset][number].append(txn.op)
        for op in self.polls:
            for offset, read in records_of(op):
                self.log[key_of(op)][offset][read].append(op)
        # value -> the read_committed polls that returned it
        self.visible_by: dict[Value, list[Operation]] = collections.defaultdict(list)
        for op in self.committed_polls:
            for _, read in records_of(op):
                self.visible_by[read].append(op)
        self.final_reads: dict[str, list[_Span]] = collections.defaultdict(list)
        self.spans: dict[str, list[_Span]] = collections.defaultdict(list)  # read_committed polls by key
        for op in self.committed_polls:
            span = _Span(op)
            self.spans[span.key].append(span)
            if (
                op.invoke.get("final") is True
                and op.invoke.get("offset") == 0
                and op.result("end") is not None
            ):
                self.final_reads[span.key].append(span)
        self.place: dict[tuple[str, Value], int] = {}  # (key, value) -> its lowest offset known
        for key, log in self.log.items():
            for offset, by_value in log.items():
                for placed in by_value:
                    known = self.place.get((key, placed))
                    self.place[(key, placed)] = offset if known is None else min(known, offset)

    def visible(self, txn: Txn) -> bool:
        return any(self.visible_by.get(value) for _, value in txn.writes)

    def must_be_visible(self, txn: Txn) -> bool:
        """Committed: acknowledged, or of unknown outcome but read under read_committed."""
        return txn.outcome == COMMITTED or (txn.outcome == UNKNOWN and self.visible(txn))

    def missing(self, txn: Txn) -> list[tuple[str, int, Operation]]:
        """The transaction's writes a read_committed reader showed absent: (key, value, the read): missing
        from a complete final read of the key, or passed over by a poll whose records span its offset."""
        found: list[tuple[str, int, Operation]] = []
        for key, value in txn.writes:
            witness = next((s.op for s in self.final_reads.get(key, []) if value not in s.values), None)
            offset = self.place.get((key, value))
            if witness is None and offset is not None:
                witness = next((s.op for s in self.spans.get(key, []) if s.passes_over(offset, value)), None)
            if witness is not None:
                found.append((key, value, witness))
        return found


class _Span:
    """A read_committed poll: what it returned, from the offset it asked for to its last record."""

    def __init__(self, op: Operation) -> None:
        self.op = op
        self.key = key_of(op)
        records = records_of(op)
        self.values = {value for _, value in records}
        self.start = int(op.invoke.get("offset"))
        self.last = records[-1][0] if records else -1

    def passes_over(self, offset: int, value: Value) -> bool:
        """The poll's records span `offset` without `value`: under read_committed, the offset held a record
        of an aborted transaction (or a control record), so `value`'s transaction aborted there."""
        return self.start <= offset <= self.last and value not in self.values


# ---------------------------------------------------------------------------------------------------
# The checks


def _reads(analysis: _Analysis) -> Iterable[Anomaly]:
    """aborted-read, uncommitted-read and phantom-read, one per value."""
    reported: set[tuple[str, Value]] = set()
    for op in analysis.polls:
        key = key_of(op)
        committed_view = _read_committed(op)
        for offset, value in records_of(op):
            written = analysis.writer.get(value)
            if written is None or written[1] != key:
                if (PHANTOM_READ, value) not in reported:
                    reported.add((PHANTOM_READ, value))
                    detail: JsonDict = {"key": key, "offset": offset, "value": value}
                    if written is not None:
                        detail.update(written_to=written[1], **written[0].named())
                    yield Anomaly(PHANTOM_READ, detail, [op, *(written[0].ops() if written else [])])
                continue
            txn = written[0]
            if not committed_view or (txn.name, value) in reported:
                continue
            requested = txn.commit_requested_at
            if txn.outcome == ABORTED:
                kind = ABORTED_READ
            elif requested is None or op.complete_index is None or op.complete_index < requested:
                kind = UNCOMMITTED_READ
            else:
                continue
            reported.add((txn.name, value))
            detail = {"key": key, "offset": offset, "value": value, **txn.named()}
            if kind == UNCOMMITTED_READ:
                detail.update(read_completed_at=op.complete_index, commit_requested_at=requested)
            yield Anomaly(kind, detail, [*txn.ops(), op])


def _lost_and_non_atomic(analysis: _Analysis) -> Iterable[Anomaly]:
    for txn in analysis.txns.values():
        missing = analysis.missing(txn)
        if not missing:
            continue
        if txn.outcome == COMMITTED:
            for key, value, witness in missing:
                detail: JsonDict = {"key": key, "value": value, "offset": analysis.place.get((key, value))}
                detail.update(txn.named())
                detail["shown_absent_by"] = witness.invoke_index
                yield Anomaly(LOST_WRITE, detail, [*txn.ops(), witness])
        absent = [
            (key, value, witness) for key, value, witness in missing if not analysis.visible_by.get(value)
        ]
        if txn.outcome != ABORTED and analysis.visible(txn) and absent:  # an aborted one: aborted-read
            seen = [(key, value) for key, value in txn.writes if analysis.visible_by.get(value)]
            readers = [analysis.visible_by[value][0] for _, value in seen]
            yield Anomaly(
                NON_ATOMIC,
                {
                    **txn.named(),
                    "visible": [list(pair) for pair in seen][:LISTED_MAX],
                    "missing": [[key, value] for key, value, _ in absent][:LISTED_MAX],
                },
                [*txn.ops(), *readers[:WITNESSES_PER_ITEM], *[w for _, _, w in absent][:WITNESSES_PER_ITEM]],
            )


def _duplicates(analysis: _Analysis) -> Iterable[Anomaly]:
    places: dict[Value, dict[tuple[str, int], list[Operation]]] = collections.defaultdict(dict)
    for key, log in analysis.log.items():
        for offset, by_value in log.items():
            for value, ops in by_value.items():
                places[value][(key, offset)] = ops
    for value in sorted(places, key=repr):
        where = places[value]
        if len(where) < 2:
            continue
        written = analysis.writer.get(value)
        detail: JsonDict = {"value": value, "places": sorted([key, offset] for key, offset in where)}
        if written is not None:
            detail.update(written[0].named())
        ops = [op for witnesses in where.values() for op in witnesses[:1]]
        yield Anomaly(DUPLICATE, detail, [*(written[0].ops() if written else []), *ops])


def _poll_order(analysis: _Analysis) -> Iterable[Anomaly]:
    for op in analysis.polls:
        start = int(op.invoke.get("offset"))
        records = records_of(op)
        went_back = backwards(records, start)
        if went_back:
            yield Anomaly(
                NONMONOTONIC_POLL,
                {"key": key_of(op), "poll_offset": start, "backwards": went_back[:LISTED_MAX]},
                [op],
            )


def _reordered(analysis: _Analysis) -> Iterable[Anomaly]:
    """A transaction's records of a key in the order produced; a transactional id's transactions apart."""
    placed: dict[str, dict[str, list[int]]] = {}  # txn name -> key -> offsets in production order
    for txn in analysis.txns.values():
        by_key: dict[str, list[int]] = collections.defaultdict(list)
        for key, value in txn.writes:
            offset = analysis.place.get((key, value))
            if offset is not None:
                by_key[key].append(offset)
        placed[txn.name] = by_key
        for key, offsets in sorted(by_key.items()):
            if any(b <= a for a, b in itertools.pairwise(offsets)):
                yield Anomaly(
                    REORDERED,
                    {**txn.named(), "key": key, "offsets_in_production_order": offsets[:LISTED_MAX]},
                    txn.ops(),
                )
    by_producer: dict[str, list[Txn]] = collections.defaultdict(list)
    for txn in analysis.txns.values():
        by_producer[txn.transactional_id].append(txn)
    for producer in sorted(by_producer):
        earlier: dict[str, tuple[int, Txn]] = {}  # key -> highest offset so far, and whose
        for txn in sorted(by_producer[producer], key=lambda t: t.op.invoke_index):
            for key, offsets in sorted(placed[txn.name].items()):
                before = earlier.get(key)
                if before is not None and min(offsets) < before[0]:
                    yield Anomaly(
                        REORDERED,
                        {
                            "transactional_id": producer,
                            "key": key,
                            "earlier_txn": before[1].name,
                            "earlier_offset": before[0],
                            "txn": txn.name,
                            "offset": min(offsets),
                        },
                        [*before[1].ops(), *txn.ops()],
                    )
                if before is None or max(offsets) > before[0]:
                    earlier[key] = (max(offsets), txn)


def _offsets(analysis: _Analysis) -> Iterable[Anomaly]:
    """Each committed-offset read against the transactions that sent offsets for its group and key.

    The read may return the offset of the last transaction whose commit was acknowledged before the read
    was invoked (the floor), or that of a transaction that may have committed after it (not aborted, its
    commit requested before the read completed, and not finished before the floor's commit began); with no
    floor, also none at all (null)."""
    senders: dict[tuple[str, str], list[tuple[Txn, int]]] = collections.defaultdict(list)
    for txn in analysis.txns.values():
        for group, key, offset in txn.offsets_sent:
            senders[(group, key)].append((txn, offset))
    for read in analysis.history.operations:
        if read.f != "committed" or read.type != "ok" or read.complete_index is None:
            continue
        group, key, value = str(read.invoke.get("group")), key_of(read), read.result("offset")
        sent = senders.get((group, key), [])
        floor = max(
            ((txn, offset) for txn, offset in sent if _acknowledged_before(txn, read.invoke_index)),
            key=lambda pair: _end_completed(pair[0]),
            default=None,
        )
        could = [
            (txn, offset)
            for txn, offset in sent
            if _may_have_committed(txn, read.complete_index) and (floor is None or _not_before(txn, floor[0]))
        ]
        allowed = {offset for _, offset in could} | ({None} if floor is None else set())
        if value in allowed:
            continue
        detail: JsonDict = {"group": group, "key": key, "read": value}
        committers = [t for t, o in sent if o == value and _may_have_committed(t, read.complete_index)]
        if value is not None and not committers:  # only aborted or not-yet-committing senders, or none
            culprit = next((t for t, o in sent if o == value), None)
            if culprit is not None:
                detail.update(culprit.named(), commit_requested_at=culprit.commit_requested_at)
            detail["read_completed_at"] = read.complete_index
            yield Anomaly(UNCOMMITTED_OFFSET, detail, [*(culprit.ops() if culprit else []), read])
            continue
        if floor is None:  # pragma: no cover - without a floor every possible committer is allowed
            raise AssertionError(f"committed read at {read.invoke_index}: {value!r} not allowed, no floor")
        detail.update(floor[0].named(), committed_offset=floor[1])
        yield Anomaly(LOST_OFFSET, detail, [*floor[0].ops(), read])


def _end_completed(txn: Txn) -> int:
    return -1 if txn.end is None or txn.end.complete_index is None else txn.end.complete_index


def _acknowledged_before(txn: Txn, index: int) -> bool:
    return txn.outcome == COMMITTED and 0 <= _end_completed(txn) < index


def _may_have_committed(txn: Txn, by_index: int) -> bool:
    requested = txn.commit_requested_at
    return txn.outcome != ABORTED and requested is not None and requested < by_index


def _not_before(txn: Txn, floor: Txn) -> bool:
    """`txn` did not end before `floor`'s commit was requested: its commit may have come after. A
    transaction of unknown outcome of another producer may commit any time after it was requested; one of
    the same producer ended before the producer's next transaction could begin."""
    if txn is floor or (txn.outcome == UNKNOWN and txn.transactional_id != floor.transactional_id):
        return True
    ended = _end_completed(txn)
    return ended < 0 or floor.commit_requested_at is None or ended > floor.commit_requested_at


def _duplicate_processing(analysis: _Analysis) -> Iterable[Anomaly]:
    consumers: dict[tuple[str, str, int], list[Txn]] = collections.defaultdict(list)
    for txn in analysis.txns.values():
        if not analysis.must_be_visible(txn):
            continue
        groups = sorted({group for group, _, _ in txn.offsets_sent})
        for group in groups:
            for key, offset, _ in txn.consumed:
                consumers[(group, key, offset)].append(txn)
    for (group, key, offset), txns in sorted(consumers.items()):
        if len(txns) < 2:
            continue
        yield Anomaly(
            DUPLICATE_PROCESSING,
            {"group": group, "key": key, "offset": offset, "txns": [t.name for t in txns]},
            [op for t in txns[:WITNESSES_PER_ITEM] for op in t.ops()],
        )


# ---------------------------------------------------------------------------------------------------
# Statistics and the entry point


def _stats(analysis: _Analysis) -> JsonDict:
    history = analysis.history
    by_f = outcomes_by_f(history.operations)
    outcomes: collections.Counter[str] = collections.Counter()
    for txn in analysis.txns.values():
        label = txn.outcome
        if txn.outcome == UNKNOWN:
            label = "unknown, visible" if analysis.visible(txn) else "unknown, not visible"
        elif txn.outcome == ABORTED:
            label = "aborted, " + ("deliberately" if txn.op.invoke.get("intent") == "abort" else "on error")
        outcomes[label] += 1
    uncommitted_views = [op for op in analysis.polls if not _read_committed(op)]
    aborted_in_log = {
        value
        for op in uncommitted_views
        for _, value in records_of(op)
        if (written := analysis.writer.get(value)) is not None and written[0].outcome == ABORTED
    }
    committed_writes = sum(len(t.writes) for t in analysis.txns.values() if analysis.must_be_visible(t))
    return {
        "events": len(history.events),
        "operations": {f: {**row, "total": sum(row.values())} for f, row in sorted(by_f.items())},
        "transactions": dict(sorted(outcomes.items())),
        "committed_writes": committed_writes,
        "acked_sends": committed_writes,  # what the queue's summary line calls them
        "read_values": len(analysis.visible_by),
        "read_committed_polls": len(analysis.committed_polls),
        "read_uncommitted_polls": len(uncommitted_views),
        "aborted_values_seen_by_read_uncommitted": len(aborted_in_log),
        "transactions_sending_offsets": sum(1 for t in analysis.txns.values() if t.offsets_sent),
        "committed_offset_reads": sum(
            1 for op in history.operations if op.f == "committed" and op.type == "ok"
        ),
        "complete_final_read_keys": sorted(analysis.final_reads),
    }


def check(history: History, examples_per_class: int = EXAMPLES_PER_CLASS) -> JsonDict:
    """Check a transactional history. Returns verdict, anomaly counts and examples, stats, availability."""
    analysis = _Analysis(history)
    found: list[Anomaly] = [
        *_reads(analysis),
        *_lost_and_non_atomic(analysis),
        *_duplicates(analysis),
        *inconsistent_offsets(analysis.log, lambda op: op),
        *_poll_order(analysis),
        *_reordered(analysis),
        *_offsets(analysis),
        *_duplicate_processing(analysis),
    ]

    def doubts() -> list[str]:
        reasons: list[str] = []
        if not any(analysis.must_be_visible(txn) for txn in analysis.txns.values()):
            reasons.append("no transaction committed: nothing was checked")
        elif not analysis.final_reads:
            reasons.append("no complete final read happened")
        maybe_committed = {
            key for txn in analysis.txns.values() if txn.outcome != ABORTED for key, _ in txn.writes
        }
        incomplete = sorted(maybe_committed - set(analysis.final_reads))
        if incomplete and analysis.final_reads:
            reasons.append(f"partitions without a complete final read: {incomplete}")
        return reasons

    return results(
        history,
        workload="txn",
        classes=CLASSES,
        found=found,
        names=_names,
        doubts=doubts,
        examples_per_class=examples_per_class,
        unseen={"count": 0},
        stats=_stats(analysis),
        warnings=analysis.warnings,
    )


def _names(anomalies: Sequence[Anomaly]) -> Iterable[str]:
    """The transactions (else partitions or groups) the anomalies name."""
    for anomaly in anomalies:
        detail: dict[str, Any] = anomaly.detail
        if "txn" in detail:
            yield f"txn {detail['txn']}"
        elif "txns" in detail:
            yield "txns " + " ".join(detail["txns"])
        elif "group" in detail:
            yield f"group {detail['group']} {detail['key']}"
        else:
            yield str(detail.get("key") or detail.get("places", ""))
