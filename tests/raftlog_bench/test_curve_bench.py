"""raftlog bench curve: rates parsing, the point taken from a perf report, the table, and refusals."""

from __future__ import annotations

import pytest

from raftlog_bench.cluster_report import LatencySummary
from raftlog_bench.curve import CurvePoint, format_points, parse_rates, perf_args, point_of
from raftlog_bench.perf import workload_of
from raftlog_bench.perf_report import PhaseResult, Report, Workload
from raftlog_cli.cli import main as cli_main


def _report(*phases: PhaseResult) -> Report:
    workload = Workload((100,), 1000, 3, 8, 1.0, "all", False, 30.0, 800.0, 15.0, 100, 4 << 20, 0.0)
    report = Report(workload, ["raftlog"], {"cpus": 2})
    report.phases = list(phases)
    return report


def _single(records: int, seconds: float, cpu: dict[str, float], errors: dict[str, int]) -> PhaseResult:
    return PhaseResult(
        "raftlog", "single", 100, 1, 3, 64, records, records, seconds, records / seconds, 0.1,
        LatencySummary(records, 3.0, 7.5, 9.0, 12.0), errors, cpu, 30.0, 1.0,
    )  # fmt: skip


def test_rates_parse_and_bad_ones_are_named() -> None:
    assert parse_rates("100, 300,1000") == [100.0, 300.0, 1000.0]
    with pytest.raises(ValueError, match="'fast' is not a number"):
        parse_rates("100,fast")
    with pytest.raises(ValueError, match="must be in"):
        parse_rates("0")
    with pytest.raises(ValueError, match="must be in"):
        parse_rates("200000")


def test_a_point_takes_raftlogs_single_phase_and_its_cpu_per_request() -> None:
    produce = PhaseResult(
        "raftlog", "produce", 100, 1000, 3, 8, 10, 0, 1.0, 10.0, 0.0,
        LatencySummary(10, 1.0, 1.0, 1.0, 1.0), {}, {"n1": 90.0}, 50.0, 0.0,
    )  # fmt: skip
    single = _single(12_000, 15.0, {"n1": 40.0, "n2": 40.0, "n3": 40.0}, {"HTTP 503": 2})
    point = point_of(_report(produce, single), 800.0)
    assert (point.offered_per_s, point.achieved_per_s) == (800.0, 800.0)
    assert (point.p50_ms, point.p99_ms, point.p999_ms, point.max_ms) == (3.0, 7.5, 9.0, 12.0)
    assert point.servers_us_per_request == pytest.approx(1.2 * 15.0 / 12_000 * 1e6)  # 1500 µs
    assert point.errors == 2


def test_a_report_without_a_single_phase_is_an_error_naming_the_failure() -> None:
    report = _report()
    report.failures["raftlog"] = "cluster did not start"
    with pytest.raises(RuntimeError, match="cluster did not start"):
        point_of(report, 1000.0)


def test_the_table_has_one_row_per_rate() -> None:
    points = [
        CurvePoint(100.0, 100.0, 2.1, 4.2, 5.0, 6.0, 1400.0, 5.0, 0),
        CurvePoint(1000.0, 999.0, 4.5, 11.3, 14.0, 20.5, 1300.0, 33.0, 1),
    ]
    lines = format_points(points).splitlines()
    assert len(lines) == 3 and lines[0].startswith("offered/s")
    assert lines[2].split() == ["1,000", "999", "4.50", "11.30", "14.00", "20.5", "1,300", "33", "1"]


def test_each_rate_runs_the_single_record_perf_command() -> None:
    options = perf_args(600.0, 15.0, "/tmp")
    workload = workload_of(options)
    assert (workload.single_rate, workload.single_seconds, workload.record_sizes) == (600.0, 15.0, (100,))
    assert not workload.consume and options.dir == "/tmp" and options.compare == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--rates", "100,x"], "'x' is not a number"),
        (["--seconds", "0"], "--seconds must be in"),
        (["--dir", "/nonexistent/place"], "not a directory"),
    ],
)
def test_bad_options_are_refused_before_any_cluster_starts(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["bench", "curve", *argv]) == 2
    assert said in capsys.readouterr().err
