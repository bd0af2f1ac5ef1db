"""``raftlog bench scale``'s pure parts: argument and /proc parsing, a size's row and the table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from raftlog_bench.arguments import positive_ints
from raftlog_bench.cluster_report import LatencySummary

PARTITIONS_MAX = 10_000  # a topic's limit (partitions/controller/placement.py)
PHASES = ("create", "idle", "restart", "delete")


def parse_sizes(text: str) -> tuple[int, ...]:
    """``"100,1000"`` -> (100, 1000); every size from 1 to a topic's 10,000 partitions."""
    return positive_ints(text, maximum=PARTITIONS_MAX)


def metric_values(text: str) -> dict[str, float]:
    """The unlabelled series of a Prometheus text page."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or "{" in line:
            continue
        name, _, value = line.partition(" ")
        try:
            values[name] = float(value)
        except ValueError:
            continue
    return values


def rss_mib(status: str) -> float | None:
    """VmRSS of a /proc/PID/status text, in MiB."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def recovered(window_pct: float, idle_pct: float) -> bool:
    """A CPU window is back to idle: under twice the idle figure plus 2% of a core."""
    return window_pct <= 2 * idle_pct + 2.0


@dataclass(slots=True)
class ProbeSummary:
    sent: int
    failed: int
    latency: LatencySummary

    @classmethod
    def of(cls, samples: Sequence[tuple[float, bool]]) -> ProbeSummary:
        return cls(
            len(samples), sum(1 for _, ok in samples if not ok), LatencySummary.of([s for s, _ in samples])
        )

    def cell(self) -> str:
        if not self.sent:
            return "-"
        latency = self.latency
        percentiles = f"{latency.p50_ms:.0f}/{latency.p99_ms:.0f}/{latency.max_ms:.0f} ms"
        return f"{percentiles}, {self.failed}/{self.sent} failed"


@dataclass(slots=True)
class Row:
    partitions: int
    create_answer_s: float | None = None
    create_open_s: float | None = None  # every replica of every node open
    idle_cpu_pct: float | None = None  # cluster total, 100 = one core
    rss_mib_max: float | None = None
    fds_max: int | None = None
    restart_open_s: float | None = None
    restart_quiet_s: float | None = None
    restart_elections: float | None = None  # elections n3's replicas held on timeout
    delete_s: float | None = None
    controller_elections: int | None = None  # controller term changes seen during the delete
    probe: dict[str, ProbeSummary] = field(default_factory=dict)
    timeouts: list[str] = field(default_factory=list)
    log_problems: int = 0

    @property
    def opened_per_s(self) -> float | None:
        if not self.create_open_s:
            return None
        return (self.partitions + 1) / self.create_open_s  # replicas per node: one of each partition


def number(value: float | None, digits: int = 0, unit: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def format_table(rows: Sequence[Row]) -> str:
    lines = [
        "| partitions | create answer | all open | open/s per node | idle CPU | RSS max | fds max "
        "| restart: n3 open | restart: quiet | n3 elections | delete | controller elections |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        cells = (
            f"{row.partitions:,}",
            number(row.create_answer_s, 1, " s"),
            number(row.create_open_s, 1, " s"),
            number(row.opened_per_s),
            number(row.idle_cpu_pct, 1, "%"),
            number(row.rss_mib_max, 0, " MiB"),
            number(row.fds_max),
            number(row.restart_open_s, 1, " s"),
            number(row.restart_quiet_s, 0, " s"),
            number(row.restart_elections),
            number(row.delete_s, 1, " s"),
            number(row.controller_elections),
        )
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Probe produce (p50/p99/max, failed/sent) per phase:")
    lines.append("")
    lines.append("| partitions | create | idle | restart | delete |")
    lines.append("|---:|---|---|---|---|")
    for row in rows:
        probes = [row.probe[phase].cell() if phase in row.probe else "-" for phase in PHASES]
        lines.append(f"| {row.partitions:,} | " + " | ".join(probes) + " |")
    notes = [f"{row.partitions:,}: {', '.join(row.timeouts)} timed out" for row in rows if row.timeouts]
    notes += [
        f"{row.partitions:,}: {row.log_problems} ERROR lines in node logs" for row in rows if row.log_problems
    ]
    if notes:
        lines.append("")
        lines.extend(notes)
    return "\n".join(lines)
