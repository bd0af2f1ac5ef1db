"""Availability as the harness measures it (jepsen/recovery.py), on built histories with explicit times: a
heal's recovery judged against the ready time of the nodes it brought back (a recovery five times slower
is slow, a cut one is not judged), and the writes of the spans without faults."""

from __future__ import annotations

import logging
import pathlib
from typing import Any

import pytest

from jepsen import recovery
from jepsen.history import History, build


class Timed:
    """Events at explicit times (seconds): writes of one process each, and the nemesis'."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.value = 0

    def _add(self, time: float, **fields: Any) -> None:
        self.events.append({"index": len(self.events), "time": time, **fields})

    def write(self, process: int, at: float, took: float = 0.05, type: str = "ok", f: str = "send") -> None:
        """One write invoked at ``at``, completed ``took`` later: a send, or (``txn``) a transaction."""
        self.value += 1
        if f == "send":
            key: dict[str, Any] = {"key": "t0/0", "value": self.value}
            extra: dict[str, Any] = {}
        else:  # a transaction of one record
            key = {"txn": f"p{process}.{self.value}"}
            extra = {"transactional_id": f"t{process}", "intent": "commit", "writes": [["t0/0", self.value]]}
        self._add(at, process=process, type="invoke", f=f, **key, **extra)
        done: dict[str, Any] = {}
        if type == "ok":
            done = {"offset": self.value} if f == "send" else {"written": [["t0/0", self.value, self.value]]}
        self._add(at + took, process=process, type=type, f=f, **key, **done)

    def pending(self, process: int, at: float) -> None:
        """A write invoked at ``at`` that never completed (the history ends first)."""
        self.value += 1
        self._add(at, process=process, type="invoke", f="send", key="t0/0", value=self.value)

    def writes(self, start: float, end: float, every: float = 0.1, type: str = "ok") -> None:
        at = start
        while at < end:
            self.write(1, at, type=type)
            at = round(at + every, 6)

    def start(self, at: float, fault: str, nodes: list[str], began: float | None = None) -> None:
        extra = {} if began is None else {"began": began}
        self._add(at, process="nemesis", type="info", f="start", fault=fault, value={"nodes": nodes}, **extra)

    def stop(self, at: float, fault: str, back: dict[str, float] | None = None) -> None:
        extra = {"back": back} if back else {}
        self._add(at, process="nemesis", type="info", f="stop", fault=fault, value={"nodes": []}, **extra)

    def ready(self, at: float, fault: str, node: str, since: float) -> None:
        value = {"node": node, "since": since, "ready_s": round(at - since, 3)}
        self._add(at, process="nemesis", type="info", f="ready", fault=fault, value=value)

    def history(self) -> History:
        return build(_reindexed(self.events))


def _reindexed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ordered = sorted(events, key=lambda e: (e["time"], e["index"]))
    return [{**event, "index": i} for i, event in enumerate(ordered)]


def majority_killed(first_ack_after_heal_s: float, next_window_at: float | None = None) -> Timed:
    """Writes from 0 to 5 s; two nodes killed at 5 s, restarted at 10 s, ready 3 s later; no write
    acknowledged until ``first_ack_after_heal_s`` after the restart, then writes to 60 s (or to a next
    window and after it)."""
    h = Timed()
    h.writes(0.0, 5.0)
    h.start(5.2, "kill", ["n1", "n2"], began=5.0)
    h.writes(5.3, 10.0, every=0.5, type="fail")
    h.stop(10.5, "kill", back={"n1": 10.0, "n2": 10.2})
    h.ready(12.5, "kill", "n1", 10.0)
    h.ready(13.0, "kill", "n2", 10.2)
    first = 10.0 + first_ack_after_heal_s
    end = 60.0 if next_window_at is None else next_window_at
    h.writes(10.6, min(first, end) - 0.05, every=0.5, type="fail")
    if first < end:
        h.writes(first - 0.05, end)
    if next_window_at is not None:
        h.start(next_window_at, "pause", ["n3"])
        h.writes(next_window_at + 0.1, next_window_at + 4.0, every=0.5, type="info")
        h.stop(next_window_at + 4.0, "pause", back={"n3": next_window_at + 4.0})
        h.ready(next_window_at + 4.2, "pause", "n3", next_window_at + 4.0)
        h.writes(next_window_at + 4.3, next_window_at + 20.0)
    return h


def test_a_recovery_within_twice_the_ready_time_and_an_election_is_ok() -> None:
    measured = recovery.measure(majority_killed(4.0).history())
    [window] = measured["recoveries"]
    assert window["healed_at"] == 10.0 and window["back"] == ["n1", "n2"]
    assert window["ready_s"] == 3.0 and window["nodes_ready_s"] == {"n1": 2.5, "n2": 3.0}
    assert window["bound_s"] == 2 * 3.0 + recovery.ELECTION_TIMEOUT_MAX_S + recovery.CLIENT_NEXT_S
    assert (window["recovery_s"], window["judged"]) == (4.0, "ok")
    assert recovery.problems(measured) == []


def test_a_recovery_five_times_slower_is_slow_and_named() -> None:
    """The run above with the cluster silent five times as long after the restart: 20 s against 10.5."""
    measured = recovery.measure(majority_killed(5 * 4.0).history())
    [window] = measured["recoveries"]
    assert (window["recovery_s"], window["judged"]) == (20.0, "slow")
    [problem] = recovery.problems(measured)
    assert "window 1" in problem and "20.0 s" in problem and "bound 10.5 s" in problem


def test_no_write_acknowledged_before_the_next_window_is_slow_once_the_bound_passed() -> None:
    slow = recovery.measure(majority_killed(40.0, next_window_at=25.0).history())["recoveries"][0]
    assert (slow["recovery_s"], slow["judged"]) == (None, "slow")
    # a next window before the bound leaves nothing to judge (the nemesis waits, so a run never has one)
    cut = recovery.measure(majority_killed(40.0, next_window_at=15.0).history())["recoveries"][0]
    assert cut["judged"] == "cut"


def test_the_spans_without_faults_begin_once_the_nodes_are_ready_and_elected() -> None:
    measured = recovery.measure(majority_killed(4.0, next_window_at=30.0).history())
    spans = measured["fault_free"]["spans"]
    settle = recovery.SETTLE_S
    # before the kill (it began at 5.0, its start written at 5.2); from the last ready + SETTLE_S to the
    # pause; from the resumed node's ready + SETTLE_S to the end
    assert [(s["start"], s["end"]) for s in spans] == [
        (0.0, 5.0),
        (13.0 + settle, 30.0),
        (34.2 + settle, spans[-1]["end"]),
    ]
    assert measured["fault_free"]["ok_fraction"] == 1.0
    assert measured["fault_free"]["writes"] == sum(s["writes"] for s in spans) > 0
    second = measured["recoveries"][1]
    assert second["back"] == ["n3"] and second["ready_s"] == pytest.approx(0.2)


def test_writes_refused_while_nothing_is_wrong_lower_the_fraction() -> None:
    h = Timed()
    h.writes(0.0, 10.0, every=0.2)
    h.writes(0.1, 10.0, every=0.2, type="fail")  # one node refusing half of them
    h.pending(2, 5.0)  # never completed: left out
    fault_free = recovery.measure(h.history())["fault_free"]
    assert fault_free["ok_fraction"] == 0.5 and fault_free["writes"] == 100
    assert fault_free["ops"]["send"] == {"ok": 50, "fail": 50, "info": 0}


def test_a_restarted_node_never_ready_opens_no_span_and_a_window_left_open_is_not_judged() -> None:
    h = Timed()
    h.writes(0.0, 20.0, every=0.5)
    h.start(5.0, "kill", ["n1"])
    h.stop(8.0, "kill", back={"n1": 7.5})
    h.start(15.0, "pause", ["n2"])  # never stopped: the history ends inside it
    measured = recovery.measure(h.history())
    [window] = measured["recoveries"]
    assert window["not_ready"] == ["n1"] and window["judged"] == "ok"  # the others acknowledged
    assert [(s["start"], s["end"]) for s in measured["fault_free"]["spans"]] == [(0.0, 5.0)]


def test_transactions_are_the_writes_of_the_transactional_workload() -> None:
    h = Timed()
    for at in (0.0, 1.0, 2.0):
        h.write(1, at, f="txn")
    h.write(2, 3.0, f="txn", type="fail")
    assert recovery.measure(h.history())["fault_free"]["ok_fraction"] == 0.75


def test_the_bound_takes_the_nodes_timers_and_the_clients_backoff() -> None:
    from jepsen import group_workload, kafka_workload, run_config, txn_client
    from raftlog.consensus.config import CoreConfig

    assert CoreConfig().election_timeout_max_ms == recovery.ELECTION_TIMEOUT_MAX_S * 1000
    config = run_config.RunConfig()
    assert 1.5 * config.concurrency / config.rate <= recovery.CLIENT_NEXT_S
    assert kafka_workload.client_config("n1:9092", logging.getLogger())["reconnect.backoff.max.ms"] == 1000
    for module in (kafka_workload, group_workload, txn_client):  # every Kafka client the harness makes
        source = pathlib.Path(str(module.__file__)).read_text(encoding="utf-8")
        assert "common = client_config(bootstrap_servers, logger" in source, module.__name__
    assert recovery.recovery_bound_s(0.0) == recovery.ELECTION_TIMEOUT_MAX_S + recovery.CLIENT_NEXT_S
