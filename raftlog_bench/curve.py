"""``raftlog bench curve``: single-record produce latency against the offered rate.

One ``raftlog bench perf`` single-record phase per rate, each on a fresh local 3-node cluster (with the
short batched warm-up phase the perf command runs first), then one table: achieved rate, p50 / p99 /
p99.9 / max latency, servers' CPU per request and the load generator's CPU. Runs are sequential; a rate
takes about 40 s plus ``--seconds``.

    raftlog bench curve [--rates 100,300,600,800,1000] [--seconds 15] [--dir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict, dataclass

from raftlog_bench import perf
from raftlog_bench.arguments import add_json_argument, refused, standalone_parser
from raftlog_bench.output import emit
from raftlog_bench.perf_report import Report

DESCRIPTION = "single-record produce latency at several offered rates (one fresh cluster per rate)"
RATES_DEFAULT = "100,300,600,800,1000"
RATE_MAX = 100_000


@dataclass(frozen=True, slots=True)
class CurvePoint:
    offered_per_s: float
    achieved_per_s: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    servers_us_per_request: float
    client_cpu_pct: float
    errors: int


def parse_rates(text: str) -> list[float]:
    """``"100,300,1000"`` -> [100.0, 300.0, 1000.0]; ValueError says which part is wrong."""
    rates = []
    for part in text.split(","):
        try:
            rate = float(part)
        except ValueError:
            raise ValueError(f"--rates: {part.strip()!r} is not a number") from None
        if not 0 < rate <= RATE_MAX:
            raise ValueError(f"--rates: {rate:g} must be in (0, {RATE_MAX}]")
        rates.append(rate)
    return rates


def point_of(report: Report, rate: float) -> CurvePoint:
    """The raftlog single-record phase of one perf report as a point of the curve."""
    phases = [p for p in report.phases if p.system == "raftlog" and p.phase == "single"]
    if len(phases) != 1:
        reason = report.failures.get("raftlog", "no failure recorded")
        raise RuntimeError(f"rate {rate:g}/s: {len(phases)} raftlog single-record phases ({reason})")
    phase = phases[0]
    servers_cpu_s = sum(phase.server_cpu_pct.values()) / 100 * phase.seconds
    return CurvePoint(
        offered_per_s=rate,
        achieved_per_s=phase.records_per_s,
        p50_ms=phase.latency.p50_ms,
        p99_ms=phase.latency.p99_ms,
        p999_ms=phase.latency.p999_ms,
        max_ms=phase.latency.max_ms,
        servers_us_per_request=servers_cpu_s / max(1, phase.records) * 1e6,
        client_cpu_pct=phase.client_cpu_pct,
        errors=sum(phase.errors.values()),
    )


def format_points(points: list[CurvePoint]) -> str:
    lines = ["offered/s  achieved/s  p50 ms  p99 ms  p99.9 ms  max ms  servers µs/req  client CPU%  errors"]
    for p in points:
        lines.append(
            f"{p.offered_per_s:9,.0f}  {p.achieved_per_s:10,.0f}  {p.p50_ms:6.2f}  {p.p99_ms:6.2f}"
            f"  {p.p999_ms:8.2f}  {p.max_ms:6.1f}  {p.servers_us_per_request:14,.0f}"
            f"  {p.client_cpu_pct:11.0f}  {p.errors:6d}"
        )
    return "\n".join(lines)


def perf_args(rate: float, seconds: float, directory: str | None) -> argparse.Namespace:
    parser = standalone_parser("perf", perf.DESCRIPTION, perf.add_arguments)
    argv = ["--record-size", "100", "--duration", "1", "--no-consume", "--single-rate", f"{rate:g}"]
    argv += ["--single-seconds", f"{seconds:g}"]
    if directory is not None:
        argv += ["--dir", directory]
    return parser.parse_args(argv)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rates", default=RATES_DEFAULT, help=f"offered requests/s ({RATES_DEFAULT})")
    parser.add_argument("--seconds", type=float, default=15.0, help="single-record phase per rate (15)")
    parser.add_argument("--dir", default=None, help="where the clusters' data directories go (current)")
    add_json_argument(parser, "the points")


def run_from_args(args: argparse.Namespace) -> int:
    try:
        rates = parse_rates(args.rates)
        if not 0 < args.seconds <= 600:
            raise ValueError("--seconds must be in (0, 600]")
        if args.dir is not None and not os.path.isdir(args.dir):
            raise ValueError(f"--dir {args.dir}: not a directory")
    except ValueError as error:
        return refused("curve", str(error))
    points = []
    for number, rate in enumerate(rates, 1):
        print(f"raftlog bench curve: rate {number}/{len(rates)}: {rate:g}/s", file=sys.stderr, flush=True)
        options = perf_args(rate, args.seconds, args.dir)
        points.append(point_of(perf.run(options, perf.workload_of(options), []), rate))
    emit(args.json, format_points(points), [asdict(p) for p in points])
    return 1 if any(p.errors for p in points) else 0


def main(argv: list[str] | None = None) -> int:
    return run_from_args(standalone_parser("curve", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
