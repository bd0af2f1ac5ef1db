"""Availability, measured so that a machine's load cannot move the verdict: how long the cluster took to
acknowledge a write again after each fault window healed, against how long the nodes that window took
down took to report ready; and the share of writes acknowledged while no fault was active and every node
was back and ready. Pure: read from a history (docs/jepsen-history.md).

The harness sees each node it restarts or resumes answer ``GET /status/ready`` again and writes a nemesis
``ready`` event (``jepsen.nemesis``; ``value``: ``node``, ``since``, the history time of its restart or
resume, and ``ready_s``). A loaded machine slows a node's start as much as what follows it, so the time a
node took to report ready is the yardstick of the recovery after it:

- ``recoveries``: one per fault window (the faults started together, up to the stop that leaves none
  active). ``healed_at``: its heal began (its first stop, or the first restart its stops made, if
  earlier); ``ready_s``: from then until the last node the heal restarted or resumed reported ready (0
  when it restarted none: a partition, a clock, a disk healed); ``recovery_s``: from then until the first
  write (``WRITE_FS``) acknowledged; ``bound_s``: :func:`recovery_bound_s` of ``ready_s``. ``judged``:
  ``ok`` (acknowledged within the bound), ``slow`` (later, or none by the bound though the run went on
  past it: the next window had not begun), or ``cut`` (the next window, or the end of the writes, came
  before both: nothing to judge).
- ``fault_free``: the spans with no fault active and every node ready: before the first window, and from
  each window's settling (:data:`SETTLE_S` after its last node reported ready) to the next window or the
  end of the writes; the writes invoked and completed inside them, and the share acknowledged. A window
  whose restarted node never reported ready opens no span until the next heal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from jepsen.history import Event, History, JsonDict, Operation

# the operations that write: a record sent (queue, compaction, group and share workloads) and a
# transaction's records produced (the transactional workload's ``txn``)
WRITE_FS = ("send", "txn")
# raftlog.consensus.config.CoreConfig.election_timeout_max_ms, the nodes' default (jepsen may not import
# the server; tests/jepsen/test_jepsen_recovery.py checks the two agree): a partition group that lost its
# leader elects another within its longest election timeout of its replicas being up
ELECTION_TIMEOUT_MAX_S = 3.0
# a worker's next write: a Kafka client's reconnect backoff (reconnect.backoff.max.ms 1000 in every Kafka
# client the harness makes) or a worker's pause between two operations (at most 1.5 intervals:
# 0.3 s at the runner's default 30 operations a second over 6 workers, 0.2 s in the tests' runs)
CLIENT_NEXT_S = 1.5
# after the last node of a heal reported ready, the spans without faults begin once every partition
# group had its longest election timeout: before that a send may meet a partition still electing
SETTLE_S = ELECTION_TIMEOUT_MAX_S
# the run's last span without faults: the workers go on at least this long after the last heal settled,
# and until the span holds the writes the workload plans in that time (the nemesis holds them, at most
# FAULT_FREE_END_MAX_S), so that every run measures its writes on a settled cluster, however slow the
# machine, as --min-ends does for the transactions a checker needs
FAULT_FREE_END_S = 3.0
FAULT_FREE_END_MAX_S = 60.0


def recovery_bound_s(ready_s: float) -> float:
    """How long after a heal the cluster may take to acknowledge a write, given that the nodes the heal
    restarted took ``ready_s`` to report ready. A node reports ready once it knows the controller's
    metadata as committed: its process started, opened its logs and replayed its journal, and a
    controller leader (elected, when the fault took it) answered it. What is left before a write is
    acknowledged is more of the same work on the same machine, no more of it (its partition replicas
    open, catch up from their leaders or elect one, the first produce is replicated and fsynced): at most
    ``ready_s`` again, however loaded the machine, plus what no load shortens: an election's longest
    timeout and a client's next attempt. A heal that restarted nothing (``ready_s`` 0) leaves the
    election and the client."""
    return round(2 * ready_s + ELECTION_TIMEOUT_MAX_S + CLIENT_NEXT_S, 3)


@dataclass
class _Window:
    first_start: float
    last_start: float
    stops: list[Event] = field(default_factory=list)  # in order

    @property
    def last_stop(self) -> float:
        return self.stops[-1].time


def _windows(history: History) -> list[_Window]:
    """Fault windows: from a start when no fault is active to the stop that leaves none active."""
    windows: list[_Window] = []
    active: dict[str, int] = {}
    for event in history.nemesis:
        fault = str(event.get("fault"))
        if event.f == "start":
            began = event.get("began")
            at = min(event.time, float(began)) if isinstance(began, int | float) else event.time
            if not active:
                windows.append(_Window(at, event.time))
            elif windows:
                windows[-1].last_start = event.time
            active[fault] = active.get(fault, 0) + 1
        elif event.f == "stop" and fault in active:
            active[fault] -= 1
            if not active[fault]:
                del active[fault]
            windows[-1].stops.append(event)
    if windows and active:  # the history ends inside a window: it never healed
        windows[-1].stops.clear()
    return [w for w in windows if w.stops]


def _back(stop: Event) -> dict[str, float]:
    """The nodes a stop restarted or resumed (its ``back``: node -> when), and those it restarted that
    exited at once (its value's ``restarted``: node -> ``{"exited": true}``), which never came back."""
    back = stop.get("back")
    found = {str(n): float(t) for n, t in back.items()} if isinstance(back, dict) else {}
    value = stop.get("value")
    restarted = value.get("restarted") if isinstance(value, dict) else None
    for node, started in restarted.items() if isinstance(restarted, dict) else ():
        if isinstance(started, dict) and started.get("exited"):
            found.setdefault(str(node), stop.time)
    return found


def _writes(history: History) -> list[Operation]:
    return [op for op in history.operations if op.f in WRITE_FS]


def measure(history: History) -> JsonDict:
    """``recoveries`` and ``fault_free`` (the module docstring), for results.json's ``availability``."""
    writes = _writes(history)
    acks = sorted(op.completion.time for op in writes if op.type == "ok" and op.completion is not None)
    completions = [op.completion.time for op in writes if op.completion is not None]
    end = max(completions, default=0.0)
    windows = _windows(history)
    readies = [e for e in history.nemesis if e.f == "ready"]
    recoveries: list[JsonDict] = []
    spans: list[tuple[float, float]] = []
    span_start: float | None = 0.0
    for number, window in enumerate(windows):
        horizon = windows[number + 1].first_start if number + 1 < len(windows) else end
        if span_start is not None:
            spans.append((span_start, window.first_start))
        recovery = _recovery(window, readies, acks, horizon)
        recoveries.append(recovery)
        settled = recovery.pop("_settled")
        span_start = None if settled is None else settled + SETTLE_S
    if span_start is not None:
        spans.append((span_start, end))
    operations = [op for op in history.operations if not op.invoke.get("final")]
    return {"recoveries": recoveries, "fault_free": _fault_free(spans, operations)}


def _recovery(window: _Window, readies: Sequence[Event], acks: Sequence[float], horizon: float) -> JsonDict:
    back: dict[str, float] = {}
    for stop in window.stops:
        back.update(_back(stop))
    healed_at = min([window.stops[0].time, *back.values()])
    ready_at: dict[str, float] = {}  # each node's first ready event of the life (or resume) it came back in
    for event in readies:
        value = event.get("value")
        node, since = (value.get("node"), value.get("since")) if isinstance(value, dict) else (None, None)
        if node in back and isinstance(since, int | float) and abs(since - back[node]) < 1e-3:
            ready_at.setdefault(node, event.time)
    not_ready = sorted(set(back) - set(ready_at))
    ready_s = max([t - healed_at for t in ready_at.values()], default=0.0)
    bound_s = recovery_bound_s(ready_s)
    first = next((t for t in acks if t >= healed_at), None)
    recovery_s = None if first is None or first > horizon else round(first - healed_at, 3)
    if recovery_s is not None:
        judged = "ok" if recovery_s <= bound_s else "slow"
    elif back and not ready_at:  # no node it took came back ready: nothing to measure against
        judged = "cut"
    else:
        judged = "slow" if horizon - healed_at > bound_s else "cut"
    settled = None if not_ready else max([window.last_stop, *ready_at.values()])
    return {
        "healed_at": round(healed_at, 3),
        "back": sorted(back),
        "ready_s": round(ready_s, 3),
        "nodes_ready_s": {n: round(t - healed_at, 3) for n, t in sorted(ready_at.items())},
        "not_ready": not_ready,
        "recovery_s": recovery_s,
        "bound_s": bound_s,
        "judged": judged,
        "_settled": settled,
    }


def _fault_free(spans: Iterable[tuple[float, float]], operations: Sequence[Operation]) -> JsonDict:
    """The writes invoked and completed inside the spans (one still in flight at a span's end is left
    out: the fault that followed may have decided it), and the operations of every other ``f`` alike."""
    listed: list[JsonDict] = []
    by_f: dict[str, dict[str, int]] = {}
    seconds = 0.0
    for start, end in spans:
        if end <= start:
            continue
        inside = [
            op
            for op in operations
            if start <= op.invoke.time and op.completion is not None and op.completion.time <= end
        ]
        writes = [op for op in inside if op.f in WRITE_FS]
        ok = sum(1 for op in writes if op.type == "ok")
        listed.append({"start": round(start, 3), "end": round(end, 3), "writes": len(writes), "ok": ok})
        for op in inside:
            row = by_f.setdefault(op.f, {"ok": 0, "fail": 0, "info": 0})
            row[op.type] += 1
        seconds += end - start
    total = sum(span["writes"] for span in listed)
    total_ok = sum(span["ok"] for span in listed)
    return {
        "spans": listed,
        "seconds": round(seconds, 3),
        "writes": total,
        "ok": total_ok,
        "ok_fraction": round(total_ok / total, 4) if total else None,
        "ops": {f: by_f[f] for f in sorted(by_f)},
    }


def problems(measured: JsonDict) -> list[str]:
    """What in ``measure``'s figures shows a recovery slower than its bound: each slow window, named."""
    found = []
    for number, recovery in enumerate(measured["recoveries"], start=1):
        if recovery["judged"] == "slow":
            took = recovery["recovery_s"]
            found.append(
                f"window {number} (healed at {recovery['healed_at']} s): "
                + (
                    f"first write acknowledged after {took} s"
                    if took is not None
                    else "no write acknowledged"
                )
                + f", bound {recovery['bound_s']} s (nodes ready after {recovery['ready_s']} s)"
            )
    return found
