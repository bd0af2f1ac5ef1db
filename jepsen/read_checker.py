"""Reads checked against what was acknowledged before them and against the log the cluster kept, and the
proof that a paused leader's window landed (docs/jepsen-history.md, jepsen/README.md "Checker").

A leader answers a read from its own state; a leader that was deposed without knowing it (its process
paused past the election timeout, or cut off) would answer from a state older than what its successor
acknowledged meanwhile (raftlog.consensus.core_reads, "Reads"). Two classes catch what such a read shows:

- ``stale-read``: a poll answered with a partition high watermark below what some operation completed
  before the poll began had already shown of the partition: an acknowledged send's offset + 1, a record
  read at an offset + 1, or a high watermark answered (Kafka's high watermark never goes back, and a
  read begun after a write was acknowledged must see it). The HTTP door answers every fetch with its high
  watermark (``X-Raftlog-High-Watermark``, recorded as the poll's ``high_watermark``); a poll whose
  records reach past the high watermark it answered is one too.
- ``read-not-kept``: a poll during the run returned a record at an offset the key's complete final read
  says the log never reached (the final log is shorter): a read of a record the cluster did not keep.
  (A record read at an offset the final log holds differently is ``inconsistent-offsets``; an
  acknowledged one read and then gone, a ``lost-write``.)

``paused_leaders`` is the proof that the pause nemesis met a leader: for each pause whose start event
names the keys its node led (``led``: term and high watermark, asked of the node just before SIGSTOP),
the keys whose leader at the stop event (``leaders``, asked of the other nodes just before SIGCONT) is
another node in a higher term, how long it was paused, and the reads asked of the paused node then
(``probes``: a poll of each such key from its old high watermark, sent just before SIGCONT and answered
by the node once it ran again): answered (and by which node) or refused.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Final

from jepsen.analysis import Analysis
from jepsen.history import History, JsonDict, Operation
from jepsen.results import Anomaly, freeze, key_of, records_of

STALE_READ: Final = "stale-read"
READ_NOT_KEPT: Final = "read-not-kept"

CLASSES: Final[dict[str, str]] = {
    STALE_READ: "a poll answering a high watermark below what an operation completed before it began had "
    "shown of its key (an acknowledged send's or a read record's offset + 1, or a high watermark answered), "
    "or below a record it returned itself",
    READ_NOT_KEPT: "a poll during the run returning a record (not an acknowledged send's: that is a "
    "lost-write) at an offset that the key's complete final read says the log never reached",
}


def high_watermark_of(op: Operation) -> int | None:
    """The high watermark an ok poll's answer carried (HTTP fetches), None when it carried none."""
    if op.type != "ok":
        return None
    value = op.result("high_watermark")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shown(op: Operation) -> int | None:
    """How far the log reached, by what ``op`` showed once it completed: None if it showed nothing."""
    if op.type != "ok":
        return None
    if op.f == "send":
        return int(op.result("offset")) + 1
    reached = [offset + 1 for offset, _ in records_of(op)]
    answered = high_watermark_of(op)
    if answered is not None:
        reached.append(answered)
    return max(reached, default=None)


def stale_reads(analysis: Analysis) -> Iterable[Anomaly]:
    """Per key: each poll's answered high watermark against the most any operation completed before the
    poll's invoke had shown (a sweep in history order)."""
    shown: dict[str, list[tuple[int, int, Operation]]] = collections.defaultdict(list)
    for op in [*analysis.acked, *analysis.polls]:
        reached = _shown(op)
        if reached is not None and op.complete_index is not None:
            shown[key_of(op)].append((op.complete_index, reached, op))
    answered: dict[str, list[tuple[int, int, Operation]]] = collections.defaultdict(list)
    for op in analysis.polls:
        high_watermark = high_watermark_of(op)
        if high_watermark is not None:
            answered[key_of(op)].append((op.invoke_index, high_watermark, op))
    for key in sorted(answered):
        before = sorted(shown.get(key, []), key=lambda item: item[0])
        position, best, best_op = 0, -1, None
        for invoke_index, high_watermark, op in sorted(answered[key], key=lambda item: item[0]):
            while position < len(before) and before[position][0] < invoke_index:
                _, reached, witness = before[position]
                if reached > best:
                    best, best_op = reached, witness
                position += 1
            own = max((offset + 1 for offset, _ in records_of(op)), default=0)
            if own > high_watermark:
                yield Anomaly(
                    STALE_READ,
                    {
                        "key": key,
                        "high_watermark": high_watermark,
                        "records_to": own,
                        "node": op.result("node"),
                    },
                    [op],
                )
            elif best_op is not None and best > high_watermark:
                yield Anomaly(
                    STALE_READ,
                    {
                        "key": key,
                        "high_watermark": high_watermark,
                        "shown_before": best,
                        "node": op.result("node"),
                        "served_by": op.result("leader"),
                    },
                    [best_op, op],
                )


def reads_not_kept(analysis: Analysis) -> Iterable[Anomaly]:
    """Records polls returned at offsets at or past the end of their key's complete final read."""
    for key in sorted(analysis.final_reads):
        final = analysis.final_reads[key]
        if final.end_poll is None:
            continue
        end = int(final.end_poll.invoke.get("offset"))
        acked = {freeze(op.invoke.get("value")) for op in analysis.acked if key_of(op) == key}
        for op in analysis.polls:
            if key_of(op) != key or op.invoke.get("final") is True:
                continue
            # (an acknowledged record read and then gone is a lost-write)
            past = sorted(
                {offset for offset, value in records_of(op) if offset >= end and value not in acked}
            )
            if past:
                yield Anomaly(
                    READ_NOT_KEPT,
                    {"key": key, "offsets": past[:32], "final_read_end": end},
                    [op, final.end_poll],
                )


def paused_leaders(history: History) -> list[JsonDict]:
    """The pause nemesis' windows in which it paused a leader that another replaced (see the module
    docstring), each with the reads asked of the paused node and how they were answered."""
    by_process = {op.process: op for op in history.operations}  # (a probe's process makes one poll)
    starts: dict[str, JsonDict] = {}  # node -> what it led, by the start event of its pause
    start_times: dict[str, float] = {}
    found: list[JsonDict] = []
    for event in history.nemesis:
        value = event.get("value")
        if event.get("fault") != "pause" or not isinstance(value, dict):
            continue
        if event.f == "start":
            for node, led in (value.get("led") or {}).items():
                starts[node], start_times[node] = led, event.time
            continue
        if event.f != "stop":
            continue
        for node, now in (value.get("leaders") or {}).items():
            led = starts.pop(node, None)
            if led is None:
                continue
            replaced = {
                key: state
                for key, state in now.items()
                if key in led and state.get("leader") not in (None, node) and _later(state, led[key])
            }
            reads = [by_process[p] for p in (value.get("probes") or {}).get(node, []) if p in by_process]
            outcomes = collections.Counter(op.type for op in reads)
            found.append(
                {
                    "node": node,
                    "paused_s": round(event.time - start_times[node], 3),
                    "led": sorted(led),
                    "replaced": {key: state for key, state in sorted(replaced.items())},
                    "reads": {kind: outcomes.get(kind, 0) for kind in ("ok", "fail", "info")},
                    "answered_by": sorted({str(op.result("leader")) for op in reads if op.type == "ok"}),
                }
            )
    return found


def _later(now: JsonDict, then: JsonDict) -> bool:
    """``now``'s term is above ``then``'s (both as the partition's state gave them)."""
    term, before = now.get("term"), then.get("term")
    return isinstance(term, int) and isinstance(before, int) and term > before
