"""What ``raftlog bench cluster`` (``raftlog_bench.cluster``) measures and how it is printed: the options,
each cell's result, the goals and the table. Plain values and text: no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from raftlog_bench.cpu import CpuUse, other_pct_text
from raftlog_bench.stats import Goal, percentile_ms, rate, size_label

MiB = 1024 * 1024
REPLICATION_FACTOR = 3
NODE_COUNT = 3
LATENCY_GOAL_P99_MS = 5.0
LATE_AFTER_S = 0.001


@dataclass(frozen=True, slots=True)
class LatencySummary:
    count: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float

    @classmethod
    def of(cls, latencies_s: Sequence[float]) -> LatencySummary:
        return cls(
            count=len(latencies_s),
            p50_ms=percentile_ms(latencies_s, 50),
            p99_ms=percentile_ms(latencies_s, 99),
            p999_ms=percentile_ms(latencies_s, 99.9),
            max_ms=max(latencies_s, default=0.0) * 1e3,
        )


# -- results ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Options:
    seconds: float  # each produce cell
    consume_seconds: float  # time budget of each consume cell (it normally ends at the end offsets)
    concurrency: int  # produce requests in flight
    record_sizes: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    partition_counts: tuple[int, ...]
    latency_rate: float  # offered single-record requests per second
    latency_seconds: float
    latency_in_flight: int
    latency_record_bytes: int
    fetch_bytes: tuple[int, ...]
    idle_partitions: int
    idle_seconds: float
    idle_settle_seconds: float
    cells: tuple[str, ...]  # of "produce", "latency", "consume", "idle"
    wait_quiet_s: float = 0.0  # before each cell, wait at most this long for other processes to calm down


@dataclass(frozen=True, slots=True)
class ProduceCell:
    topic: str
    partitions: int
    record_bytes: int
    batch_records: int
    concurrency: int
    requests: int  # answered 200 with every record acknowledged
    records: int  # acknowledged records
    seconds: float  # until the last answer, after the time budget ran out
    records_per_s: float
    payload_mb_s: float
    latency: LatencySummary  # per request, successful ones
    forwarded_pct: float  # requests the asked node forwarded to the partition's leader
    errors: dict[str, int]
    cpu: CpuUse


@dataclass(frozen=True, slots=True)
class LatencyCell:
    topic: str
    partitions: int
    record_bytes: int
    offered_per_s: float
    scheduled: int
    sent: int
    acknowledged: int
    achieved_per_s: float  # acknowledged per second of the timetable's length
    late: int  # sent more than LATE_AFTER_S after their slot
    in_flight_max: int
    from_schedule: LatencySummary  # answer time minus the slot's time (open-loop latency)
    from_send: LatencySummary  # answer time minus the send time
    direct: LatencySummary  # from schedule, requests the asked node led
    forwarded: LatencySummary  # from schedule, requests forwarded to the leader
    errors: dict[str, int]
    cpu: CpuUse


@dataclass(frozen=True, slots=True)
class ConsumeCell:
    topic: str
    partitions: int
    record_bytes: int
    batch_records: int
    max_bytes: int
    fetches: int
    records: int
    expected: int  # acknowledged by the produce cell
    end_offsets: int  # sum of the partitions' end offsets when the read started
    seconds: float
    records_per_s: float
    payload_mb_s: float
    latency: LatencySummary  # per fetch
    complete: bool  # every partition read to its end offset within the time budget
    problems: list[str]  # missing offsets, altered values, records beyond what was acknowledged
    errors: dict[str, int]
    cpu: CpuUse


@dataclass(frozen=True, slots=True)
class IdleCell:
    partitions: int
    replication_factor: int
    create_seconds: float
    cpu: CpuUse


@dataclass(slots=True)
class Results:
    servers: list[str]
    started_here: bool
    data_directory: str | None
    machine: dict[str, str | int]
    options: Options
    produce: list[ProduceCell] = field(default_factory=list)
    latency: list[LatencyCell] = field(default_factory=list)
    consume: list[ConsumeCell] = field(default_factory=list)
    idle: list[IdleCell] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    node_log_problems: dict[str, list[str]] = field(default_factory=dict)


def errors_text(errors: dict[str, int]) -> str:
    return ", ".join(f"{key} x{count}" for key, count in sorted(errors.items())) or "-"


def goals_of(results: Results) -> list[Goal]:
    return [
        Goal(
            "single-record produce p99 (open loop, later performance target)",
            cell.from_schedule.p99_ms,
            LATENCY_GOAL_P99_MS,
            "ms",
            cell.from_schedule.p99_ms <= LATENCY_GOAL_P99_MS and cell.acknowledged == cell.scheduled,
        )
        for cell in results.latency
    ]


def any_problem(results: Results) -> bool:
    return (
        any(cell.errors for cell in results.produce)
        or any(cell.errors or cell.acknowledged != cell.scheduled for cell in results.latency)
        or any(cell.errors or cell.problems for cell in results.consume)
    )


# -- output ----------------------------------------------------------------------------------------------


def _cpu_columns(cpu: CpuUse) -> str:
    nodes = "/".join(f"{cpu.nodes_s[node]:.1f}" for node in sorted(cpu.nodes_s)) or "-"
    other = "?" if cpu.other_pct is None else f"{cpu.other_pct:.0f}"
    return f"{nodes:>14} {cpu.client_s:7.1f} {other:>6}"


def _per_record_us(cpu: CpuUse, records: int) -> str:
    if not cpu.nodes_s or records == 0:
        return "-"
    return f"{1e6 * cpu.nodes_total_s / records:.0f}"


def format_table(results: Results) -> str:
    options = results.options
    where = (
        f"a local cluster started by this run (raftlog dev, {NODE_COUNT} processes), data in"
        f" {results.data_directory}"
        if results.started_here
        else "a running cluster (--server); node CPU not measured"
    )
    lines = [
        "raftlog cluster benchmark",
        f"  servers {', '.join(results.servers)}: {where}",
        f"  topics: replication factor {REPLICATION_FACTOR}, default flush.policy (always: fsync per append);"
        " binary content type, random values, keys None",
        f"  the load generator is this process (one asyncio loop, aiohttp keep-alive): it shares the"
        f" machine's {results.machine['cpus']} CPUs with the nodes",
        "  MB = 10^6 payload bytes. CPU s = user+sys seconds during the cell (nodes n1/n2/n3 from"
        " /proc/PID/stat; cli = this process); other% = other processes (100 = one core).",
        "  fwd% = requests the asked node forwarded to the partition's leader.",
    ]
    if results.produce:
        lines += [
            "",
            f"Produce (closed loop: {options.concurrency} requests in flight, task j asks node j mod 3,"
            f" partitions round-robin; {options.seconds:g} s per cell)",
            f"  {'parts':>5} {'record':>7} {'batch':>5} {'requests':>8} {'records/s':>10} {'MB/s':>6}"
            f" {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'fwd%':>5} {'nodes CPU s':>14} {'cli s':>7}"
            f" {'other%':>6} {'µs/rec':>6}  errors",
        ]
        for cell in results.produce:
            lines.append(
                f"  {cell.partitions:>5} {size_label(cell.record_bytes):>7} {cell.batch_records:>5}"
                f" {cell.requests:>8} {cell.records_per_s:>10.0f} {cell.payload_mb_s:>6.1f}"
                f" {cell.latency.p50_ms:>7.1f} {cell.latency.p99_ms:>7.1f} {cell.latency.max_ms:>7.1f}"
                f" {cell.forwarded_pct:>5.0f} {_cpu_columns(cell.cpu)}"
                f" {_per_record_us(cell.cpu, cell.records):>6}"
                f"  {errors_text(cell.errors)}"
            )
        lines.append("  µs/rec = nodes' CPU microseconds per acknowledged record (all 3 replicas together)")
    for lat in results.latency:
        lines += [
            "",
            f"Single-record produce latency (open loop: {lat.offered_per_s:g} requests/s offered on a fixed"
            f" timetable for {options.latency_seconds:g} s, <= {lat.in_flight_max} in flight,"
            f" {size_label(lat.record_bytes)} values, {lat.partitions} partitions,"
            " request k to node k mod 3)",
            f"  scheduled {lat.scheduled}, sent {lat.sent}, acknowledged {lat.acknowledged},"
            f" achieved {lat.achieved_per_s:.0f}/s, late (> {LATE_AFTER_S * 1e3:g} ms after slot) {lat.late},"
            f" errors {errors_text(lat.errors)}",
            f"  {'latency':34s} {'count':>6} {'p50 ms':>7} {'p99 ms':>7} {'p99.9 ms':>8} {'max ms':>7}",
        ]
        for label, summary in (
            ("from scheduled time (all)", lat.from_schedule),
            ("from send time (all)", lat.from_send),
            ("from scheduled, asked node leads", lat.direct),
            ("from scheduled, forwarded", lat.forwarded),
        ):
            lines.append(
                f"  {label:34s} {summary.count:>6} {summary.p50_ms:>7.2f} {summary.p99_ms:>7.2f}"
                f" {summary.p999_ms:>8.2f} {summary.max_ms:>7.1f}"
            )
        lines.append(
            f"  nodes CPU s {'/'.join(f'{v:.1f}' for _, v in sorted(lat.cpu.nodes_s.items())) or '-'},"
            f" client {lat.cpu.client_s:.1f} s, other {other_pct_text(lat.cpu.other_pct)}%,"
            f" µs/rec {_per_record_us(lat.cpu, lat.acknowledged)}"
        )
    if results.consume:
        lines += [
            "",
            "Consume (read back every produced topic from offset 0 to its end; one task per partition,"
            " partition p asked of node p mod 3; binary fetches)",
            f"  {'parts':>5} {'record':>7} {'batch':>5} {'max_bytes':>9} {'fetches':>7} {'records':>8}"
            f" {'records/s':>10} {'MB/s':>6} {'p50 ms':>7} {'p99 ms':>7} {'nodes CPU s':>14} {'cli s':>7}"
            f" {'other%':>6}  read-back",
        ]
        for read in results.consume:
            verdict = (
                "ok"
                if read.complete and not read.problems
                else ("time-bounded" if not read.problems else "PROBLEM")
            )
            lines.append(
                f"  {read.partitions:>5} {size_label(read.record_bytes):>7} {read.batch_records:>5}"
                f" {read.max_bytes // MiB:>5} MiB {read.fetches:>7} {read.records:>8}"
                f" {read.records_per_s:>10.0f} {read.payload_mb_s:>6.1f} {read.latency.p50_ms:>7.1f}"
                f" {read.latency.p99_ms:>7.1f} {_cpu_columns(read.cpu)}  {verdict}"
                + (f"; errors {errors_text(read.errors)}" if read.errors else "")
            )
            lines += [f"      {problem}" for problem in read.problems]
    for idle in results.idle:
        per_node = ", ".join(
            f"{node} {100 * rate(cpu_s, idle.cpu.seconds):.1f}%"
            for node, cpu_s in sorted(idle.cpu.nodes_s.items())
        )
        lines += [
            "",
            f"Idle: {idle.partitions} partitions x RF {idle.replication_factor} (created and led in"
            f" {idle.create_seconds:.1f} s), over {idle.cpu.seconds:.1f} s",
            f"  nodes {100 * rate(idle.cpu.nodes_total_s, idle.cpu.seconds):.1f}% of one core"
            f" ({per_node or 'not measured'}); other processes {other_pct_text(idle.cpu.other_pct)}%",
        ]
    if results.goals:
        lines += ["", "Goals"]
        for goal in results.goals:
            lines.append(
                f"  {goal.name:64s} {goal.value:8.2f} {goal.unit} (goal <= {goal.target:g} {goal.unit})"
                f"  {'met' if goal.met else 'MISSED'}"
            )
    if results.started_here:
        lines += ["", "Node logs (ERROR / CRITICAL lines, tracebacks)"]
        if not results.node_log_problems:
            lines.append("  none")
        for node, found in sorted(results.node_log_problems.items()):
            lines += [f"  {node}: {line}" for line in found]
    return "\n".join(lines)
