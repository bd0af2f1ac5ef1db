"""The history checker: Jepsen's kafka error classes, committed-offset and dense-offset checks, availability.

`check(history)` is a pure function of a validated `History` (see jepsen/history.py) and returns a
JSON-able dict. The anomaly classes follow jepsen.tests.kafka (lost-write, duplicate, inconsistent-offsets,
nonmonotonic-poll, nonmonotonic-send, poll-skip, G1a, unseen), adapted to what this service promises
(docs/jepsen-history.md, api/README.md): offsets are dense and chosen by the client on each poll,
non-idempotent retries may legitimately duplicate, idempotent ones may not. Definitions are in CLASSES and
jepsen/README.md ("Checker").

A history of the compaction workload (its sends name a `record_key`: jepsen/compact_workload.py) is
checked as a compacted log: records overwritten by a later one of their key may be gone, so lost-write,
unseen, poll-skip and dense-offset do not apply; instead every complete final read must end each record
key with its last acknowledged write or a later one of unknown outcome (`final-value`), and a poll during
the run may pass over an acknowledged record only when a later record of its key is known (`lost-latest`):
jepsen/compact_checker.py. Offsets, values and order are checked as for the queue. The indexes over the
history every check reads are jepsen/analysis.py. Reads are also held to what was acknowledged before them
and to the log the cluster kept (stale-read, read-not-kept), and the pause nemesis' proof that it paused a
leader another replaced is given in the stats (``paused_leaders``): jepsen/read_checker.py.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Final

from jepsen.analysis import Analysis
from jepsen.compact_checker import (
    FINAL_VALUE,
    LOST_LATEST,
    Compacted,
    final_values,
    is_compacted,
    lost_latest,
)
from jepsen.history import History, JsonDict, Operation, Process
from jepsen.read_checker import CLASSES as READ_CLASSES
from jepsen.read_checker import paused_leaders, reads_not_kept, stale_reads
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
    fractions,
    freeze,
    inconsistent_offsets,
    key_of,
    outcomes_by_f,
    records_of,
    results,
)

NONMONOTONIC_SEND: Final = "nonmonotonic-send"
POLL_SKIP: Final = "poll-skip"
G1A: Final = "G1a"
UNSEEN: Final = "unseen"
COMMITTED_OFFSET_REGRESSION: Final = "committed-offset-regression"
DENSE_OFFSET: Final = "dense-offset"

CLASSES: Final[dict[str, str]] = {
    LOST_WRITE: "an acknowledged send is missing: never read although an offset >= its own was read in its "
    "key, or absent from a complete final read of its key",
    DUPLICATE: "a value at two offsets of a key (more copies than its non-failed attempts can explain) "
    "or in two keys",
    INCONSISTENT_OFFSETS: "one offset of a key holding two values across sends and polls",
    NONMONOTONIC_POLL: "a poll whose offsets are not strictly increasing or start below the offset asked for",
    NONMONOTONIC_SEND: "a process's consecutive acknowledged sends to a key getting non-increasing offsets",
    POLL_SKIP: "a poll that skips offsets known to exist (from its start offset or between records)",
    G1A: "a poll returning a value whose every send attempt definitely failed",
    PHANTOM_READ: "a poll returning a value that was never sent",
    UNSEEN: "an acknowledged send never read, with no offset >= its own read either, although a complete "
    "final read of its key happened after the acknowledgement (unresolved ones are only counted)",
    COMMITTED_OFFSET_REGRESSION: "a group's committed offset for a key observed lower than an earlier "
    "observation (or lower than an acknowledged commit asked for) without a reset in between",
    DENSE_OFFSET: "a hole in a key's offsets: a poll gap over offsets nobody ever saw, or a gap in the "
    "union of the final reads below the highest offset they returned",
    FINAL_VALUE: "compacted topics: a complete final read whose last record of a record key is not that "
    "key's last acknowledged write (value or tombstone) nor a write of unknown outcome at a later offset",
    LOST_LATEST: "compacted topics: a poll passing over an acknowledged record's offset without returning "
    "it while no later record of its record key is known (compaction may only remove superseded records)",
    **READ_CLASSES,
}
# The classes that hold in a compacted log too (a record superseded by a later one of its key may go).
COMPACTED_CLASSES: Final = frozenset(CLASSES) - {LOST_WRITE, UNSEEN, POLL_SKIP, DENSE_OFFSET}


# ---------------------------------------------------------------------------------------------------
# The checks. Each takes the analysis and yields anomalies.


def _duplicates(analysis: Analysis) -> Iterable[Anomaly]:
    places: dict[Value, dict[tuple[str, int], list[Operation]]] = collections.defaultdict(dict)
    for key, log in analysis.log.items():
        for offset, by_value in log.items():
            for value, witnesses in by_value.items():
                places[value][(key, offset)] = [w.op for w in witnesses[:WITNESSES_PER_ITEM]]
    for value in sorted(places, key=repr):
        where = places[value]
        if len(where) < 2:
            continue
        keys = sorted({key for key, _ in where})
        attempts = [op for op in analysis.attempts.get(value, []) if op.type != "fail"]
        plain = sum(1 for op in attempts if "producer_id" not in op.invoke.raw)
        idempotent = any("producer_id" in op.invoke.raw for op in attempts)
        copies_possible = plain + (1 if idempotent else 0)
        if len(keys) == 1 and len(where) <= copies_possible:
            analysis.retry_duplicates += 1  # a non-idempotent retry after a timeout may append it again
            continue
        ops = [op for witnesses in where.values() for op in witnesses] + attempts
        yield Anomaly(
            DUPLICATE,
            {
                "value": value,
                "keys": keys,
                "offsets": sorted(offset for _, offset in where),
                "send_attempts": len(analysis.attempts.get(value, [])),
                "copies_explained": copies_possible,
            },
            ops,
        )


def _lost_and_unseen(analysis: Analysis) -> tuple[list[Anomaly], list[Anomaly], list[Operation]]:
    """Lost writes, unseen writes a complete final read should have returned, and unresolved unseen ones."""
    lost: list[Anomaly] = []
    unseen: list[Anomaly] = []
    unresolved: list[Operation] = []
    for op in analysis.acked:
        key = key_of(op)
        value = freeze(op.invoke.get("value"))
        offset = int(op.result("offset"))
        acked_at = op.complete_index
        if acked_at is None:  # pragma: no cover - ok operations always have a completion
            raise AssertionError(f"ok send at {op.invoke_index} without completion")
        read_by = analysis.read_values.get(key, {}).get(value, [])
        max_read = analysis.max_read.get(key)
        final = analysis.final_reads.get(key)
        if not read_by and max_read is not None and max_read.offset >= offset:
            lost.append(
                Anomaly(
                    LOST_WRITE,
                    {"key": key, "value": value, "offset": offset, "max_read_offset": max_read.offset},
                    [op, max_read.op],
                )
            )
        elif final is not None and final.covers(offset, acked_at) and value not in final.values:
            end_poll = final.end_poll
            if end_poll is None:  # pragma: no cover - covers() requires it
                raise AssertionError("final read without end poll")
            detail: JsonDict = {
                "key": key,
                "value": value,
                "offset": offset,
                "final_read_start": final.start,
                "final_read_end": int(end_poll.invoke.get("offset")),
            }
            context = [op, end_poll, *[p for p in final.polls if _spans(p, offset)][:1]]
            if read_by:
                detail["read_before_by"] = [p.invoke_index for p in read_by[:WITNESSES_PER_ITEM]]
                lost.append(Anomaly(LOST_WRITE, detail, [*context, *read_by[:1]]))
            else:
                unseen.append(Anomaly(UNSEEN, detail, context))
        elif not read_by:
            unresolved.append(op)
    return lost, unseen, unresolved


def _spans(poll: Operation, offset: int) -> bool:
    records = records_of(poll)
    return bool(records) and int(poll.invoke.get("offset")) <= offset <= records[-1][0]


def _g1a_and_phantoms(analysis: Analysis) -> Iterable[Anomaly]:
    reported: set[tuple[str, Value]] = set()
    for op in analysis.polls:
        key = key_of(op)
        for offset, value in records_of(op):
            if (key, value) in reported:
                continue
            attempts = analysis.attempts.get(value, [])
            if not attempts:
                reported.add((key, value))
                yield Anomaly(PHANTOM_READ, {"key": key, "value": value, "offset": offset}, [op])
            elif all(attempt.type == "fail" for attempt in attempts):
                reported.add((key, value))
                yield Anomaly(
                    G1A,
                    {"key": key, "value": value, "offset": offset, "failed_sends": len(attempts)},
                    [*attempts[:WITNESSES_PER_ITEM], op],
                )


def _poll_order(analysis: Analysis, dense: bool = True) -> Iterable[Anomaly]:
    """nonmonotonic-poll, and (a dense log: ``dense``) poll-skip and per-poll dense-offset holes, one
    check over each ok poll."""
    previous: dict[tuple[Process, str], Operation] = {}
    for op in analysis.polls:
        key = key_of(op)
        start = int(op.invoke.get("offset"))
        records = records_of(op)
        before = previous.get((op.process, key))
        context = [before] if before is not None and _continues(before, start) else []
        if records:
            previous[(op.process, key)] = op
        went_back = backwards(records, start)
        if went_back:
            yield Anomaly(
                NONMONOTONIC_POLL,
                {"key": key, "poll_offset": start, "backwards": went_back[:LISTED_MAX]},
                [*context, op],
            )
        if not dense:
            continue
        skipped: list[int] = []
        holes: list[list[int]] = []
        expected = start
        witnesses: list[Operation] = []
        for offset in sorted({offset for offset, _ in records}):  # order is nonmonotonic-poll's business
            if offset > expected:
                known = analysis.known_between(key, expected, offset)
                if known:
                    skipped.extend(known)
                    witnesses.extend(analysis.witness_ops(key, known[0])[:1])
                else:
                    holes.append([expected, offset - 1])
            expected = max(expected, offset + 1)
        if skipped:
            yield Anomaly(
                POLL_SKIP,
                {"key": key, "poll_offset": start, "skipped": skipped[:LISTED_MAX]},
                [*context, op, *witnesses[:WITNESSES_PER_ITEM]],
            )
        if holes:
            yield Anomaly(DENSE_OFFSET, {"key": key, "poll_offset": start, "holes": holes[:LISTED_MAX]}, [op])


def _continues(before: Operation, start: int) -> bool:
    records = records_of(before)
    return bool(records) and start == records[-1][0] + 1


def _final_read_gaps(analysis: Analysis) -> Iterable[Anomaly]:
    """The final reads of a key claim the log runs from their start to their end: all of it must be read."""
    for key in sorted(analysis.final_reads):
        final = analysis.final_reads[key]
        spans = [(int(p.invoke.get("offset")), records_of(p)[-1][0]) for p in final.polls if records_of(p)]
        boundaries = sorted(final.records)
        end = None if final.end_poll is None else int(final.end_poll.invoke.get("offset"))
        if end is not None and end > max([final.start, *(offset + 1 for offset in boundaries)]):
            boundaries.append(end)  # the log ends at `end`: everything below it must have been returned
        gaps: list[list[int]] = []
        expected = final.start
        for offset in boundaries:
            if offset > expected and not any(low <= expected and offset <= high for low, high in spans):
                gaps.append([expected, offset - 1])  # gaps inside one poll are reported per poll
            expected = max(expected, offset + 1)
        if gaps:
            context = final.polls[:WITNESSES_PER_ITEM]
            yield Anomaly(
                DENSE_OFFSET,
                {
                    "key": key,
                    "final_read_start": final.start,
                    "final_read_end": end,
                    "gaps": gaps[:LISTED_MAX],
                },
                [*context, *([final.end_poll] if final.end_poll is not None else [])],
            )


def _nonmonotonic_sends(analysis: Analysis) -> Iterable[Anomaly]:
    last: dict[tuple[Process, str], Operation] = {}
    first_attempt = {value: min(op.invoke_index for op in ops) for value, ops in analysis.attempts.items()}
    for op in analysis.acked:
        key = key_of(op)
        before = last.get((op.process, key))
        last[(op.process, key)] = op
        if before is None:
            continue
        offset, previous_offset = int(op.result("offset")), int(before.result("offset"))
        if offset > previous_offset:
            continue
        if first_attempt[freeze(op.invoke.get("value"))] <= before.invoke_index:
            continue  # a retry of an older value may get its original, lower offset back
        yield Anomaly(
            NONMONOTONIC_SEND,
            {"key": key, "process": op.process, "offsets": [previous_offset, offset]},
            [before, op],
        )


@dataclasses.dataclass(frozen=True)
class _Observation:
    op: Operation
    offset: int  # -1 for "no committed offset" (null)
    is_read: bool  # a `committed` read; an acknowledged commit only bounds the stored offset from below


def _committed_regressions(analysis: Analysis) -> Iterable[Anomaly]:
    observations: dict[tuple[str, str], list[_Observation]] = collections.defaultdict(list)
    resets: dict[tuple[str, str], list[Operation]] = collections.defaultdict(list)
    for op in analysis.history.operations:
        if op.f not in ("commit", "committed"):
            continue
        group_key = (str(op.invoke.get("group")), key_of(op))
        if op.f == "commit" and op.invoke.get("reset") is True:
            if op.type != "fail":
                resets[group_key].append(op)
            continue
        if op.type != "ok":
            continue
        if op.f == "commit":
            asked, stored = int(op.invoke.get("offset")), int(op.result("committed"))
            if stored < asked:
                yield Anomaly(
                    COMMITTED_OFFSET_REGRESSION,
                    {"group": group_key[0], "key": group_key[1], "offsets": [asked, stored]},
                    [op],
                )
            observations[group_key].append(_Observation(op, max(asked, stored), is_read=False))
        else:
            offset = op.result("offset")
            observations[group_key].append(_Observation(op, -1 if offset is None else int(offset), True))
    for group_key in sorted(observations):
        yield from _regressions_of(group_key, observations[group_key], resets.get(group_key, []))


def _regressions_of(
    group_key: tuple[str, str], observations: list[_Observation], resets: list[Operation]
) -> Iterable[Anomaly]:
    """A read O2 regresses if some O1 completed before O2 was invoked, saw more, and no reset overlaps them.

    O1 is a read or an acknowledged commit (after which the stored offset is at least what it asked for);
    only reads are checked as O2, since a commit's answer may echo the request rather than the stored value.

    A reset excuses O2 when it was invoked before O2 completed; it then hides every O1 invoked before the
    reset completed (a pending reset hides everything before it). A max-Fenwick tree over O1's invoke
    index answers "the highest O1 invoked after the barrier and completed before O2's invoke".
    """
    size = max((o.op.complete_index or 0) for o in observations) + 2
    tree: list[tuple[int, int]] = [(-2, -1)] * (size + 1)  # (offset, observation position), reversed index

    def update(invoke_index: int, item: tuple[int, int]) -> None:
        position = size - invoke_index
        while position <= size:
            tree[position] = max(tree[position], item)
            position += position & -position

    def query_after(barrier: int) -> tuple[int, int]:  # max over invoke_index > barrier
        best, position = (-2, -1), size - barrier - 1
        while position > 0:
            best = max(best, tree[position])
            position -= position & -position
        return best

    by_completion = sorted(range(len(observations)), key=lambda i: observations[i].op.complete_index or 0)
    by_invoke = sorted(range(len(observations)), key=lambda i: observations[i].op.invoke_index)
    added = 0
    for i in by_invoke:
        later = observations[i]
        if not later.is_read:
            continue
        while added < len(by_completion):
            earlier = observations[by_completion[added]]
            if (earlier.op.complete_index or 0) >= later.op.invoke_index:
                break
            update(earlier.op.invoke_index, (earlier.offset, by_completion[added]))
            added += 1
        later_complete = later.op.complete_index or 0
        barrier = -1
        for reset in resets:
            if reset.invoke_index < later_complete:
                done = reset.complete_index
                barrier = max(barrier, size - 1 if done is None else done)
        if barrier >= size - 1:
            continue
        best_offset, position = query_after(barrier)
        if position >= 0 and best_offset > later.offset:
            earlier = observations[position]
            yield Anomaly(
                COMMITTED_OFFSET_REGRESSION,
                {
                    "group": group_key[0],
                    "key": group_key[1],
                    "offsets": [_show(earlier.offset), _show(later.offset)],
                },
                [earlier.op, later.op],
            )


def _show(offset: int) -> int | None:
    return None if offset < 0 else offset


# ---------------------------------------------------------------------------------------------------
# Statistics


def _stats(analysis: Analysis) -> JsonDict:
    history = analysis.history
    read_values = {(key, value) for key, values in analysis.read_values.items() for value in values}
    return {
        "events": len(history.events),
        "operations": fractions(outcomes_by_f(history.operations)),
        "nemesis_events": len(history.nemesis),
        "keys": sorted({op.key for op in history.operations if op.key is not None}),
        "send_attempts": len(analysis.sends),
        "distinct_values_sent": len(analysis.attempts),
        "acked_sends": len(analysis.acked),
        "ok_polls": len(analysis.polls),
        "read_values": len(read_values),
        "duplicates_explained_by_retries": analysis.retry_duplicates,
        "final_read_keys": sorted(analysis.final_reads),
        "complete_final_read_keys": sorted(
            k for k, r in analysis.final_reads.items() if r.end_poll is not None
        ),
        "paused_leaders": paused_leaders(history),
    }


# ---------------------------------------------------------------------------------------------------
# The entry point


def check(history: History, examples_per_class: int = EXAMPLES_PER_CLASS) -> JsonDict:
    """Check a history. Returns verdict, anomaly counts and examples, unseen, stats and availability."""
    analysis = Analysis(history)
    compacted = Compacted(analysis) if is_compacted(analysis) else None
    if compacted is None:
        lost, unseen, unresolved = _lost_and_unseen(analysis)
        particular = [*lost, *unseen, *_final_read_gaps(analysis)]
    else:
        unseen, unresolved = [], []
        particular = [*final_values(compacted), *lost_latest(compacted)]
    found: list[Anomaly] = [
        *particular,
        *_duplicates(analysis),
        *inconsistent_offsets(analysis.log, lambda witness: witness.op),
        *_g1a_and_phantoms(analysis),
        *_poll_order(analysis, dense=compacted is None),
        *_nonmonotonic_sends(analysis),
        *_committed_regressions(analysis),
        *stale_reads(analysis),
        *reads_not_kept(analysis),
    ]

    def doubts() -> list[str]:
        reasons: list[str] = []
        if analysis.sends and not analysis.final_reads:
            reasons.append("no final read happened")
        complete = _complete_final_keys(analysis) if compacted is None else compacted.complete_keys()
        incomplete = sorted({key_of(op) for op in analysis.acked} - complete)
        if incomplete and analysis.final_reads:
            reasons.append(f"keys without a complete final read (a final poll returning []): {incomplete}")
        if unresolved:
            reasons.append(f"{len(unresolved)} acknowledged sends never read and not covered by a final read")
        return reasons

    unseen_by_key: dict[str, list[Value]] = collections.defaultdict(list)
    for op in unresolved:
        unseen_by_key[key_of(op)].append(freeze(op.invoke.get("value")))
    for anomaly in unseen:
        unseen_by_key[anomaly.detail["key"]].append(anomaly.detail["value"])
    return results(
        history,
        workload="queue" if compacted is None else "compact",
        classes=CLASSES,
        found=found,
        names=_names,
        doubts=doubts,
        examples_per_class=examples_per_class,
        unseen={
            "count": len(unresolved) + len(unseen),
            "missing_from_final_read": len(unseen),
            "by_key": {key: len(values) for key, values in sorted(unseen_by_key.items())},
            "values": {key: values[:LISTED_MAX] for key, values in sorted(unseen_by_key.items())},
        },
        stats=_stats(analysis),
    )


def _names(anomalies: Sequence[Anomaly]) -> Iterable[str]:
    """The keys (and record keys) the anomalies name."""
    for anomaly in anomalies:
        detail = anomaly.detail
        keys = [detail["key"]] if "key" in detail else list(detail.get("keys", []))
        for key in keys:
            yield f"{key} {detail['record_key']}" if "record_key" in detail else str(key)


def _complete_final_keys(analysis: Analysis) -> set[str]:
    return {key for key, read in analysis.final_reads.items() if read.end_poll is not None}
