"""What ``raftlog bench kafka-tools`` reads from Apache Kafka's perf tools and prints: the last summary line
of ``ProducerPerformance`` and ``ConsumerPerformance`` and the percentiles of ``EndToEndLatency``, each
turned into a ``ToolRun`` (one tool run against one system, with the servers' CPU over it), and the table
that sets raftlog's runs beside Kafka's with their ratio. Pure: text in, numbers and text out."""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from raftlog_bench.stats import size_label

# ProducerPerformance's last line: "500000 records sent, 98096.9 records/sec (95.80 MB/sec), 274.43 ms avg
# latency, 790.00 ms max latency, 263 ms 50th, 520 ms 95th, 641 ms 99th, 770 ms 99.9th."
PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, [\d.]+ ms max latency, (?P<p50>\d+) ms 50th, \d+ ms 95th, "
    r"(?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th"
)
# EndToEndLatency's last two lines: "Avg latency: 3.1412 ms", "Percentiles: 50th = 3, 99th = 9, 99.9th = 17"
E2E_AVERAGE = re.compile(r"Avg latency: (?P<avg>[\d.]+) ms")
E2E_PERCENTILES = re.compile(r"Percentiles: 50th = (?P<p50>\d+), 99th = (?P<p99>\d+), 99.9th = (?P<p999>\d+)")
CONSUMER_HEADER = "start.time, end.time"
CONSUMER_FIELDS = (
    10  # start, end, MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s, fetch rec/s
)
CONSUMER_TIMEOUT_MS = 10_000  # ConsumerPerformance's --timeout, as the benchmark runs it (its default)
CONSUMER_DATE = "%Y-%m-%d %H:%M:%S:%f"  # the tool's default --date-format, yyyy-MM-dd HH:mm:ss:SSS


class ToolOutputError(ValueError):
    """A tool's output holds no summary this module can read (it failed, or its format changed)."""


@dataclass(frozen=True, slots=True)
class ProducerSummary:
    records: int
    records_per_s: float
    mb_per_s: float  # the tool's MB: MiB
    avg_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float


@dataclass(frozen=True, slots=True)
class ConsumerSummary:
    start_s: float  # epoch seconds, the consumer's creation (the tool's start.time)
    end_s: float  # when its last poll returned
    mib: float
    records: int
    rebalance_ms: int  # waiting for its partitions (the group's joins), within end - start
    timed_out: bool  # the tool stopped before reading --messages records

    @property
    def last_record_s(self) -> float:
        """When its last record came (within a poll of 100 ms): a member that stopped short of
        ``--messages`` (the group's other members read the rest) waited ``--timeout`` after it."""
        return self.end_s - CONSUMER_TIMEOUT_MS / 1000 if self.timed_out else self.end_s

    @property
    def records_per_s(self) -> float:
        """Over the tool's whole run, joins included (its nMsg.sec)."""
        return self.records / max(self.end_s - self.start_s, 1e-3)

    @property
    def fetch_records_per_s(self) -> float:
        """Over the run minus the time waiting for partitions (its fetch.nMsg.sec)."""
        return self.records / max(self.end_s - self.start_s - self.rebalance_ms / 1000, 1e-3)


@dataclass(frozen=True, slots=True)
class LatencySummary:
    records: int
    avg_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float


def parse_producer(text: str) -> ProducerSummary:
    matches = list(PRODUCER_SUMMARY.finditer(text))
    if not matches:
        raise ToolOutputError(f"no ProducerPerformance summary in its output: {_tail(text)}")
    m = matches[-1]  # the last: the lines before it are the 5-second progress reports
    return ProducerSummary(
        int(m["records"]), float(m["rate"]), float(m["mb"]), float(m["avg"]),
        float(m["p50"]), float(m["p99"]), float(m["p999"]),
    )  # fmt: skip


def parse_consumer(text: str) -> ConsumerSummary:
    """The line after ConsumerPerformance's header (``--show-detailed-stats`` off): its ten fields."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith(CONSUMER_HEADER)), None)
    if header is None:
        raise ToolOutputError(f"no ConsumerPerformance header in its output: {_tail(text)}")
    rows = [line.split(", ") for line in lines[header + 1 :]]
    row = next((r for r in rows if len(r) == CONSUMER_FIELDS), None)
    if row is None:
        raise ToolOutputError(f"no ConsumerPerformance summary after its header: {_tail(text)}")
    return ConsumerSummary(
        start_s=_epoch_s(row[0]), end_s=_epoch_s(row[1]), mib=float(row[2]), records=int(row[4]),
        rebalance_ms=int(row[6]), timed_out="WARNING: Exiting before consuming" in text,
    )  # fmt: skip


def parse_end_to_end(text: str, records: int) -> LatencySummary:
    """EndToEndLatency's average and percentiles; ``records``, what it was asked to send (it does not
    say how many it sent: it stops with an error on the first record not read back)."""
    average, percentiles = E2E_AVERAGE.search(text), E2E_PERCENTILES.search(text)
    if average is None or percentiles is None:
        raise ToolOutputError(f"no EndToEndLatency percentiles in its output: {_tail(text)}")
    return LatencySummary(
        records, float(average["avg"]),
        float(percentiles["p50"]), float(percentiles["p99"]), float(percentiles["p999"]),
    )  # fmt: skip


def _epoch_s(stamp: str) -> float:
    """The tool's local time (the JVM's time zone, which is this machine's) as epoch seconds."""
    return datetime.datetime.strptime(stamp.strip(), CONSUMER_DATE).timestamp()


def _tail(text: str, lines: int = 8) -> str:
    return " | ".join(text.strip().splitlines()[-lines:]) or "(nothing)"


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One row's measurement on one system: ``value`` in ``unit`` (higher is better unless ``lower``),
    the records the tool moved, and the servers' CPU seconds over the run (all nodes, from /proc)."""

    system: str
    row: str  # e.g. "produce 1 KiB", "consume 100 B, group of 3", "end-to-end 1 KiB p99"
    value: float
    unit: str
    records: int
    servers_cpu_s: float
    seconds: float  # wall time of the tool's run, JVM start included
    other_pct: float | None  # other processes' CPU over the run, 100 = one core
    lower: bool = False
    detail: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_s_per_million(self) -> float | None:
        return self.servers_cpu_s / self.records * 1e6 if self.records else None


@dataclass(frozen=True, slots=True)
class CpuOfRun:
    """The servers' CPU seconds over a tool's run, the run's wall time and the others' CPU meanwhile."""

    servers_cpu_s: float
    seconds: float
    other_pct: float | None


def _run(
    system: str, row: str, value: float, unit: str, records: int, cpu: CpuOfRun,
    lower: bool = False, detail: dict[str, float] | None = None,
) -> ToolRun:  # fmt: skip
    return ToolRun(
        system, row, value, unit, records, cpu.servers_cpu_s, cpu.seconds, cpu.other_pct, lower, detail or {}
    )


def producer_runs(
    system: str, size: int, summaries: Sequence[ProducerSummary], cpu: CpuOfRun
) -> list[ToolRun]:
    """One producer: its rate (the tool's records/sec); several processes at once: every record they sent
    over the longest one's run (each tool times its own sends; they start together, and the sum of
    their rates would count a process that ended early as if it had gone on)."""
    records = sum(s.records for s in summaries)
    if len(summaries) == 1:
        (only,) = summaries
        label, rate = f"produce {size_label(size)}", only.records_per_s
    else:
        longest_s = max(s.records / max(s.records_per_s, 1e-9) for s in summaries)
        label, rate = f"produce {size_label(size)}, {len(summaries)} producers", records / longest_s
    detail = {
        "p50_ms": max(s.p50_ms for s in summaries),
        "p99_ms": max(s.p99_ms for s in summaries),
        "mb_per_s": rate * size / (1 << 20),
    }
    return [_run(system, label, rate, "rec/s", records, cpu, detail=detail)]


def consumer_runs(
    system: str, size: int, members: int, summaries: Sequence[ConsumerSummary], cpu: CpuOfRun
) -> list[ToolRun]:
    """One consumer: its fetch rate (the tool's fetch.nMsg.sec); a group of ``members`` processes: every
    record they read over the span from the first one's start to the last one's end."""
    records = sum(s.records for s in summaries)
    if members == 1:
        (only,) = summaries
        label, rate = f"consume {size_label(size)}, one consumer", only.fetch_records_per_s
    else:  # a member that stopped short waited the tool's --timeout after its last record: not counted
        span = max(s.last_record_s for s in summaries) - min(s.start_s for s in summaries)
        label, rate = f"consume {size_label(size)}, group of {members}", records / max(span, 1e-3)
    detail = {"mib": sum(s.mib for s in summaries), "timed_out": float(sum(s.timed_out for s in summaries))}
    return [_run(system, label, rate, "rec/s", records, cpu, detail=detail)]


def end_to_end_runs(system: str, size: int, summary: LatencySummary, cpu: CpuOfRun) -> list[ToolRun]:
    label = f"end-to-end {size_label(size)}"
    values = (("p50", summary.p50_ms), ("p99", summary.p99_ms), ("p99.9", summary.p999_ms))
    return [
        _run(system, f"{label} {name}", value, "ms", summary.records, cpu, True) for name, value in values
    ]


def table(runs: Sequence[ToolRun], base: str = "raftlog", peer: str = "kafka") -> str:
    """One line per row: each system's value and servers' CPU seconds per million records, and the
    ratio base/peer of the values (for a latency, a ratio under 1 is base's lead)."""
    rows: dict[str, dict[str, ToolRun]] = {}
    for run in runs:
        rows.setdefault(run.row, {})[run.system] = run
    head = (
        f"{'row':<30} {base:>11} {peer:>11} {'ratio':>6}  {'CPU s/M rec':>11} {'(' + peer + ')':>11}"
        f"  {'other%':>6} {'(' + peer + ')':>8}"
    )
    lines = [head]
    for row, by_system in rows.items():
        ours, theirs = by_system.get(base), by_system.get(peer)
        ratio = f"{ours.value / theirs.value:.2f}x" if ours and theirs and theirs.value else "-"
        lines.append(
            f"{row:<30} {_value(ours):>11} {_value(theirs):>11} {ratio:>6}"
            f"  {_cpu(ours):>11} {_cpu(theirs):>11}  {_other(ours):>6} {_other(theirs):>8}"
        )
    lines.append(
        f"records/s (higher is better) or ms (lower is better); ratio: {base}/{peer}; CPU s/M rec: the"
        " servers' CPU seconds per million records the tool moved; other%: processes other than the"
        " servers and the tools meanwhile (100 = one core)"
    )
    return "\n".join(lines)


def _value(run: ToolRun | None) -> str:
    if run is None:
        return "-"
    return f"{run.value:,.0f}" if run.unit == "rec/s" else f"{run.value:g} ms"


def _cpu(run: ToolRun | None) -> str:
    per_million = run.cpu_s_per_million if run else None
    return "-" if per_million is None else f"{per_million:.2f}"


def _other(run: ToolRun | None) -> str:
    return "-" if run is None or run.other_pct is None else f"{run.other_pct:.0f}"
