"""``raftlog bench kafka-tools``: reading Apache Kafka's perf tools' output and the table built from it.

A whole run starts a raftlog cluster and a Kafka one and a JVM per tool: minutes, not seconds, on a
loaded 2-core machine, so the suite checks the reading on output the tools printed in a real run
(Kafka 4.1.1 against raftlog, 2026-11-28) and that the command stops early, naming the installer, when
Kafka's jars are missing. Numbers are printed by the benchmark, never asserted on."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from raftlog_bench import kafka_tools
from raftlog_bench.kafka_tools_output import (
    CpuOfRun,
    ToolOutputError,
    consumer_runs,
    end_to_end_runs,
    parse_consumer,
    parse_end_to_end,
    parse_producer,
    producer_runs,
    table,
)
from raftlog_cli import cli

PRODUCER = """\
7561 records sent, 1499.0 records/sec (1.46 MB/sec), 1547.1 ms avg latency, 2682.0 ms max latency.
50580 records sent, 10107.9 records/sec (9.87 MB/sec), 3114.7 ms avg latency, 4349.0 ms max latency.
300000 records sent, 4948.5 records/sec (4.83 MB/sec), 5680.47 ms avg latency, 10021.00 ms max latency, \
5845 ms 50th, 8724 ms 95th, 9476 ms 99th, 9968 ms 99.9th.
"""
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,"
    " fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
)
WARNING = (
    "WARNING: Exiting before consuming the expected number of messages: timeout (10000 ms) exceeded. You can"
    " use the --timeout option to increase the timeout.\n"
)
CONSUMER = (
    HEADER + "2026-11-28 20:25:44:573, 2026-11-28 20:25:50:919, 292.9688, 46.1659, 300000, 47273.8733, 2507,"
    " 3839, 76.3138, 78145.3504\n"
)
# a group of three reading 300,000 records: the first stopped short (the others read part of its share)
GROUP = [
    HEADER + WARNING + "2026-11-28 20:25:56:819, 2026-11-28 20:26:18:477, 96.6992, 4.4648, 99020, 4571.9826,"
    " 4689, 16969, 5.6986, 5835.3468\n",
    HEADER + "2026-11-28 20:25:56:948, 2026-11-28 20:26:05:390, 98.1348, 11.6246, 100490, 11903.5774, 4538,"
    " 3904, 25.1370, 25740.2664\n",
    HEADER + "2026-11-28 20:25:56:811, 2026-11-28 20:26:01:070, 98.1348, 23.0417, 100490, 23594.7405, 2274,"
    " 1985, 49.4382, 50624.6851\n",
]
END_TO_END = "0\t294.341494\nAvg latency: 14.0391 ms\nPercentiles: 50th = 10, 99th = 79, 99.9th = 294\n"
CPU = CpuOfRun(servers_cpu_s=1.44, seconds=9.0, other_pct=20.0)


def test_the_producers_last_line_is_its_summary_not_a_progress_report() -> None:
    summary = parse_producer(PRODUCER)
    assert (summary.records, summary.records_per_s, summary.mb_per_s) == (300_000, 4948.5, 4.83)
    assert (summary.p50_ms, summary.p99_ms, summary.p999_ms) == (5845, 9476, 9968)
    (run,) = producer_runs("raftlog", 1024, [summary], CPU)
    assert (run.row, run.value, run.records) == ("produce 1 KiB", 4948.5, 300_000)
    assert run.cpu_s_per_million == pytest.approx(4.8)  # 1.44 s over 300,000 records


def test_producers_at_once_sent_every_record_over_the_longest_ones_run() -> None:
    """Two processes of 300,000 records, one at 4,948.5 records/s (60.6 s), one twice as fast (30.3 s):
    600,000 records over 60.6 s, not the 14,845.5 records/s the sum of their rates would say."""
    fast = parse_producer(PRODUCER.replace("4948.5 records/sec", "9897.0 records/sec"))
    (run,) = producer_runs("raftlog", 1024, [parse_producer(PRODUCER), fast], CPU)
    assert (run.row, run.records) == ("produce 1 KiB, 2 producers", 600_000)
    assert run.value == pytest.approx(600_000 / (300_000 / 4948.5))
    assert run.detail["p99_ms"] == 9476


def test_one_consumer_is_measured_by_its_fetch_rate_without_its_wait_for_partitions() -> None:
    summary = parse_consumer(CONSUMER)
    assert (summary.records, summary.rebalance_ms, summary.timed_out) == (300_000, 2507, False)
    assert summary.end_s - summary.start_s == pytest.approx(6.346)
    assert summary.fetch_records_per_s == pytest.approx(300_000 / 3.839)  # the tool's fetch.nMsg.sec
    (run,) = consumer_runs("raftlog", 1024, 1, [summary], CPU)
    assert run.row == "consume 1 KiB, one consumer" and run.value == pytest.approx(78145.35, abs=0.01)


def test_a_group_reads_every_members_records_from_the_first_start_to_the_last_record() -> None:
    summaries = [parse_consumer(text) for text in GROUP]
    assert [s.timed_out for s in summaries] == [True, False, False]
    # the member that stopped short waited the 10 s timeout after its last record: not the group's time
    assert summaries[0].last_record_s == pytest.approx(summaries[0].end_s - 10)
    (run,) = consumer_runs("raftlog", 1024, 3, summaries, CPU)
    span = (60 + 8.477) - 56.811  # 20:26:08.477 (the first member's last record) - 20:25:56.811
    assert run.row == "consume 1 KiB, group of 3" and run.records == 300_000
    assert run.value == pytest.approx(300_000 / span)
    assert run.detail["timed_out"] == 1


def test_end_to_end_latency_gives_three_rows_where_lower_is_better() -> None:
    summary = parse_end_to_end(END_TO_END, 500)
    assert (summary.records, summary.avg_ms, summary.p50_ms, summary.p99_ms, summary.p999_ms) == (
        500, 14.0391, 10, 79, 294,
    )  # fmt: skip
    runs = end_to_end_runs("raftlog", 1024, summary, CPU)
    assert [r.row for r in runs] == ["end-to-end 1 KiB p50", "end-to-end 1 KiB p99", "end-to-end 1 KiB p99.9"]
    assert all(r.lower and r.unit == "ms" for r in runs)


def test_output_without_a_summary_is_an_error_that_shows_its_end() -> None:
    failed = "Exception in thread main\norg.apache.kafka.common.errors.TimeoutException: Topic t not present"
    for parse in (parse_producer, parse_consumer, lambda text: parse_end_to_end(text, 1)):
        with pytest.raises(ToolOutputError, match="TimeoutException: Topic t not present"):
            parse(failed)
    with pytest.raises(ToolOutputError, match="no ConsumerPerformance summary"):
        parse_consumer(HEADER)  # the header printed, then the consumer failed


def test_the_table_sets_each_row_beside_kafkas_with_the_ratio_and_cpu_per_million() -> None:
    ours = producer_runs("raftlog", 1024, [parse_producer(PRODUCER)], CPU)
    theirs = producer_runs("kafka", 1024, [parse_producer(PRODUCER.replace("4948.5", "2474.25"))], CPU)
    latency = end_to_end_runs("raftlog", 1024, parse_end_to_end(END_TO_END, 500), CPU)
    text = table([*ours, *theirs, *latency])
    produce = next(line for line in text.splitlines() if line.startswith("produce 1 KiB"))
    assert produce.split() == ["produce", "1", "KiB", "4,948", "2,474", "2.00x", "4.80", "4.80", "20", "20"]
    p99 = next(line for line in text.splitlines() if line.startswith("end-to-end 1 KiB p99 "))
    assert p99.split()[4:7] == ["79", "ms", "-"]  # no Kafka row: no ratio


def _args(*argv: str) -> argparse.Namespace:
    return cli.build_parser("bench").parse_args(["bench", "kafka-tools", *argv])


def test_without_kafkas_jars_it_stops_before_starting_anything_and_names_the_installer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAFTLOG_KAFKA_LIBS", str(tmp_path))  # an empty directory: not installed
    args = _args("--dir", str(tmp_path / "runs"))
    assert args.run is kafka_tools.run_from_args
    assert args.run(args) == 2
    assert "scripts/kafka/install.sh" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_its_options_are_checked_before_a_cluster_starts() -> None:
    config = kafka_tools.Config(record_sizes=(1024, 100), records=(1000,))
    assert kafka_tools.problem(config) == "--records gives 1 counts for 2 --record-sizes"
    no_producer = kafka_tools.Config(producers=0)
    assert kafka_tools.problem(no_producer) == "--producers takes 1 to 64 processes, not 0"
    config = kafka_tools.Config(systems=("raftlog", "nats"))
    assert kafka_tools.problem(config) == "--systems takes raftlog, kafka; not nats"
