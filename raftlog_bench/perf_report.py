"""What ``raftlog bench perf`` measured and how it reads: the workload and result records, the printed
report (table, per-second tails, RSS, group scaling, ratios) and the goals its numbers speak to. Pure:
nothing here runs a phase (``raftlog_bench.perf_phases`` does)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from raftlog_bench.cluster_report import LatencySummary, errors_text
from raftlog_bench.cpu import CpuUse
from raftlog_bench.kafka_peer import KAFKA_VERSION
from raftlog_bench.raftlog_target import LEADERS_SETTLE_S
from raftlog_bench.stats import rate, size_label

GOAL_IDLE_PCT = 10.0
GOAL_RESTART_S = 5.0
DURABILITY = {
    "raftlog": "majority fsynced before ack (flush.policy always)",
    "nats": "R3, file store, sync_interval: always (fsync before ack)",
    "rabbitmq": "R3 stream, quorum written before confirm, no fsync",
    "kafka": f"Apache Kafka {KAFKA_VERSION}, RF 3, min.insync.replicas 2, acked before fsync (its default)",
    "kafka-fsync": f"Apache Kafka {KAFKA_VERSION}, RF 3, min.insync.replicas 2, flush.messages=1 (fsync)",
}


@dataclass(frozen=True, slots=True)
class Workload:
    record_sizes: tuple[int, ...]
    batch_records: int
    partitions: int
    concurrency: int  # batches in flight
    seconds: float  # each produce phase
    acks: str
    consume: bool
    consume_seconds: float
    single_rate: float  # single-record requests/s offered; 0 = no single-record phase
    single_seconds: float
    single_record_bytes: int
    fetch_bytes: int
    wait_quiet_s: float
    route: str = "leader"  # raftlog: "leader" (as a Kafka client) or "any" node (non-leaders forward)
    produce_format: str = "batch"  # raftlog: a record batch the client encodes, or "json" (binary flavour)
    fetch_format: str = "batch"  # raftlog: the stored batches, decoded by the client, or "columnar" pages
    settle_s: float = LEADERS_SETTLE_S  # raftlog: leaders of a new topic stand still this long first
    compression: str = "none"  # raftlog: the topic's compression.type, and the batch producer's codec
    client: str = "http"  # raftlog: its HTTP API, or Kafka's protocol through confluent-kafka (librdkafka)
    # --transactions N: instead of the phases above, plain and transactional produce in rounds of N records
    # and read_committed reads of both (perf_transactions.py); 0: the phases above
    transaction_records: int = 0
    # end to end (Kafka clients): single records at this rate a second, read back by a consumer in the same
    # process, for single_seconds (perf_e2e.py); 0: no such phase
    e2e_rate: float = 0.0
    e2e_record_bytes: int = 1024
    # raftlog over HTTP: the consume phase's reads in this many processes, partition p read by process
    # p mod readers (readers.py); 1: every reader in the bench's own process
    readers: int = 1


@dataclass(frozen=True, slots=True)
class PhaseResult:
    system: str
    phase: str  # produce | consume | single | e2e (end to end) | group1, group3
    record_bytes: int
    batch_records: int
    partitions: int
    concurrency: int
    records: int  # acknowledged (produce, single) or read (consume)
    expected: int  # consume: records acknowledged before; single: requests scheduled
    seconds: float
    records_per_s: float
    mb_per_s: float  # payload, 10^6 bytes
    latency: LatencySummary
    errors: dict[str, int]
    server_cpu_pct: dict[str, float]  # per server process, 100 = one core
    client_cpu_pct: float
    other_cpu_pct: float | None  # other processes on the machine
    # single: the p99 of each second of the timetable (by scheduled time), to show stalls a window hides
    p99_per_second_ms: tuple[float, ...] = ()
    server_rss_mib: dict[str, float] = field(default_factory=dict)  # per server process at the phase's end
    # groups: records/s of each new group's read, in order (this result is the median one's)
    tries_per_s: tuple[float, ...] = ()
    # raftlog started here: waits of over SLOW_WAIT_S during the phase, all nodes together (a stall's witness)
    slow_waits: dict[str, int] = field(default_factory=dict)
    # single, through confluent-kafka: the CPU of the load generator's librdkafka threads in each second
    # (100 = one core), another stall's witness: an idempotent producer whose partition has its five
    # requests in flight spins until an answer comes (docs/performance.md)
    client_librdkafka_pct_per_second: tuple[float, ...] = ()
    # transactions phases: the wait after a round's last record was handed to the client, until its
    # transaction committed (commit_transaction) or, plain, its records were acknowledged (flush)
    commit_latency: LatencySummary | None = None


@dataclass(frozen=True, slots=True)
class IdleResult:
    partitions: int
    seconds: float
    server_cpu_pct: dict[str, float]
    other_cpu_pct: float | None
    create_seconds: float  # from the create request until every partition had a leader

    @property
    def total_pct(self) -> float:
        return sum(self.server_cpu_pct.values())


@dataclass(frozen=True, slots=True)
class RestartResult:
    partition_mib: float
    node: str
    was_leader: bool
    fill_seconds: float
    ready_seconds: float  # SIGKILL + restart until /status/ready answers 200
    serving_seconds: float  # until the restarted node answers a fetch of the last record
    other_cpu_pct: float | None


@dataclass(slots=True)
class Report:
    workload: Workload
    systems: list[str]
    machine: dict[str, Any]
    phases: list[PhaseResult] = field(default_factory=list)
    idle: IdleResult | None = None
    restart: RestartResult | None = None
    failures: dict[str, str] = field(default_factory=dict)  # system -> why it was not measured
    # raftlog with --compression: record bytes -> a batch's stored size over its uncompressed size
    stored_ratios: dict[int, float] = field(default_factory=dict)


# -- statistics and formatting (pure) --------------------------------------------------------------------


def cpu_percentages(cpu: CpuUse) -> tuple[dict[str, float], float, float | None]:
    seconds = cpu.seconds
    servers = {name: 100 * rate(used, seconds) for name, used in sorted(cpu.nodes_s.items())}
    return servers, 100 * rate(cpu.client_s, seconds), cpu.other_pct


def ratio(ours: float, theirs: float) -> float | None:
    """ours / theirs, or None when either side measured nothing."""
    if ours <= 0 or theirs <= 0:
        return None
    return ours / theirs


def phase_ratios(phases: Sequence[PhaseResult], peer: str) -> list[tuple[str, int, float | None]]:
    """(phase, record_bytes, raftlog / peer) for every phase both measured: records/s for produce and
    consume; for single-record produce and end to end the peer's p99 over raftlog's (above 1: raftlog is
    faster)."""
    ours = {(p.phase, p.record_bytes): p for p in phases if p.system == "raftlog"}
    rows = []
    for theirs in phases:
        if theirs.system != peer:
            continue
        mine = ours.get((theirs.phase, theirs.record_bytes))
        if mine is None:
            continue
        if theirs.phase in ("single", "e2e"):
            value = ratio(theirs.latency.p99_ms, mine.latency.p99_ms)
        else:
            value = ratio(mine.records_per_s, theirs.records_per_s)
        rows.append((theirs.phase, theirs.record_bytes, value))
    return rows


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"


def server_cpu_per_record_us(p: PhaseResult) -> float | None:
    """CPU microseconds all server processes together spent per record: less sensitive to other load
    on the machine than records/s."""
    if not p.server_cpu_pct or p.records == 0:
        return None
    return sum(p.server_cpu_pct.values()) / 100 * p.seconds / p.records * 1e6


def server_us_per_record(p: PhaseResult) -> str:
    value = server_cpu_per_record_us(p)
    return "-" if value is None else f"{value:.1f}"


def format_phase_row(p: PhaseResult) -> str:
    servers = "/".join(f"{value:.0f}" for value in p.server_cpu_pct.values()) or "-"
    latency = p.latency
    lat = (
        f"{latency.p50_ms:7.2f} {latency.p99_ms:7.2f} {latency.p999_ms:8.2f} {latency.max_ms:7.1f}"
        if latency.count
        else f"{'-':>7} {'-':>7} {'-':>8} {'-':>7}"
    )
    return (
        f"{p.system:9s} {p.phase:8s} {size_label(p.record_bytes):>6} {p.batch_records:>5}"
        f" {p.records_per_s:>10,.0f} {p.mb_per_s:>7.1f} {lat} {servers:>14} {server_us_per_record(p):>7}"
        f" {p.client_cpu_pct:>5.0f}"
        f" {_pct(p.other_cpu_pct):>5}  {errors_text(p.errors)}"
    )


def format_groups(phases: Sequence[PhaseResult]) -> list[str]:
    """How much faster a group of three reads than a group of one, per system and record size, and the
    rate of each new group read."""
    rates = {(p.system, p.record_bytes, p.phase): p.records_per_s for p in phases}
    lines = [
        f"{system:9s} group of three over group of one, {size_label(size)}: {value:.2f}x"
        f" ({rates[(system, size, 'group3')]:,.0f} vs {rates[(system, size, 'group1')]:,.0f} records/s)"
        for (system, size), value in group_scaling(phases).items()
    ]
    tries = [p for p in phases if len(p.tries_per_s) > 1]
    lines += [
        f"{p.system:9s} {p.phase} {size_label(p.record_bytes)}, each new group's records/s (median kept):"
        f" {' '.join(f'{r:,.0f}' for r in p.tries_per_s)}"
        for p in tries
    ]
    return ["", *lines] if lines else []


SLOW_WAIT_S = 0.05  # a journal fsync or a garbage collection this long shows in a per-second p99


def format_slow_waits(phases: Sequence[PhaseResult]) -> list[str]:
    """For raftlog's single-record phase: how many journal fsyncs and garbage collections took over
    SLOW_WAIT_S while it ran, the usual suspects when a second's p99 stands out."""
    lines = [
        f"{p.system:9s} {p.phase} phase, waits over {SLOW_WAIT_S * 1000:.0f} ms on the nodes: "
        + ", ".join(f"{what} {count}" for what, count in p.slow_waits.items())
        for p in phases
        if p.phase == "single" and p.slow_waits
    ]
    return ["", *lines] if lines else []


def format_rss(phases: Sequence[PhaseResult]) -> list[str]:
    """Each system's largest resident set per server process at the end of any phase."""
    largest: dict[str, dict[str, float]] = {}
    for p in phases:
        for server, mib in p.server_rss_mib.items():
            mine = largest.setdefault(p.system, {})
            mine[server] = max(mine.get(server, 0.0), mib)
    lines = [
        f"{system:9s} servers' RSS, the largest at a phase's end: "
        + "/".join(f"{mib:.0f}" for _, mib in sorted(servers.items()))
        + f" MiB ({sum(servers.values()):.0f} MiB in all)"
        for system, servers in largest.items()
    ]
    return ["", *lines] if lines else []


def format_seconds(phases: Sequence[PhaseResult]) -> list[str]:
    """Each system's single-record p99 second by second beside the window's: a stall of a few hundred
    milliseconds shows in its second even when the window's p99 hides it."""
    lines = []
    for p in phases:
        if p.phase == "single" and p.p99_per_second_ms:
            each = sorted(p.p99_per_second_ms)
            lines.append(
                f"{p.system:9s} single-record p99 per second: median {each[len(each) // 2]:.2f} ms, worst"
                f" {each[-1]:.2f} ms (window {p.latency.p99_ms:.2f} ms); by second: "
                + " ".join(f"{value:.1f}" for value in p.p99_per_second_ms)
            )
        if p.phase == "single" and any(p.client_librdkafka_pct_per_second):
            spin = p.client_librdkafka_pct_per_second
            lines.append(
                f"{p.system:9s} the load generator's librdkafka threads, % of a core: median"
                f" {sorted(spin)[len(spin) // 2]:.0f}, most {max(spin):.0f}; by second: "
                + " ".join(f"{value:.0f}" for value in spin)
            )
    return ["", *lines] if lines else []


TABLE_HEADER = (
    f"{'system':9s} {'phase':8s} {'record':>6} {'batch':>5} {'records/s':>10} {'MB/s':>7} {'p50 ms':>7}"
    f" {'p99 ms':>7} {'p99.9 ms':>8} {'max ms':>7} {'servers CPU%':>14} {'µs/rec':>7} {'cli%':>5}"
    f" {'oth%':>5}  errors"
)


def format_ratios(phases: Sequence[PhaseResult], peers: Sequence[str]) -> list[str]:
    if not peers:
        return []
    lines = [
        "",
        "raftlog / peer (records/s; for single-record produce and e2e: peer p99 / raftlog p99; above 1 ="
        " raftlog better)",
        f"  {'phase':8s} {'record':>6} " + " ".join(f"{'vs ' + peer:>12}" for peer in peers),
    ]
    table: dict[tuple[str, int], dict[str, float | None]] = {}
    for peer in peers:
        for phase, record_bytes, value in phase_ratios(phases, peer):
            table.setdefault((phase, record_bytes), {})[peer] = value
    for (phase, record_bytes), values in table.items():
        cells = []
        for peer in peers:
            value = values.get(peer)
            cells.append(f"{'-' if value is None else f'{value:.2f}x':>12}")
        lines.append(f"  {phase:8s} {size_label(record_bytes):>6} " + " ".join(cells))
    return lines


@dataclass(frozen=True, slots=True)
class Goal:
    name: str
    value: float
    target: float
    met: bool


# issue 38's goals against Apache Kafka: (peer, least raftlog / peer records/s for produce and consume)
KAFKA_THROUGHPUT_GOALS = (("kafka-fsync", 1.0), ("kafka", 0.5))
KAFKA_CPU_FACTOR = 1.5  # servers' CPU per record at most this times Kafka's, in every phase both measured


def _e2e_goals(phases: Sequence[PhaseResult]) -> list[Goal]:
    """Issue 74's: raftlog's end-to-end p50 and p99 at most Apache Kafka's default's (Kafka's / raftlog's
    >= 1)."""
    ours = next((p for p in phases if p.system == "raftlog" and p.phase == "e2e"), None)
    theirs = next((p for p in phases if p.system == "kafka" and p.phase == "e2e"), None)
    if ours is None or theirs is None:
        return []
    found = []
    for name in ("p50_ms", "p99_ms"):
        value = ratio(getattr(theirs.latency, name), getattr(ours.latency, name))
        if value is not None:
            label = f"end-to-end {name[:3]}: kafka's / raftlog's >= 1"
            found.append(Goal(label, value, 1.0, value >= 1.0))
    return found


def goals(report: Report) -> list[Goal]:
    """The performance goals that this report's numbers speak to."""
    found: list[Goal] = []
    for peer, factor in (("rabbitmq", 1.0), ("nats", 2.0), *KAFKA_THROUGHPUT_GOALS):
        for phase in ("produce", "consume"):
            for phase_name, record_bytes, value in phase_ratios(report.phases, peer):
                if phase_name == phase and value is not None:
                    found.append(
                        Goal(f"{phase} {size_label(record_bytes)}: raftlog / {peer} >= {factor:g}",
                             value, factor, value >= factor)
                    )  # fmt: skip
    for phase_name, _, value in phase_ratios(report.phases, "kafka-fsync"):
        if phase_name == "single" and value is not None:  # the peer's p99 over raftlog's
            found.append(Goal("single-record p99: kafka-fsync's / raftlog's >= 1", value, 1.0, value >= 1.0))
    found += _e2e_goals(report.phases)
    found += _group_goals(report.phases) + _cpu_goals(report.phases) + _transaction_goals(report.phases)
    if report.idle is not None:
        found.append(
            Goal(
                f"idle CPU % of one core, {report.idle.partitions} partitions <= 10",
                report.idle.total_pct,
                GOAL_IDLE_PCT,
                report.idle.total_pct <= GOAL_IDLE_PCT,
            )
        )
    if report.restart is not None:
        found.append(
            Goal(
                f"restart of a node holding {report.restart.partition_mib:.0f} MiB: serving within 5 s",
                report.restart.serving_seconds,
                GOAL_RESTART_S,
                report.restart.serving_seconds <= GOAL_RESTART_S,
            )
        )
    return found


def group_scaling(phases: Sequence[PhaseResult]) -> dict[tuple[str, int], float]:
    """(system, record bytes) -> records/s of the group of three over the group of one."""
    rates = {(p.system, p.record_bytes, p.phase): p.records_per_s for p in phases}
    return {
        (system, size): three / one
        for (system, size, phase), three in rates.items()
        if phase == "group3" and (one := rates.get((system, size, "group1")))
    }


def _group_goals(phases: Sequence[PhaseResult]) -> list[Goal]:
    """A group of three speeds up over one member at least as much as Kafka's (ours over theirs >= 1)."""
    scaling = group_scaling(phases)
    found = []
    for (system, size), theirs in scaling.items():
        ours = scaling.get(("raftlog", size))
        if system.startswith("kafka") and ours is not None:
            value = ours / theirs
            name = f"group of three over one, {size_label(size)}: raftlog's / {system}'s >= 1"
            found.append(Goal(name, value, 1.0, value >= 1.0))
    return found


def _cpu_goals(phases: Sequence[PhaseResult]) -> list[Goal]:
    """Servers' CPU per record at most KAFKA_CPU_FACTOR times Kafka's: the worst phase, per Kafka peer."""
    ours = {(p.phase, p.record_bytes): p for p in phases if p.system == "raftlog"}
    worst: dict[str, tuple[float, str]] = {}
    for theirs in phases:
        mine = ours.get((theirs.phase, theirs.record_bytes))
        if not theirs.system.startswith("kafka") or mine is None:
            continue
        value = ratio(server_cpu_per_record_us(mine) or 0.0, server_cpu_per_record_us(theirs) or 0.0)
        where = f"{theirs.phase} {size_label(theirs.record_bytes)}"
        if value is not None and value > worst.get(theirs.system, (0.0, ""))[0]:
            worst[theirs.system] = (value, where)
    return [
        Goal(f"servers' CPU per record / {system}'s <= {KAFKA_CPU_FACTOR:g} (worst: {where})", value,
             KAFKA_CPU_FACTOR, value <= KAFKA_CPU_FACTOR)
        for system, (value, where) in worst.items()
    ]  # fmt: skip


def _workload_line(w: Workload) -> str:
    if w.transaction_records:
        return (
            f"  workload: transactions of {w.transaction_records} records of"
            f" {', '.join(size_label(s) for s in w.record_sizes)}, each spread over {w.partitions} partitions"
            f" x 3 replicas, {w.concurrency} producers, {w.seconds:g} s per produce phase; plain: the same"
            f" rounds without transactions; -rc: read back at read_committed; confluent-kafka on both"
            f" systems (idempotent, acks=all, linger 5 ms)"
        )
    return (
        f"  workload: records {', '.join(size_label(s) for s in w.record_sizes)}, batch {w.batch_records},"
        f" {w.partitions} partitions x 3 replicas, {w.concurrency} batches in flight, {w.seconds:g} s per"
        f" produce phase, acks={w.acks}; single-record at {w.single_rate:g}/s for {w.single_seconds:g} s;"
        + (
            f" end to end (e2e) {size_label(w.e2e_record_bytes)} at {w.e2e_rate:g}/s, one consumer;"
            if w.e2e_rate > 0 and w.client == "kafka"
            else ""
        )
        + (
            " raftlog client: Kafka's protocol (confluent-kafka: idempotent, acks=all, linger 5 ms, single"
            " records at linger 0)"
            if w.client == "kafka"
            else f" raftlog produce body: {w.produce_format}, fetch: {w.fetch_format}, route: {w.route}"
        )
        + f", compression: {w.compression}"
    )


# -- transactions (raftlog bench perf --transactions) -----------------------------------------------------

PLAIN = "plain"  # rounds of N records produced by idempotent producers, each round waited for (flush)
TRANSACTIONAL = "txn"  # the same rounds, each one transaction (begin, N records, commit)
READ_COMMITTED = "-rc"  # after a produce phase's name: its topic read back by a read_committed consumer
TRANSACTIONS_LATENCY = (
    "Latency per round of records: plain, from its first record handed to the client until every one"
    " was acknowledged (flush); txn, from begin_transaction until commit_transaction returned; commit ="
    " the part after the round's last record was handed to the client."
)


@dataclass(frozen=True, slots=True)
class TransactionsRow:
    """One system's transactional produce against its plain produce at one record size."""

    system: str
    record_bytes: int
    plain: PhaseResult
    transactional: PhaseResult
    plain_read: PhaseResult | None
    transactional_read: PhaseResult | None

    @property
    def slowdown(self) -> float | None:
        """How many times longer a record takes in transactions: plain records/s over transactional."""
        return ratio(self.plain.records_per_s, self.transactional.records_per_s)

    @property
    def read_slowdown(self) -> float | None:
        if self.plain_read is None or self.transactional_read is None:
            return None
        return ratio(self.plain_read.records_per_s, self.transactional_read.records_per_s)


def transaction_rows(phases: Sequence[PhaseResult]) -> list[TransactionsRow]:
    """Each (system, record size) that measured both plain and transactional produce, in report order."""
    by = {(p.system, p.record_bytes, p.phase): p for p in phases}
    rows = []
    for (system, size, phase), transactional in by.items():
        plain = by.get((system, size, PLAIN))
        if phase != TRANSACTIONAL or plain is None:
            continue
        rows.append(
            TransactionsRow(
                system, size, plain, transactional, by.get((system, size, PLAIN + READ_COMMITTED)),
                by.get((system, size, TRANSACTIONAL + READ_COMMITTED)),
            )
        )  # fmt: skip
    return rows


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _p50_p99(latency: LatencySummary | None) -> str:
    return "-" if latency is None or latency.count == 0 else f"{latency.p50_ms:.1f}/{latency.p99_ms:.1f}"


def format_transactions(phases: Sequence[PhaseResult]) -> list[str]:
    """The transactions table: per system, records/s plain and in transactions and the slowdown between
    them, latency per transaction and of its commit (p50/p99 ms) beside a plain round's and its flush,
    the read_committed reads of both topics, and the servers' CPU per record of both produce phases."""
    rows = transaction_rows(phases)
    if not rows:
        return []
    lines = [
        "",
        "transactions against plain produce (slowdown = plain records/s / transactional records/s; latency"
        " p50/p99 ms per round: whole, then its commit or flush)",
        f"  {'system':11s} {'record':>6} {'plain/s':>9} {'txn/s':>9} {'slowdown':>8} {'txn':>13}"
        f" {'commit':>13} {'plain':>13} {'flush':>13} {'read plain/s':>12} {'read txn/s':>11}"
        f" {'read slowdown':>13} {'µs/rec plain/txn':>16}",
    ]
    for row in rows:
        plain, txn = row.plain, row.transactional
        read_plain = "-" if row.plain_read is None else f"{row.plain_read.records_per_s:,.0f}"
        read_txn = "-" if row.transactional_read is None else f"{row.transactional_read.records_per_s:,.0f}"
        cpu = f"{server_us_per_record(plain)}/{server_us_per_record(txn)}"
        lines.append(
            f"  {row.system:11s} {size_label(row.record_bytes):>6} {plain.records_per_s:>9,.0f}"
            f" {txn.records_per_s:>9,.0f} {_times(row.slowdown):>8} {_p50_p99(txn.latency):>13}"
            f" {_p50_p99(txn.commit_latency):>13} {_p50_p99(plain.latency):>13}"
            f" {_p50_p99(plain.commit_latency):>13} {read_plain:>12} {read_txn:>11}"
            f" {_times(row.read_slowdown):>13} {cpu:>16}"
        )
    return lines


def _transaction_goals(phases: Sequence[PhaseResult]) -> list[Goal]:
    """Issue 40: transactions slow raftlog's produce down no more than they slow Kafka's (the slowdown
    ratio, raftlog's over the Kafka peer's, at most 1)."""
    rows = transaction_rows(phases)
    ours = {row.record_bytes: row.slowdown for row in rows if row.system == "raftlog"}
    found = []
    for row in rows:
        mine = ours.get(row.record_bytes)
        theirs = row.slowdown
        if not row.system.startswith("kafka") or mine is None or theirs is None:
            continue
        value = mine / theirs
        name = (
            f"transactions of {row.transactional.batch_records}, {size_label(row.record_bytes)}: raftlog's"
            f" slowdown / {row.system}'s <= 1"
        )
        found.append(Goal(name, value, 1.0, value <= 1.0))
    return found


def format_report(report: Report) -> str:
    w = report.workload
    lines = [
        "raftlog bench perf",
        _workload_line(w),
        f"  machine: {report.machine.get('cpus')} CPUs, Python {report.machine.get('python')},"
        f" event loop {report.machine.get('loop')}; the load generator shares the machine with the servers",
    ]
    for system in report.systems:
        lines.append(f"  {system}: {DURABILITY.get(system, '')}")
    lines += [
        "  CPU% per server process and of this client (100 = one core); µs/rec = servers' CPU per record;"
        " oth% = other processes during the phase (noise). "
        + (
            TRANSACTIONS_LATENCY
            if w.transaction_records
            else "Latency per batch (produce), per request from its scheduled time (single), from its"
            " scheduled time to the consumer's receipt (e2e)."
        ),
        "",
        TABLE_HEADER,
    ]
    lines += [format_phase_row(p) for p in report.phases]
    for system, why in report.failures.items():
        lines.append(f"{system:9s} not measured: {why}")
    lines += format_seconds(report.phases)
    lines += format_slow_waits(report.phases)
    lines += format_rss(report.phases)
    lines += format_groups(report.phases)
    lines += format_transactions(report.phases)
    lines += format_ratios(report.phases, [s for s in report.systems if s != "raftlog"])
    if report.stored_ratios:
        sizes = ", ".join(
            f"{ratio:.3f} at {size_label(size)}" for size, ratio in sorted(report.stored_ratios.items())
        )
        lines += ["", f"compression {w.compression}: batches stored at {sizes} of their uncompressed size"]
    if report.idle is not None:
        idle = report.idle
        per = ", ".join(f"{name} {value:.1f}%" for name, value in idle.server_cpu_pct.items())
        lines += [
            "",
            f"idle: {idle.partitions} partitions x 3 replicas over {idle.seconds:.0f} s: nodes"
            f" {idle.total_pct:.1f}% of one core ({per}); other processes {_pct(idle.other_cpu_pct)}%;"
            f" the topic was created and led in {idle.create_seconds:.2f} s",
        ]
    if report.restart is not None:
        r = report.restart
        lines += [
            "",
            f"restart: {r.node} ({'leader' if r.was_leader else 'follower'}) holding a partition of"
            f" {r.partition_mib:.0f} MiB (written in {r.fill_seconds:.0f} s), SIGKILL and restart: ready"
            f" after {r.ready_seconds:.2f} s, serving the last record after {r.serving_seconds:.2f} s;"
            f" other processes {_pct(r.other_cpu_pct)}%",
        ]
    found = goals(report)
    if found:
        lines += ["", "goals"]
        lines += [f"  {goal.name:76s} {goal.value:8.2f}  {'met' if goal.met else 'MISSED'}" for goal in found]
    return "\n".join(lines)


def phase_from_dict(data: dict[str, Any]) -> PhaseResult:
    commit = data.get("commit_latency")
    return PhaseResult(
        **{
            **data,
            "latency": LatencySummary(**data["latency"]),
            "p99_per_second_ms": tuple(data.get("p99_per_second_ms", ())),
            "tries_per_s": tuple(data.get("tries_per_s", ())),
            "client_librdkafka_pct_per_second": tuple(data.get("client_librdkafka_pct_per_second", ())),
            "commit_latency": None if commit is None else LatencySummary(**commit),
        }
    )


def workload_from_dict(data: dict[str, Any]) -> Workload:
    return Workload(**{**data, "record_sizes": tuple(data["record_sizes"])})
