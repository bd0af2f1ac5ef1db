"""The cluster benchmark's pure helpers: percentiles, the open-loop timetable, /proc parsing, the
request body, argument checks and the table. No cluster here, and nothing about speed."""

from __future__ import annotations

import base64
import json

import pytest

from raftlog_bench import cluster, cluster_report
from raftlog_bench.cluster import error_key, produce_body, slot_time, slots_due
from raftlog_bench.cluster_http import parse_servers
from raftlog_bench.cluster_report import LatencySummary, Options, Results
from raftlog_bench.cpu import CpuUse, cpu_seconds_from_stat
from raftlog_bench.stats import percentile_ms


def test_percentile_is_nearest_rank_in_ms() -> None:
    latencies = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    assert percentile_ms(latencies, 50) == pytest.approx(51.0)  # index round(0.5 * 99) = 50
    assert percentile_ms(latencies, 99) == pytest.approx(99.0)
    assert percentile_ms(latencies, 100) == pytest.approx(100.0)
    assert percentile_ms(list(reversed(latencies)), 0) == pytest.approx(1.0)
    assert percentile_ms([], 99) == 0.0


def test_latency_summary_of_values() -> None:
    summary = LatencySummary.of([0.004, 0.001, 0.002, 0.010])
    assert summary.count == 4
    assert summary.max_ms == pytest.approx(10.0)
    assert summary.p50_ms == pytest.approx(4.0)  # sorted [1, 2, 4, 10], index round(1.5) = 2
    assert LatencySummary.of([]) == LatencySummary(0, 0.0, 0.0, 0.0, 0.0)


def test_timetable_slots_are_due_at_fixed_times() -> None:
    assert slots_due(-0.001, 1000, 10) == 0
    assert slots_due(0.0, 1000, 10) == 1  # slot 0 is due at once
    assert slots_due(0.0009, 1000, 10) == 1
    assert slots_due(0.001, 1000, 10) == 2
    assert slots_due(0.0049, 1000, 10) == 5
    assert slots_due(60.0, 1000, 10) == 10  # never more than the timetable holds
    assert slot_time(5.0, 250, 1000) == pytest.approx(5.25)
    for slot in range(0, 1000, 37):  # a slot is due exactly from its own time on
        assert slots_due(slot_time(0.0, slot, 1000) - 0.0, 1000, 1000) == slot + 1


def test_cpu_seconds_from_stat_counts_fields_after_the_command_name() -> None:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    stat = "4242 (we (ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0"
    assert cpu_seconds_from_stat(stat, 100) == pytest.approx(3.0)


def test_parse_servers() -> None:
    assert parse_servers("http://127.0.0.1:8081/, http://127.0.0.1:8082") == [
        "http://127.0.0.1:8081",
        "http://127.0.0.1:8082",
    ]
    with pytest.raises(ValueError):
        parse_servers(" , ")
    with pytest.raises(ValueError):
        parse_servers("127.0.0.1:8081")


def test_error_key() -> None:
    assert error_key(503, 50301) == "HTTP 503/50301"
    assert error_key(502, None) == "HTTP 502/-"


def test_produce_body_is_a_binary_flavour_batch_of_the_value() -> None:
    value = bytes(range(100))
    body, encoded = produce_body(100, 3, value)
    records = json.loads(body)["records"]
    assert len(records) == 3
    assert all(base64.b64decode(r["value"]) == value for r in records)
    assert encoded == records[0]["value"]
    with pytest.raises(Exception, match="101"):
        produce_body(101, 1, value)


def _options() -> Options:
    return Options(
        seconds=5.0,
        consume_seconds=30.0,
        concurrency=8,
        record_sizes=(100,),
        batch_sizes=(100,),
        partition_counts=(3,),
        latency_rate=1000.0,
        latency_seconds=10.0,
        latency_in_flight=64,
        latency_record_bytes=100,
        fetch_bytes=(1 << 20,),
        idle_partitions=100,
        idle_seconds=10.0,
        idle_settle_seconds=5.0,
        cells=cluster.CELLS,
    )


def _latency_cell(p99_s: float, acknowledged: int) -> cluster_report.LatencyCell:
    summary = LatencySummary.of([0.001] * 98 + [p99_s] * 2)
    cpu = CpuUse(10.0, {"n1": 1.0, "n2": 2.0, "n3": 3.0}, 1.5, 4.0)
    return cluster_report.LatencyCell(
        "t", 3, 100, 1000.0, 100, 100, acknowledged, 10.0, 3, 64,
        summary, summary, summary, summary, {"HTTP 504/50401": 1} if acknowledged < 100 else {}, cpu,
    )  # fmt: skip


def test_goal_is_met_only_under_the_target_with_every_request_acknowledged() -> None:
    results = Results(["http://127.0.0.1:1"], True, "/tmp/x", {"cpus": 2}, _options())
    results.latency = [_latency_cell(0.004, 100), _latency_cell(0.004, 99), _latency_cell(0.009, 100)]
    assert [goal.met for goal in cluster_report.goals_of(results)] == [True, False, False]


def test_table_shows_measurement_goal_errors_and_node_log_problems() -> None:
    results = Results(["http://127.0.0.1:1"], True, "/tmp/x", {"cpus": 2}, _options())
    results.latency = [_latency_cell(0.009, 99)]
    results.goals = cluster_report.goals_of(results)
    results.node_log_problems = {"n2": ["2026-01-01 ERROR partitions.broker.node: boom"]}
    table = cluster_report.format_table(results)
    assert "9.00 ms (goal <= 5 ms)  MISSED" in table
    assert "HTTP 504/50401 x1" in table
    assert "n2: 2026-01-01 ERROR partitions.broker.node: boom" in table
    assert "shares the machine's 2 CPUs" in table
    assert cluster_report.any_problem(results)


@pytest.mark.parametrize(
    "argv",
    [
        ["--seconds", "0"],
        ["--concurrency", "0"],
        ["--rate", "-1"],
        ["--server", "localhost:8081"],
        ["--server", "http://127.0.0.1:8081", "--token", "t0k"],
    ],  # the token: $RAFTLOG_ADMIN_TOKEN, never argv
)
def test_bad_options_exit_2_before_starting_anything(argv: list[str], tmp_path: object) -> None:
    assert cluster.main([*argv, "--dir", str(tmp_path)]) == 2


def test_cells_option() -> None:
    assert cluster._cells("produce, idle") == ("produce", "idle")
    with pytest.raises(Exception, match="choose from"):
        cluster._cells("produce,nope")
