"""``raftlog bench perf``: producers and consumers against a cluster, in the manner of
kafka-producer-perf-test and the OpenMessaging benchmark, optionally side by side with Apache Kafka (its
default, and ``kafka-fsync``: ``flush.messages=1``), NATS JetStream and RabbitMQ streams running the same
workload in the same run on the same machine; beside Kafka, raftlog and Kafka are driven by the same
confluent-kafka producer and consumer.

Usage::

    raftlog bench perf [--servers URL,...] [--record-size 100,1024] [--batch-size 1000] [--partitions 3]
                       [--concurrency 8] [--duration 10] [--acks all] [--single-rate 1000]
                       [--compare kafka,kafka-fsync,nats,rabbitmq] [--idle-partitions 100]
                       [--restart-mib 1024]
                       [--json FILE]
    raftlog bench perf --transactions [N] [--compare kafka,kafka-fsync] [--concurrency 8] [--duration 10]

Per system (raftlog first, then each peer of ``--compare``), per record size:

1. produce: a closed loop of ``--concurrency`` batches in flight for ``--duration`` seconds; worker j
   asks node j mod 3 and walks the partitions round-robin from j. A batch is ``--batch-size`` records
   of ``--record-size`` random bytes; it counts when the system acknowledged every record of it (raftlog:
   a majority has it fsynced; NATS: ``sync_interval: always``; RabbitMQ streams: a quorum wrote it, no
   fsync). Latency is per batch, from send to the last acknowledgement;
2. consume: every partition read back from its start until all acknowledged records were read (one
   reader per partition, bounded by ``--consume-seconds``);
3. with Kafka clients, groups: a new consumer group of one member, then of three, reads every
   acknowledged record; each size is read by ``GROUP_TRIES`` new groups and the median one is kept, all
   of them printed (whether members starting together share the first generation is a matter of when
   each join arrives, on Kafka too).

Then single-record produce at ``--single-rate`` requests/s offered on a fixed timetable (open loop:
latency counts from the scheduled time, or from the send where the request left up to 1 ms before it),
``--single-seconds`` long. Through Kafka clients (``--client kafka``, so with ``--compare kafka``), then
end to end (``perf_e2e.py``): single records of ``--e2e-record-size`` at ``--e2e-rate`` a second, each
timed from its send until a consumer in this process receives it. For raftlog started here, also: the
idle CPU of the nodes holding ``--idle-partitions`` partitions, and the time a node holding a partition
of ``--restart-mib`` MiB takes to serve again after a crash (SIGKILL, restart with the same argv).

``--transactions [N]`` measures instead what Kafka's transactions cost a producer: plain idempotent
rounds of N records (default 100) against the same rounds as transactions, each topic read back at
read_committed, on raftlog and on each Kafka peer through the same confluent-kafka settings
(``perf_transactions.py``); the report adds each system's slowdown and the goal that raftlog's be no
worse than Kafka's.

CPU is read from /proc/PID/stat for each server process, for this process (the load generator) and for
the whole machine; "other" is what other processes used during the phase (the machine is shared: a
noisy neighbour lowers every number). Every loop is bounded by its duration. Numbers, never assertions.

This module is the command: its options and their checks, and the run over the systems it names. The
load loops are ``perf_phases.py``'s (idle and restart: ``perf_raftlog_phases.py``), starting and stopping
each system ``perf_systems.py``'s, the results and their table ``perf_report.py``'s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict

from raftlog_bench.arguments import (
    add_dir_argument,
    add_json_argument,
    add_wait_quiet_argument,
    config_of,
    positive_ints,
    refused,
    standalone_parser,
)
from raftlog_bench.cluster_http import parse_servers
from raftlog_bench.loop import install_event_loop
from raftlog_bench.output import emit, say
from raftlog_bench.peers import PEERS
from raftlog_bench.perf_report import Report, Workload, format_report, goals
from raftlog_bench.perf_systems import (
    load_child,
    preflight,
    run_kafka,
    run_nats,
    run_rabbitmq,
    run_raftlog,
    stop_on_signals,
)
from raftlog_bench.processes import PeerMissing
from raftlog_bench.raftlog_target import FETCH_FORMATS, LEADERS_SETTLE_S, PRODUCE_FORMATS, ROUTES
from raftlog_bench.readers import READERS_MAX
from raftlog_bench.targets import COMPRESSIONS

KiB = 1024
MiB = 1024 * 1024
SYSTEMS = ("raftlog", *PEERS)
ACKS = ("all",)
CLIENTS = ("http", "kafka")


def run(args: argparse.Namespace, workload: Workload, peers: list[str]) -> Report:
    """Each system in turn (raftlog, then each of ``peers``; or ``--system`` alone) into one report; a peer
    whose software is missing is the report's failure, and the next system runs."""
    loop_name = install_event_loop()
    machine = {"cpus": os.cpu_count() or 0, "python": sys.version.split()[0], "loop": loop_name}
    systems = ["raftlog", *peers] if args.system == "raftlog" else [args.system]
    report = Report(workload, systems, machine)
    servers = parse_servers(args.servers) if args.servers else None
    for system in systems:
        started = time.perf_counter()
        try:
            if system == "raftlog":
                run_raftlog(
                    workload, args.dir, servers, os.environ.get("RAFTLOG_ADMIN_TOKEN"), args.keep,
                    args.idle_partitions, args.idle_seconds, args.restart_mib, report,
                )  # fmt: skip
            elif system == "nats":
                run_nats(workload, args.dir, report)
            elif system in ("kafka", "kafka-fsync"):
                run_kafka(workload, args.dir, report, flush_each=system == "kafka-fsync")
            else:
                run_rabbitmq(workload, args.dir, report)
        except PeerMissing as exc:
            report.failures[system] = str(exc)
            say(f"{system}: {exc}")
        say(f"{system}: done in {time.perf_counter() - started:.0f} s")
    return report


# -- command line ----------------------------------------------------------------------------------------


def parse_peers(text: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [peer for peer in chosen if peer not in PEERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: peers are {','.join(PEERS)}")
    return list(dict.fromkeys(chosen))


DESCRIPTION = (
    "Producers and consumers against a 3-node cluster (records/s, MB/s, latency percentiles, CPU),"
    " optionally side by side with NATS JetStream and RabbitMQ streams."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", default=None, metavar="URL[,URL...]",
                        help="an existing raftlog cluster (default: start 3 nodes on 127.0.0.1)")  # fmt: skip
    # the admin token: $RAFTLOG_ADMIN_TOKEN only; never in argv, which every local user reads (ps)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument(
        "--record-size", type=positive_ints, default=(100,), help="bytes per record, a list (100)"
    )
    parser.add_argument("--batch-size", type=int, default=1000, help="records per batch (1000)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions, 3 replicas each (3)")
    parser.add_argument("--concurrency", type=int, default=8, help="batches in flight (8)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per produce phase (10)")
    parser.add_argument("--acks", choices=ACKS, default="all",
                        help="all: acknowledged once a majority has the record (the only mode)")  # fmt: skip
    parser.add_argument("--no-consume", action="store_true", help="skip reading back")
    parser.add_argument("--consume-seconds", type=float, default=30.0, help="read-back time bound (30)")
    parser.add_argument("--fetch-mib", type=int, default=4, help="raftlog fetch max_bytes, MiB (4)")
    parser.add_argument("--route", choices=ROUTES, default="leader",
                        help="raftlog requests go to the partition's leader, or to any node, which "
                        "forwards (leader)")  # fmt: skip
    parser.add_argument("--produce-format", choices=PRODUCE_FORMATS, default="batch",
                        help="raftlog produce body: a record batch encoded by the client per request, "
                        "as a Kafka producer sends, or JSON in the binary flavour (batch)")  # fmt: skip
    parser.add_argument("--fetch-format", choices=FETCH_FORMATS, default="batch",
                        help="raftlog reads: the stored batches, decoded and CRC-checked by the client, "
                        "columnar msgpack pages, or the JSON answer of binary-flavour rows "
                        "(batch)")  # fmt: skip
    parser.add_argument("--readers", type=int, default=1, metavar="N",
                        help="raftlog over HTTP: read the consume phase in N processes, partition p by "
                        "process p mod N, as an application that parses answers faster than one Python "
                        "process does; their CPU counts as the client's (1)")  # fmt: skip
    parser.add_argument("--client", choices=CLIENTS, default=None,
                        help="raftlog through its HTTP API, or through Kafka's protocol with "
                        "confluent-kafka (librdkafka: idempotent, acks=all, linger 5 ms; single records "
                        "with linger 0), the client Kafka's peers are driven with (default: kafka when "
                        "--compare names Kafka, else http)")  # fmt: skip
    parser.add_argument("--compression", choices=tuple(COMPRESSIONS), default="none",
                        help="raftlog: the topic's compression.type, used by the batch producer too, on "
                        "varied log-line records; prints the stored size ratio (none)")  # fmt: skip
    parser.add_argument("--transactions", dest="transaction_records", type=int, nargs="?", const=100,
                        default=None, metavar="N",
                        help="instead of the phases above: --concurrency producers in rounds of N records"
                        " (default 100) spread over the partitions, plain (idempotent, each round"
                        " flushed) and then each round one transaction (begin, N records, commit), each"
                        " topic read back at read_committed; through confluent-kafka, on raftlog and each"
                        " Kafka peer of --compare; prints the slowdown of each")  # fmt: skip
    parser.add_argument("--single-rate", type=float, default=1000.0,
                        help="single-record requests/s offered; 0 skips the phase (1000)")  # fmt: skip
    parser.add_argument("--single-seconds", type=float, default=10.0, help="single-record phase (10)")
    parser.add_argument("--single-record-size", type=int, default=100, help="single-record bytes (100)")
    parser.add_argument("--e2e-rate", type=float, default=100.0,
                        help="end to end (Kafka clients): single records a second, each timed from its send"
                        " until a consumer in this process receives it, for --single-seconds; 0 skips the"
                        " phase (100)")  # fmt: skip
    parser.add_argument("--e2e-record-size", type=int, default=1024, help="end-to-end record bytes (1024)")
    parser.add_argument("--compare", type=parse_peers, default=[], metavar="kafka,kafka-fsync,nats,rabbitmq",
                        help="also run the same workload against these peers, then print ratios")  # fmt: skip
    parser.add_argument("--system", choices=SYSTEMS, default="raftlog",
                        help="measure only this system (default raftlog, plus --compare)")  # fmt: skip
    parser.add_argument("--idle-partitions", type=int, default=0,
                        help="idle CPU of raftlog holding N partitions (0 = skip)")  # fmt: skip
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="idle window (10)")
    parser.add_argument("--restart-mib", type=int, default=0,
                        help="restart a raftlog node holding N MiB (0 = skip)")  # fmt: skip
    add_wait_quiet_argument(parser, "before each phase")
    parser.add_argument("--settle-seconds", type=float, default=LEADERS_SETTLE_S, metavar="S",
                        help="raftlog: after creating a phase's topic, wait until its partition leaders "
                             "stood still S s (longer than a round of the leader balancer), and after "
                             "deleting it until every node removed its files "
                             f"(default {LEADERS_SETTLE_S:g}; 0 = neither wait)")  # fmt: skip
    add_dir_argument(parser, "the data directories")
    parser.add_argument("--keep", action="store_true", help="keep raftlog's data directory")
    add_json_argument(parser, "the results")
    parser.add_argument("--load-child", default=None, help=argparse.SUPPRESS)


def client_of(args: argparse.Namespace) -> str:
    """raftlog's client: the one asked for, else Kafka's beside a Kafka peer (the same client on both,
    so the ratio compares the servers), else HTTP."""
    if args.client is not None:
        return str(args.client)
    if args.transaction_records:
        return "kafka"
    return "kafka" if any(peer.startswith("kafka") for peer in args.compare) else "http"


def problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, or None."""
    client = client_of(args)
    checks: list[tuple[bool, str]] = [
        (
            args.token is None,
            "--token would show the admin token to every local user (ps): set $RAFTLOG_ADMIN_TOKEN",
        ),
        (0 < args.duration <= 600, "--duration must be in (0, 600]"),
        (
            args.transaction_records is None or 1 <= args.transaction_records <= 10_000,
            "--transactions N must be in [1, 10000]",
        ),
        (1 <= args.batch_size <= 100_000, "--batch-size must be in [1, 100000]"),
        (1 <= args.partitions <= 1000, "--partitions must be in [1, 1000]"),
        (1 <= args.concurrency <= 1024, "--concurrency must be in [1, 1024]"),
        (all(size <= MiB for size in args.record_size), "--record-size values must be <= 1 MiB"),
        (0 < args.consume_seconds <= 600, "--consume-seconds must be in (0, 600]"),
        (1 <= args.fetch_mib <= 64, "--fetch-mib must be in [1, 64]"),
        (1 <= args.readers <= READERS_MAX, f"--readers must be in [1, {READERS_MAX}]"),
        (
            args.readers == 1 or (client == "http" and args.system == "raftlog" and not args.compare),
            "--readers reads raftlog over HTTP alone: --client http, no --compare (run a peer with"
            " --system after)",
        ),
        (0 <= args.single_rate <= 100_000, "--single-rate must be in [0, 100000]"),
        (0 < args.single_seconds <= 600, "--single-seconds must be in (0, 600]"),
        (1 <= args.single_record_size <= MiB, "--single-record-size must be in [1, 1 MiB]"),
        (0 <= args.e2e_rate <= 10_000, "--e2e-rate must be in [0, 10000]"),
        (1 <= args.e2e_record_size <= MiB, "--e2e-record-size must be in [1, 1 MiB]"),
        (0 <= args.idle_partitions <= 1000, "--idle-partitions must be in [0, 1000]"),
        (0 < args.idle_seconds <= 600, "--idle-seconds must be in (0, 600]"),
        (0 <= args.restart_mib <= 16 * KiB, "--restart-mib must be in [0, 16384]"),
        (0 <= args.wait_quiet <= 3600, "--wait-quiet must be in [0, 3600]"),
        (0 <= args.settle_seconds <= 60, "--settle-seconds must be in [0, 60]"),
        (args.system == "raftlog" or not args.compare, "--compare goes with --system raftlog"),
        (
            args.compression == "none" or not args.compare,
            "--compression measures raftlog alone: no --compare",
        ),
        (args.servers is None or args.system == "raftlog", "--servers is a raftlog cluster"),
        (
            client == "kafka" or not any(peer.startswith("kafka") for peer in args.compare),
            "--compare kafka drives raftlog through the same Kafka client: --client kafka (the default "
            "beside Kafka)",
        ),
        (
            client == "http" or args.servers is None,
            "--client kafka needs the cluster started here (it knows the Kafka listeners): no --servers",
        ),
        (
            args.servers is None or args.restart_mib == 0,
            "--restart-mib needs a cluster started here (not --servers)",
        ),
    ]
    if args.transaction_records:
        checks += [
            (
                all(peer.startswith("kafka") for peer in args.compare)
                and (args.system == "raftlog" or args.system.startswith("kafka")),
                "--transactions compares raftlog with Apache Kafka only: --compare kafka,kafka-fsync",
            ),
            (client == "kafka", "--transactions drives raftlog through Kafka's protocol: --client kafka"),
            (
                args.idle_partitions == 0 and args.restart_mib == 0 and args.compression == "none",
                "--transactions measures transactions alone: no --idle-partitions, --restart-mib or"
                " --compression",
            ),
        ]  # fmt: skip
    elif args.record_size and args.batch_size * max(args.record_size) > 8 * MiB:
        checks.append((False, "--batch-size x --record-size must stay <= 8 MiB per request"))
    return next((message for ok, message in checks if not ok), None)


def workload_of(args: argparse.Namespace) -> Workload:
    return config_of(
        Workload,
        args,
        record_sizes=tuple(args.record_size),
        batch_records=args.batch_size,
        seconds=args.duration,
        consume=not args.no_consume,
        single_record_bytes=args.single_record_size,
        e2e_record_bytes=args.e2e_record_size,
        fetch_bytes=args.fetch_mib * MiB,
        wait_quiet_s=args.wait_quiet,
        settle_s=args.settle_seconds,
        client=client_of(args),
        transaction_records=args.transaction_records or 0,
    )


def run_from_args(args: argparse.Namespace) -> int:
    if args.load_child is not None:
        return load_child(args.load_child)
    why = problem(args)
    if why is None and args.servers:
        try:
            parse_servers(args.servers)
        except ValueError as exc:
            why = str(exc)
    if why is not None:
        return refused("perf", why)
    peers = list(args.compare)
    missing = preflight(peers if args.system == "raftlog" else [args.system])
    if missing:
        return refused("perf", missing)
    stop_on_signals()
    try:
        report = run(args, workload_of(args), peers)
    except KeyboardInterrupt:
        print("raftlog bench perf: interrupted; every server it started is stopped", file=sys.stderr)
        return 130
    out = asdict(report)
    out["goals"] = [asdict(goal) for goal in goals(report)]
    emit(args.json, format_report(report), out)
    return 1 if report.failures or any(p.errors for p in report.phases) else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("perf", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
