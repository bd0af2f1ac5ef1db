"""``raftlog bench scale``: its pure helpers, the table, and one tiny run against a real cluster. Nothing
here is about speed: the end-to-end run checks that every phase measured something and nothing failed."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from raftlog_bench.cluster_report import LatencySummary
from raftlog_bench.scale_report import (
    ProbeSummary,
    Row,
    format_table,
    metric_values,
    parse_sizes,
    recovered,
    rss_mib,
)


def test_sizes_are_positive_and_within_a_topics_limit() -> None:
    assert parse_sizes("100,1000,10000") == (100, 1000, 10000)
    for bad in ("0", "100,x", "", "10001"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_sizes(bad)


def test_metric_values_keep_unlabelled_series() -> None:
    page = (
        "# HELP raftlog_partition_replicas Replicas.\n"
        "raftlog_partition_replicas 10001\n"
        'raftlog_http_requests_total{method="GET",route="/metrics",status="200"} 4\n'
        "raftlog_controller_term 3\n"
        "broken line\n"
    )
    assert metric_values(page) == {"raftlog_partition_replicas": 10001.0, "raftlog_controller_term": 3.0}


def test_rss_is_read_from_proc_status_in_mib() -> None:
    assert rss_mib("Name:\tpython\nVmRSS:\t  276480 kB\nThreads:\t9\n") == pytest.approx(270.0)
    assert rss_mib("Name:\tzombie\n") is None


def test_a_cpu_window_is_back_to_idle_under_twice_idle_plus_two_percent() -> None:
    assert recovered(10.0, 4.0)
    assert not recovered(10.1, 4.0)
    assert recovered(2.0, 0.0)


def test_probe_summary_counts_failures_and_latency() -> None:
    summary = ProbeSummary.of([(0.004, True), (0.010, False), (0.002, True)])
    assert (summary.sent, summary.failed) == (3, 1)
    assert summary.latency.max_ms == pytest.approx(10.0)
    assert summary.cell() == "4/10/10 ms, 1/3 failed"
    assert ProbeSummary(0, 0, LatencySummary.of([])).cell() == "-"


def test_table_shows_every_phase_and_what_timed_out() -> None:
    done = Row(
        1000,
        create_answer_s=2.0,
        create_open_s=10.01,
        idle_cpu_pct=3.1,
        rss_mib_max=80.4,
        fds_max=31,
        restart_open_s=4.2,
        restart_quiet_s=10.0,
        restart_elections=0,
        delete_s=1.5,
        controller_elections=0,
        probe={"idle": ProbeSummary.of([(0.004, True)])},
    )
    cut = Row(10000, create_answer_s=9.0, timeouts=["create"], log_problems=2)
    table = format_table([done, cut])
    assert "| 1,000 | 2.0 s | 10.0 s | 100 | 3.1% | 80 MiB | 31 | 4.2 s | 10 s | 0 | 1.5 s | 0 |" in table
    assert "| 10,000 | 9.0 s | - | - | - |" in table
    assert "| 1,000 | - | 4/4/4 ms, 0/1 failed | - | - |" in table
    assert "10,000: create timed out" in table
    assert "10,000: 2 ERROR lines in node logs" in table


@pytest.mark.slow
def test_a_tiny_run_measures_every_phase_on_a_real_cluster(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    argv = [
        sys.executable, "-m", "raftlog_cli", "bench", "scale",
        "--partitions", "12", "--idle-seconds", "2", "--timeout-s", "90",
        "--dir", str(tmp_path), "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (row,) = json.loads(out.read_text())
    assert row["partitions"] == 12 and row["timeouts"] == []
    for key in ("create_open_s", "idle_cpu_pct", "rss_mib_max", "fds_max", "restart_open_s", "delete_s"):
        assert row[key] is not None and row[key] > 0, key
    assert row["restart_elections"] == 0 and row["controller_elections"] == 0
    assert row["log_problems"] == 0
    for phase in ("idle", "restart", "delete"):
        assert row["probe"][phase]["sent"] > 0 and row["probe"][phase]["failed"] == 0, row["probe"][phase]
    assert "| 12 |" in done.stdout
