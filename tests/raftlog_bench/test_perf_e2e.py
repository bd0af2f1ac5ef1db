"""``raftlog bench perf``'s end-to-end phase (``perf_e2e.py``) against a fake target, and the goals its
rows speak to; its run against a real cluster (Kafka's client) is in ``test_perf_bench``'s run of the
bench against a cluster it starts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from raftlog_bench import perf_e2e
from raftlog_bench.cluster_report import LatencySummary
from raftlog_bench.perf_report import PhaseResult, Report, Workload, goals, phase_ratios
from raftlog_bench.targets import Layout

DELIVERY_S = 0.003  # the fake's records reach the consumer this long after their send
LOST = 7  # the slot whose record never comes


class _Followed:
    """Acknowledges a send at once and hands its record to the follower DELIVERY_S later, but LOST's."""

    system = "fake"

    def __init__(self) -> None:
        self.received: Callable[[bytes, float], None] | None = None
        self.stopped = False

    async def send_one(self, worker: int, partition: int, key: bytes | None = None) -> None:
        assert key is not None and partition == 0
        received = self.received
        if key != str(LOST).encode() and received is not None:
            asyncio.get_running_loop().call_later(DELIVERY_S, lambda: received(key, time.perf_counter()))

    def follow(self, partition: int, received: Callable[[bytes, float], None]) -> Callable[[], None]:
        self.received = received

        def stop() -> None:
            self.stopped = True

        return stop


async def test_each_record_counts_from_its_send_to_its_receipt_and_one_never_received_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(perf_e2e, "DRAIN_S", 0.2)
    target = _Followed()
    result = await perf_e2e.e2e_phase(target, Layout("t", 1, 1024, 1), 200.0, 0.25, {})
    assert result.phase == "e2e" and result.expected == 50
    assert result.records == 49  # the first record (sent before the timetable) is not counted
    assert result.errors == {"not received within 0.2 s": 1}
    assert result.latency.p50_ms >= DELIVERY_S * 1000  # never less than the way to the consumer
    assert target.stopped


def _phase(system: str, p50_ms: float, p99_ms: float) -> PhaseResult:
    latency = LatencySummary(100, p50_ms, p99_ms, p99_ms, p99_ms)
    return PhaseResult(
        system, "e2e", 1024, 1, 1, 1, 1000, 1000, 10.0, 100.0, 0.1, latency, {}, {"n1": 5.0}, 1.0, 1.0
    )


def test_end_to_end_goals_are_kafkas_latency_over_raftlogs() -> None:
    workload = Workload((100,), 1000, 3, 8, 10.0, "all", True, 30.0, 1000.0, 10.0, 100, 4 << 20, 0.0)
    report = Report(workload, ["raftlog", "kafka"], {"cpus": 2})
    report.phases = [_phase("raftlog", 3.0, 10.0), _phase("kafka", 2.0, 11.0)]
    found = {goal.name: goal for goal in goals(report)}
    p50, p99 = (
        found["end-to-end p50: kafka's / raftlog's >= 1"],
        found["end-to-end p99: kafka's / raftlog's >= 1"],
    )
    assert p50.value == pytest.approx(2 / 3) and not p50.met
    assert p99.value == pytest.approx(1.1) and p99.met
    assert phase_ratios(report.phases, "kafka") == [("e2e", 1024, pytest.approx(1.1))]  # p99s, as single's
