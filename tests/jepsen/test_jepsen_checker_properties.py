"""Property tests: histories of a correct simulated log are always valid; one mutation makes them invalid."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jepsen_history_builder import HistoryBuilder

from jepsen.checker import check
from jepsen.history import build

KEYS = ("t0/0", "t0/1")
GROUPS = ("g1", "g2")
PROCESSES = 4
FAULTS = ("kill", "partition", "pause")


@dataclasses.dataclass
class SimulatedCluster:
    """A correct cluster: dense append-only logs, idempotent producers, monotonic committed offsets."""

    logs: dict[str, list[int]] = dataclasses.field(default_factory=lambda: {k: [] for k in KEYS})
    dedup: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)  # (producer, seq) -> offset
    committed: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)

    def append(self, key: str, value: int, producer: tuple[int, int] | None) -> int:
        if producer is not None and producer in self.dedup:
            return self.dedup[producer]
        self.logs[key].append(value)
        offset = len(self.logs[key]) - 1
        if producer is not None:
            self.dedup[producer] = offset
        return offset


send_step = st.tuples(
    st.just("send"),
    st.integers(0, PROCESSES - 1),
    st.sampled_from(KEYS),
    st.sampled_from(["ok", "ok", "ok", "fail", "info-applied", "info-lost"]),
    st.booleans(),  # idempotent
    st.booleans(),  # retry after an info
)
poll_step = st.tuples(
    st.just("poll"),
    st.integers(0, PROCESSES - 1),
    st.sampled_from(KEYS),
    st.integers(0, 6),
    st.integers(1, 4),
)
commit_step = st.tuples(
    st.just("commit"),
    st.integers(0, PROCESSES - 1),
    st.sampled_from(KEYS),
    st.sampled_from(GROUPS),
    st.integers(0, 8),
    st.booleans(),  # reset
    st.booleans(),  # read back with `committed` instead
)
nemesis_step = st.tuples(st.just("nemesis"), st.sampled_from(FAULTS))
# An operation of a "slow" process takes effect at its invoke and completes after the next step.
slow_step = st.tuples(
    st.just("slow"),
    st.sampled_from(["send", "poll", "committed"]),
    st.sampled_from(KEYS),
    st.sampled_from(GROUPS),
    st.integers(0, 6),
)
steps = st.lists(
    st.one_of(send_step, send_step, poll_step, poll_step, commit_step, nemesis_step, slow_step), max_size=40
)
SLOW_PROCESSES = (PROCESSES + 1, PROCESSES + 2)


def simulate(plan: list[tuple[Any, ...]]) -> HistoryBuilder:
    cluster = SimulatedCluster()
    h = HistoryBuilder()
    value = 0
    sequence = 0
    faults: set[str] = set()
    carry: tuple[int, dict[str, Any]] | None = None  # a slow operation's completion, due after this step
    for position, step in enumerate(plan):
        waiting, carry = carry, None
        kind = step[0]
        if kind == "slow":
            _, f, key, group, start = step
            slow = SLOW_PROCESSES[position % 2]
            if f == "send":
                value += 1
                h.invoke(slow, "send", key=key, value=value)
                carry = (slow, {"offset": cluster.append(key, value, None)})
            elif f == "poll":
                log = cluster.logs[key]
                start = min(start, len(log))
                h.invoke(slow, "poll", key=key, offset=start)
                carry = (slow, {"records": [[o, log[o]] for o in range(start, len(log))]})
            else:
                h.invoke(slow, "committed", key=key, group=group)
                carry = (slow, {"offset": cluster.committed.get((group, key))})
        elif kind == "send":
            _, process, key, outcome, idempotent, retry = step
            value += 1
            sequence += 1
            producer = (process, sequence) if idempotent else None
            extra = {"producer_id": process, "sequence": sequence} if idempotent else {}
            if outcome == "ok":
                h.send(process, key, value, cluster.append(key, value, producer), **extra)
            else:
                if outcome == "info-applied":
                    cluster.append(key, value, producer)
                h.send(process, key, value, type="fail" if outcome == "fail" else "info", **extra)
                if retry and outcome != "fail":
                    h.send(process, key, value, cluster.append(key, value, producer), **extra)
        elif kind == "poll":
            _, process, key, start, count = step
            log = cluster.logs[key]
            start = min(start, len(log))
            h.poll(process, key, start, [(o, log[o]) for o in range(start, min(start + count, len(log)))])
        elif kind == "commit":
            _, process, key, group, offset, reset, read_back = step
            if read_back:
                h.committed(process, key, group, cluster.committed.get((group, key)))
            else:
                stored = offset if reset else max(offset, cluster.committed.get((group, key), -1))
                cluster.committed[(group, key)] = stored
                h.commit(process, key, group, offset, stored, reset=reset)
        else:
            fault = step[1]
            h.nemesis("stop" if fault in faults else "start", fault, "n1")
            faults ^= {fault}
        if waiting is not None:
            h.complete(waiting[0], "ok", **waiting[1])
    if carry is not None:
        h.complete(carry[0], "ok", **carry[1])
    for fault in sorted(faults):
        h.nemesis("stop", fault)
    for key in KEYS:
        h.final_read(PROCESSES, key, cluster.logs[key], chunk=3)
    return h


@settings(max_examples=150, deadline=None)
@given(steps)
def test_histories_of_a_correct_log_are_valid(plan: list[tuple[Any, ...]]) -> None:
    results = check(simulate(plan).history())
    assert results["verdict"] == "valid", (results["reasons"], results["anomalies"])


# ----------------------------------------------------------------------------------------------------
# Mutations: each returns the mutated events or None when the history offers nothing to mutate.

Events = list[dict[str, Any]]


def ok_polls(events: Events) -> list[dict[str, Any]]:
    return [e for e in events if e["f"] == "poll" and e["type"] == "ok" and e["records"]]


def acked_values(events: Events) -> dict[int, int]:
    """value -> number of send attempts, for values with exactly one (ok) attempt."""
    attempts: dict[int, list[str]] = {}
    invokes: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e["f"] != "send":
            continue
        if e["type"] == "invoke":
            invokes[e["process"]] = e
        else:
            attempts.setdefault(invokes[e["process"]]["value"], []).append(e["type"])
    return {v: 1 for v, types in attempts.items() if types == ["ok"]}


def drop_read(events: Events, choice: int) -> Events | None:
    """Remove an acknowledged value from every poll that returned it."""
    read = sorted({r[1] for e in ok_polls(events) for r in e["records"]} & set(acked_values(events)))
    if not read:
        return None
    victim = read[choice % len(read)]
    for e in ok_polls(events):
        e["records"] = [r for r in e["records"] if r[1] != victim]
    return events


def duplicate_value(events: Events, choice: int) -> Events | None:
    """Append to a poll a second copy of a once-sent value that poll already returned."""
    single = acked_values(events)
    polls = [e for e in ok_polls(events) if any(r[1] in single for r in e["records"])]
    if not polls:
        return None
    poll = polls[choice % len(polls)]
    values = [r[1] for r in poll["records"] if r[1] in single]
    poll["records"].append([poll["records"][-1][0] + 1, values[choice % len(values)]])
    return events


def swap_offsets(events: Events, choice: int) -> Events | None:
    """Swap the values of two acknowledged records in one poll."""
    single = acked_values(events)
    polls = [e for e in ok_polls(events) if sum(1 for r in e["records"] if r[1] in single) >= 2]
    if not polls:
        return None
    poll = polls[choice % len(polls)]
    a, b = [i for i, r in enumerate(poll["records"]) if r[1] in single][:2]
    records = poll["records"]
    records[a][1], records[b][1] = records[b][1], records[a][1]
    return events


def reverse_records(events: Events, choice: int) -> Events | None:
    polls = [e for e in ok_polls(events) if len(e["records"]) >= 2]
    if not polls:
        return None
    polls[choice % len(polls)]["records"].reverse()
    return events


def fail_a_read_send(events: Events, choice: int) -> Events | None:
    """Turn the only (ok) attempt of a value that was read into a definite failure."""
    read = sorted({r[1] for e in ok_polls(events) for r in e["records"]} & set(acked_values(events)))
    if not read:
        return None
    victim = read[choice % len(read)]
    for i, e in enumerate(events):
        if e["f"] == "send" and e["type"] == "invoke" and e["value"] == victim:
            completion = next(c for c in events[i + 1 :] if c["process"] == e["process"])
            completion["type"] = "fail"
            del completion["offset"]
            return events
    raise AssertionError("acked value without send")


def truncate_final_read(events: Events, choice: int) -> Events | None:
    """Drop the last record of one final poll: the final read no longer returns it."""
    finals = [
        e for e in ok_polls(events) if any(f.get("final") for f in events if f["index"] == e["index"] - 1)
    ]
    if not finals:
        return None
    finals[choice % len(finals)]["records"].pop()
    return events


def regress_committed(events: Events, choice: int) -> Events | None:
    """Append a `committed` read lower than an observation invoked after its group's last reset completed."""
    last: dict[tuple[str, str], int] = {}
    reset_done: dict[tuple[str, str], int] = {}
    invokes: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e["f"] not in ("commit", "committed"):
            continue
        if e["type"] == "invoke":
            invokes[e["process"]] = e
            continue
        invoke = invokes[e["process"]]
        group_key = (invoke["group"], invoke["key"])
        if invoke.get("reset"):
            last.pop(group_key, None)
            reset_done[group_key] = e["index"]
        elif invoke["index"] > reset_done.get(group_key, -1):
            observed = e["committed"] if e["f"] == "commit" else e["offset"]
            if observed is not None and observed > last.get(group_key, 0):
                last[group_key] = observed
    if not last:
        return None
    (group, key), observed = sorted(last.items())[choice % len(last)]
    h = HistoryBuilder()
    h.events = events
    h.committed(PROCESSES + 3, key, group, observed - 1)
    return h.events


MUTATIONS = [
    drop_read,
    duplicate_value,
    swap_offsets,
    reverse_records,
    fail_a_read_send,
    truncate_final_read,
    regress_committed,
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(steps, st.sampled_from(MUTATIONS), st.integers(0, 1000))
def test_a_single_mutation_is_caught(plan: list[tuple[Any, ...]], mutation: Any, choice: int) -> None:
    events = simulate(plan).events
    mutated = mutation(copy.deepcopy(events), choice)
    assume(mutated is not None)
    results = check(build(mutated))
    assert results["verdict"] == "invalid", (mutation.__name__, results["reasons"])
