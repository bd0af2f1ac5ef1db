"""``python -m jepsen run``: one fault run from cluster start to verdict.

    python -m jepsen run --nodes 5 --nemesis kill,partition --time-limit 300 [--rate 40] [--concurrency 8]
                         [--dir runs] [--no-netns] [--seed N] [--fs plain|lazy]
                         [--workload queue|compact|txn|group] [--break-markers flip-abort]

Creates ``DIR/<UTC timestamp>/`` with ``history.jsonl``, ``run.json`` (settings, seed, network mode,
schedule, notes on skipped or approximated faults, final-read summary), ``logs/nK.log`` (every life of
every node), ``data/`` and ``faults/`` (fsync traces, clock files); then runs the checker
(``results.json``) and, when ``jepsen.report`` is importable, the HTML report. Exit status: 0 valid,
1 invalid, 2 unknown, 3 the harness itself failed (the cluster never came up, bad arguments).

Phases: start the nodes and create the topics; workload and nemesis together for ``--time-limit``
seconds; heal every fault and restart every node that is down; the final read (``compact``: one, then
another once every node's cleaner has caught up; ``txn``: a new producer per transactional id first, which
ends every open transaction; ``group``: the members drain the topic and the committed offsets are read);
stop; check (``txn``: ``jepsen.txn_checker``; ``group``: ``jepsen.group_checker``).
Namespaces, links and processes are removed in ``finally`` blocks, also on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import importlib
import json
import logging
import os
import random
import signal
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from jepsen import compact_workload, control, disks, hostile, lazyfs, nemesis, upgrade_fault, workload
from jepsen.recorder import Recorder
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError
from raftlog_dev import releases

if TYPE_CHECKING:  # confluent-kafka is imported only when a run asks for Kafka clients
    from jepsen.group_workload import GroupRun
    from jepsen.kafka_workload import KafkaOperations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_HARNESS = 3
READY_TIMEOUT_S = 60.0
HEAL_READY_TIMEOUT_S = 45.0
ENDS_MAX_S = 180.0  # --min-ends: the bound on going on after the heal
DISK_MIB = 256  # each node's disk of its own when the run has the disk-full fault
TOPICS = {"t0": 3, "t1": 2}
CLIENTS = ("http", "kafka")
# compact: jepsen/compact_workload.py; txn: jepsen/txn_workload.py; group: jepsen/group_workload.py;
# share: jepsen/share_workload.py
WORKLOADS = ("queue", "compact", "txn", "group", "share")
FILE_SYSTEMS = ("plain", "lazy")
# t0 fsyncs every append (the default) and rolls small segments (so corruption can hit closed segments
# too); t1 uses group commit every second, so a power loss can discard the tail of a replica's partition log
# (acknowledged records must then come back from the fsynced Raft journal), and is LogAppendTime: its
# leader stamps every batch before proposing it, and reads check the stamp.
TOPIC_CONFIGS: dict[str, dict[str, Any]] = {
    "t0": {"segment.bytes": 4096},
    "t1": {"flush.policy": "group", "flush.ms": 1000, "message.timestamp.type": "LogAppendTime"},
}
COMPACT_TOPICS = {compact_workload.TOPIC: compact_workload.PARTITIONS}
MARKER_FAULTS = ("flip-abort",)  # jepsen.marker_fault.MODES (that module runs only inside a node)
COMPACT_TOPIC_CONFIGS = {compact_workload.TOPIC: compact_workload.TOPIC_CONFIGS}
LOG_APPEND_TIME_TOPICS = frozenset(
    topic
    for topic, configs in TOPIC_CONFIGS.items()
    if configs.get("message.timestamp.type") == "LogAppendTime"
)


@dataclass
class RunConfig:
    nodes: int = 3
    faults: tuple[str, ...] = ("kill", "pause")
    time_limit_s: float = 60.0
    rate: float = 30.0
    concurrency: int = 6
    directory: str = "runs"
    netns: bool = True
    seed: int | None = None
    topics: dict[str, int] = field(default_factory=dict)  # empty: the workload's (TOPICS, COMPACT_TOPICS)
    serve_args: tuple[str, ...] = ()  # more options for every node's ``raftlog serve``
    clients: tuple[str, ...] = ("http",)  # worker i (and final reader i) uses clients[i % len(clients)]
    fs: str = "plain"  # "lazy": every node's data directory on a lazy file system (jepsen.lazyfs)
    workload: str = "queue"  # or "compact": keyed overwrites and deletes on a compacted topic; "txn"; "group"
    break_markers: str | None = None  # txn's negative control: every node's abort markers applied as commits
    upgrade_from: str | None = None  # the upgrade fault's other release (None: the newest CHANGELOG names)
    report: bool = True  # the HTML report beside results.json (jepsen.report): plots cost seconds of CPU
    # txn: after the heal the workers go on, no fault scheduled, until this many transactions have ended
    # (committed or aborted, as asked), for at most ENDS_MAX_S: a loaded machine's faulted window may end few
    min_ends: int = 0

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"workload {self.workload!r}: choose from {', '.join(WORKLOADS)}")
        if self.break_markers is not None and self.break_markers not in MARKER_FAULTS:
            raise ValueError(
                f"--break-markers {self.break_markers!r}: choose from {', '.join(MARKER_FAULTS)}"
            )
        if self.workload == "group" and self.concurrency < 4:
            raise ValueError("--workload group needs --concurrency 4 or more (producers, members, a monitor)")
        if not self.topics:
            self.topics = dict(self._workload_topics()[0])

    def _workload_topics(self) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
        if self.workload == "txn":
            from jepsen import txn_workload  # confluent-kafka only when a run needs it

            return txn_workload.TOPICS, txn_workload.TOPIC_CONFIGS
        if self.workload == "group":
            from jepsen import group_workload

            return group_workload.TOPICS, group_workload.TOPIC_CONFIGS
        if self.workload == "share":
            from jepsen import share_workload

            return share_workload.TOPICS, share_workload.TOPIC_CONFIGS
        if self.workload == "compact":
            return COMPACT_TOPICS, COMPACT_TOPIC_CONFIGS
        return TOPICS, TOPIC_CONFIGS

    @property
    def topic_configs(self) -> dict[str, dict[str, Any]]:
        return self._workload_topics()[1]

    @property
    def shim_args(self) -> list[str]:
        """jepsen.nodeshim's options: the negative control's broken marker path, when asked for."""
        return [] if self.break_markers is None else [f"--break-markers={self.break_markers}"]

    @property
    def node_args(self) -> list[str]:
        """Every node's serve options: the compaction workload's cleaner runs often (unless told)."""
        args = list(self.serve_args)
        if self.workload == "compact" and not any(a.startswith("--cleaner-interval-ms") for a in args):
            args.append(f"--cleaner-interval-ms={compact_workload.CLEANER_INTERVAL_MS}")
        if self.workload == "group":  # the group's first rebalance without a delay (unless told)
            from jepsen import group_workload

            args.extend(group_workload.serve_args(args))
        if self.workload == "share":  # locks of seconds, so the drain waits seconds for held records
            from jepsen import share_workload

            args.extend(share_workload.serve_args(args))
        if "hostile-clients" in self.faults and not any(
            a.startswith("--kafka-connections-per-user") for a in args
        ):
            # the logged-in attacker passes a small per-user cap with tens of connections, not hundreds
            args.append(f"--kafka-connections-per-user-max={hostile.LOGIN_USER_CAP}")
        return args


@dataclass
class RunResult:
    run_dir: str
    exit_code: int
    verdict: str
    summary: dict[str, Any]


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=3, choices=(3, 5), help="cluster size (3 or 5)")
    parser.add_argument("--nemesis", default="kill,pause",
                        help=f"comma-separated faults: {', '.join(nemesis.FAULTS)}, all or none; "
                             "upgrade (not part of all)")  # fmt: skip
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds of workload under faults")
    parser.add_argument("--rate", type=float, default=30.0, help="client operations per second (total)")
    parser.add_argument("--concurrency", type=int, default=6, help="client processes (one op in flight each)")
    parser.add_argument("--dir", default="runs", help="where run directories are created (default runs/)")
    parser.add_argument(
        "--no-netns", action="store_true", help="run on 127.0.0.1 (no partitions or link faults)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the schedule, targets and workload")
    parser.add_argument(
        "--min-ends",
        type=int,
        default=0,
        help=f"txn: after the heal, go on (no faults) until this many transactions ended "
        f"(at most {ENDS_MAX_S:.0f} s more)",
    )
    parser.add_argument(
        "--clients",
        default=None,
        help="comma-separated: http (the HTTP API) and/or kafka (confluent-kafka against the nodes' "
        "Kafka listeners); workers take them in turn (default http; txn: kafka, and its transactions go "
        "through Kafka clients whatever the door: it reads through it)",
    )
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="queue",
        help="queue: the Kafka-style queue (topics t0, t1); compact: keys overwritten and deleted on a "
        "compacted topic (c0), each key's last acknowledged write checked after the cleaner ran; txn: Kafka "
        "transactions; group: one classic consumer group's members, their generations, deliveries and "
        "commits (topic gq; the kill-coordinator fault, part of all)",
    )
    parser.add_argument(
        "--break-markers",
        choices=MARKER_FAULTS,
        default=None,
        help="the txn workload's negative control: every node applies abort markers as commits "
        "(jepsen/marker_fault.py, patched in by the node shim); the verdict must be invalid",
    )
    parser.add_argument(
        "--fs",
        choices=FILE_SYSTEMS,
        default=None,
        help="plain: data directories on the run's disk; lazy: each on a FUSE file system that loses "
        "unsynced writes at a power loss (node-power-loss, cluster-power-loss need it). Default: lazy "
        "when one of those faults is named without disk-full, else plain",
    )
    parser.add_argument(
        "--upgrade-from",
        default=None,
        metavar="VERSION",
        help="the upgrade fault's other release, built under .releases/ (default: the newest release "
        "CHANGELOG.md names with its commit)",
    )
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for every node's raftlog serve (repeatable), "
        "e.g. --serve-arg=--journal-sync-thread-min-kib=0",
    )


def register_run(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help="start a cluster, run the workload under faults, check the history",
        description=(__doc__ or "").split("\n\n")[0],
    )
    add_run_arguments(parser)
    parser.set_defaults(handler=main)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    if args.time_limit <= 0 or args.rate <= 0 or not 1 <= args.concurrency <= 64:
        raise ValueError("--time-limit and --rate must be > 0, --concurrency between 1 and 64")
    kafka_only = args.workload in ("txn", "group")
    named = args.clients if args.clients is not None else ("kafka" if kafka_only else "http")
    clients = tuple(c.strip() for c in named.split(",") if c.strip())
    unknown = sorted(set(clients) - set(CLIENTS))
    if not clients or unknown:
        raise ValueError(f"--clients {named!r}: choose from {', '.join(CLIENTS)}")
    faults = nemesis.parse_faults(args.nemesis, nemesis.GROUP_FAULTS if args.workload == "group" else ())
    if args.workload == "group" and clients != ("kafka",):
        raise ValueError("--workload group: its processes are Kafka clients (--clients kafka)")
    if args.workload == "share" and clients != ("http",):
        raise ValueError("--workload share: its processes are HTTP share members (--clients http)")
    computed = {
        "faults": faults,
        "time_limit_s": args.time_limit,
        "directory": args.dir,
        "netns": not args.no_netns,
        "serve_args": tuple(args.serve_arg),
        "clients": clients,
        "fs": args.fs or default_fs(faults),
    }
    # the other fields are the options of the same name as they are (--nodes, --rate, --concurrency, --seed)
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(RunConfig) if hasattr(args, f.name)}
    return RunConfig(**(given | computed))


def default_fs(faults: Sequence[str]) -> str:
    """Lazy file systems when a fault needs them and none needs small disks (the two do not stack: the
    lazy file system writes through only at fsync, so a full disk would refuse the sync, not the write)."""
    wants_lazy = bool(nemesis.LAZY_FAULTS & set(faults))
    return "lazy" if wants_lazy and not nemesis.DISK_FAULTS & set(faults) else "plain"


def main(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"jepsen run: {exc}", file=sys.stderr)
        return EXIT_HARNESS
    return run(config).exit_code


def new_run_dir(directory: str) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    base = os.path.realpath(directory)
    os.makedirs(base, exist_ok=True)
    for suffix in range(100):
        path = os.path.join(base, stamp if suffix == 0 else f"{stamp}-{suffix}")
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            continue
    raise control.ControlError(f"cannot create a run directory under {base}")


class _Terminated(BaseException):
    """SIGTERM, turned into an exception so every ``finally`` runs."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def run(config: RunConfig) -> RunResult:
    """One whole run. Never leaves namespaces, links or node processes behind."""
    seed = config.seed if config.seed is not None else random.SystemRandom().getrandbits(32)
    rng = random.Random(seed)
    run_dir = new_run_dir(config.directory)
    prefix = control.new_prefix()
    notes: list[str] = []
    info: dict[str, Any] = {
        "config": {**dataclasses.asdict(config), "seed": seed},
        "prefix": prefix,
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "notes": notes,
    }
    mode = "loopback"
    if config.netns:
        usable, why = control.netns_available()
        if usable:
            mode = "netns"
        else:
            notes.append(f"network namespaces unavailable ({why}): loopback mode")
    if mode == "loopback":
        skipped = [f for f in config.faults if f in nemesis.NETWORK_FAULTS]
        if skipped:
            notes.append(
                f"loopback mode: {', '.join(skipped)} unavailable (needs network namespaces); skipped"
            )
    info["network"] = mode
    fs = config.fs
    if fs == "lazy":
        why_not = lazyfs.unavailable()
        if why_not is not None:
            notes.append(f"lazy file systems unavailable ({why_not}): plain data directories")
            fs = "plain"
    if fs != "lazy" and nemesis.LAZY_FAULTS & set(config.faults):
        lazy = sorted(nemesis.LAZY_FAULTS & set(config.faults))
        notes.append(f"{', '.join(lazy)}: need --fs lazy; skipped")
    info["fs"] = {"kind": fs}
    disk_mib = 0
    if fs == "lazy" and nemesis.DISK_FAULTS & set(config.faults):
        notes.append("disk-full: not on lazy file systems (they write through only at fsync, so a full "
                     "disk would refuse the sync, not the write); skipped")  # fmt: skip
    elif nemesis.DISK_FAULTS & set(config.faults):
        why_not = disks.unavailable()
        if why_not is None:
            disk_mib = DISK_MIB
        else:
            notes.append(f"disk-full unavailable ({why_not}): the nodes share the run's disk; skipped")
    info["disk_mib"] = disk_mib
    other = _other_code(config, notes)
    info["upgrade_from"] = None if other is None else dataclasses.asdict(other)
    print(f"jepsen run: {run_dir} ({mode}, {config.nodes} nodes, faults {list(config.faults)}, seed {seed}, "
          f"{fs} file system)", flush=True)  # fmt: skip
    network: control.Network | None = None
    cluster: control.Cluster | None = None
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    exit_code = EXIT_HARNESS
    verdict = "unknown"
    try:
        if mode == "netns":
            third = control.pick_subnet()
            specs = control.plan_netns(config.nodes, prefix, third)
            network = control.Network(prefix, third, specs)
            network.setup()
        else:
            specs = control.plan_loopback(config.nodes)
        cluster = control.Cluster(
            run_dir,
            specs,
            admin_token=f"jepsen-{prefix}",
            serve_args=config.node_args,
            shim_args=config.shim_args,
            disk_mib=disk_mib,
            fs=fs,
            prefix=prefix,
            other=other,
        )
        if disk_mib:
            cluster.mount_disks()
        if fs == "lazy":
            cluster.mount_lazy()
            info["fs"].update(_lazy_configuration(cluster))
            print(f"jepsen run: {info['fs']['node_configuration']}", flush=True)
        info["nodes"] = [{"id": n.node_id, "http": n.http, "namespace": n.namespace,
                          "argv": cluster.argv[n.node_id]} for n in specs]  # fmt: skip
        if other is not None:  # formed at level 1 by the previous release, then rolled to this checkout
            cluster.on_other.update(n.node_id for n in specs)
        for spec in specs:
            nemesis.write_baseline(cluster.trace_file(spec.node_id), cluster.data_dir(spec.node_id))
            cluster.start(spec.node_id)
        not_ready = cluster.wait_ready([n.node_id for n in specs], READY_TIMEOUT_S)
        if other is not None and not not_ready:
            not_ready = upgrade_fault.roll_forward(cluster, READY_TIMEOUT_S)
        if not_ready:
            raise control.ControlError(f"nodes not ready within {READY_TIMEOUT_S:.0f} s: {not_ready}; "
                                       + " | ".join(cluster.log_tail(n, 5) for n in not_ready))  # fmt: skip
        info.update(asyncio.run(_Run(config, cluster, network, rng, run_dir, notes).drive()))
    except (control.ControlError, OSError) as exc:
        notes.append(f"harness error: {exc}")
        info["harness_error"] = traceback.format_exc()
        print(f"jepsen run: harness error: {exc}", file=sys.stderr)
    except (KeyboardInterrupt, _Terminated):
        notes.append("interrupted (Ctrl-C / SIGTERM): the history is partial")
        print("jepsen run: interrupted; cleaning up", file=sys.stderr)
    finally:
        try:
            if cluster is not None:
                try:
                    cluster.stop_all()
                finally:  # the mounts go even when stopping a node failed (the lazy unmount, -z, then)
                    problems = cluster.unmount_disks() + cluster.unmount_lazy()
                    if problems:
                        notes.append(f"unmounting the nodes' disks or lazy file systems: {problems}")
                    if cluster.lazy_mounts:
                        info["fs"]["cleared"] = {n: m.cleared for n, m in sorted(cluster.lazy_mounts.items())}
        finally:
            if network is not None:
                problems = network.teardown()
                if problems:
                    notes.append(f"network teardown problems: {problems}")
            signal.signal(signal.SIGTERM, previous)
        info["finished_at"] = datetime.datetime.now(datetime.UTC).isoformat()
        _write_json(os.path.join(run_dir, "run.json"), info)
    if "harness_error" not in info and os.path.exists(os.path.join(run_dir, "history.jsonl")):
        verdict, exit_code = check(run_dir, report=config.report)
    return RunResult(run_dir, exit_code, verdict, info)


def _other_code(config: RunConfig, notes: list[str]) -> control.OtherCode | None:
    """The previous release's code for the upgrade fault (``raftlog_dev.releases``: built under
    ``.releases/`` once, then reused), or None with a note when no upgrade is named or it cannot be had."""
    if not set(nemesis.VERSION_FAULTS) & set(config.faults):
        return None
    named = releases.released_commits(control.REPO_ROOT)
    version = config.upgrade_from or max(named, key=lambda v: tuple(int(p) for p in v.split(".")), default="")
    try:
        built = releases.release(version, root=control.REPO_ROOT)
    except releases.ReleaseError as exc:
        notes.append(f"upgrade: release {version or '(none named)'} unavailable ({exc}); skipped")
        return None
    return control.OtherCode(built.version, built.tree, built.python)


def _lazy_configuration(cluster: control.Cluster) -> dict[str, Any]:
    """How the nodes run on the lazy file systems, found out on the mount before they start: whether the
    journal's O_DIRECT opens are accepted (docs/decisions/0008) decides its writer, nothing else changes."""
    first = cluster.nodes[0].node_id
    direct_io = lazyfs.probe_direct_io(cluster.data_dir(first))
    return {
        "backing": os.path.join(cluster.run_dir, "lazy"),
        "direct_io": direct_io,
        "node_configuration": "every data directory on a lazy file system (jepsen.lazyfs: unsynced writes "
        f"are lost at node-power-loss and cluster-power-loss); serve options unchanged; {direct_io}",
    }


async def _drive_queue(faults: _Run, rng: random.Random, keys: list[str]) -> dict[str, Any]:
    """The queue and compaction workloads: sends and polls through the workers' doors (``--clients``);
    after the heal, a final read of every key (the compaction workload: another once the cleaners caught
    up)."""
    config, cluster, notes = faults.config, faults.cluster, faults.notes
    recorder, http = faults.recorder, faults.http
    base_ms = int(time.time() * 1000)
    compact = config.workload == "compact"
    model = compact_workload.MODEL if compact else workload.QUEUE
    operations = workload.Operations(http, recorder, base_ms, LOG_APPEND_TIME_TOPICS, model)
    clients = _Clients(config, cluster, operations, recorder, base_ms,
                       os.path.join(faults.run_dir, "logs", "kafka-clients.log"), model)  # fmt: skip
    stats = workload.Stats()
    cleaner: dict[str, Any] = {}  # the compaction workload's cleaner metrics, per node
    try:
        await faults.during(
            lambda deadline: workload.run_workers(
                clients.make(range(config.concurrency)), keys, rate=config.rate, deadline=deadline, rng=rng,
                stats=stats, step=compact_workload.step if compact else workload.queue_step,
                doors=len(config.clients),
            )
        )  # fmt: skip
        readers = clients.make(range(config.concurrency, config.concurrency + len(keys)))
        final = await workload.final_read(readers, keys, first_process=config.concurrency, stats=stats)
        incomplete = [k for k, v in final.items() if not v["complete"]]
        if compact:  # a second final read once every node's cleaner has caught up
            cleaner["after_heal"] = await compact_workload.cleaned(http, cluster.urls)
            if not cleaner["after_heal"]["cleaned"]:
                waited = compact_workload.CLEANED_TIMEOUT_S
                notes.append(f"the cleaners had not caught up within {waited:.0f} s of the first final read; "
                             "the second read went ahead")  # fmt: skip
            first = config.concurrency + len(keys)
            readers = clients.make(range(first, first + len(keys)))
            again = await workload.final_read(readers, keys, first_process=first, stats=stats)
            incomplete += [k for k, v in again.items() if not v["complete"]]
            cleaner["final_read_after_cleaning"] = again
            cleaner["after_read"] = await compact_workload.cleaner_metrics(http, cluster.urls)
            failed = compact_workload.failures(cleaner["after_read"])
            if failed:
                notes.append(f"compaction passes failed (see the node logs): {failed}")
        if incomplete:
            notes.append(f"final read incomplete for {sorted(set(incomplete))}")
    finally:
        await clients.close()
        await faults.close()
    read = {"final_read": final, **({"cleaner": cleaner} if cleaner else {})}
    return await faults.summary(keys, stats, read)


async def _drive_txn(faults: _Run, rng: random.Random, keys: list[str]) -> dict[str, Any]:
    """The transactional workload: transactions through Kafka clients (the HTTP API has no transactional
    producer), polls through the workers' doors in turn (``--clients``); after the heal,
    ``TxnRun.finish``: new producers, offsets, final reads."""
    from jepsen import kafka_workload, txn_workload

    config, cluster, notes = faults.config, faults.cluster, faults.notes
    logger = kafka_workload.client_logger(os.path.join(faults.run_dir, "logs", "kafka-clients.log"))
    run = txn_workload.TxnRun(
        cluster.bootstrap_servers, faults.recorder, keys, concurrency=config.concurrency,
        run_id=cluster.prefix, rng=random.Random(rng.getrandbits(64)), logger=logger, doors=config.clients,
        http=faults.http,
    )  # fmt: skip
    stats = workload.Stats()
    try:
        await faults.during(lambda until: run.run_workers(rate=config.rate, deadline=until, stats=stats))
        await _until_ends(run, config, stats, notes)
        final = await run.finish(stats)
        incomplete = [k for k, v in final["final_read"].items() if not v["read_committed"]["complete"]]
        if incomplete:
            notes.append(f"final read incomplete for {sorted(incomplete)}")
        unfinished = sorted(t for t, kind in final["init"].items() if kind != "ok")
        if unfinished:
            notes.append(f"no new producer could end the open transactions of {unfinished}")
    finally:
        await run.close()
        kafka_workload.close_client_logger(logger)
        await faults.close()
    return await faults.summary(keys, stats, final)


async def _until_ends(run: Any, config: RunConfig, stats: workload.Stats, notes: list[str]) -> None:
    """``--min-ends``: the healed cluster's workers go on, in 5 s rounds, until that many transactions
    ended in all (at most ENDS_MAX_S more); the note says how long."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    last = began + ENDS_MAX_S
    while stats.ops.get("end", {}).get("ok", 0) < config.min_ends and loop.time() < last:
        await run.run_workers(rate=config.rate, deadline=min(loop.time() + 5.0, last), stats=stats)
    if loop.time() - began >= 1.0:
        ended = stats.ops.get("end", {}).get("ok", 0)
        spent = loop.time() - began
        notes.append(f"--min-ends {config.min_ends}: after the heal, {spent:.0f} s more; {ended} ended")


async def _drive_group(faults: _Run, rng: random.Random, keys: list[str]) -> dict[str, Any]:
    """The consumer-group workload: producers, the group's members and the monitor, all Kafka clients;
    after the heal, ``GroupRun.finish``: the members drain the topic, then the committed offsets."""
    from jepsen import group_workload, kafka_workload

    config, notes = faults.config, faults.notes
    logger = kafka_workload.client_logger(os.path.join(faults.run_dir, "logs", "kafka-clients.log"))
    run = faults.group_run = group_workload.GroupRun(
        faults.cluster.bootstrap_servers, faults.recorder, concurrency=config.concurrency,
        run_id=faults.cluster.prefix, rng=random.Random(rng.getrandbits(64)), logger=logger,
    )  # fmt: skip
    stats = workload.Stats()
    try:
        await faults.during(lambda until: run.run_workers(rate=config.rate, deadline=until, stats=stats))
        final = await run.finish(stats)
        if not final["drained"]:
            notes.append(f"the group did not commit up to every high watermark: {final['final_committed']} "
                         f"of {final['high_watermarks']}")  # fmt: skip
        if final["wedged_members"]:
            notes.append(
                f"members left behind on a call librdkafka did not return: {final['wedged_members']}"
            )
    finally:
        await run.close()
        kafka_workload.close_client_logger(logger)
        await faults.close()
    return await faults.summary(keys, stats, {"group": final})


async def _drive_share(faults: _Run, rng: random.Random, keys: list[str]) -> dict[str, Any]:
    """The share group workload: producers and HTTP members of one share group; after the heal,
    ``ShareRun.finish``: the members accept everything until an acquire finds nothing."""
    from jepsen import share_workload

    base_ms = int(time.time() * 1000)
    operations = workload.Operations(faults.http, faults.recorder, base_ms, LOG_APPEND_TIME_TOPICS)
    run = share_workload.ShareRun(
        faults.http, operations, faults.recorder, concurrency=faults.config.concurrency,
        run_id=faults.cluster.prefix, rng=random.Random(rng.getrandbits(64)),
    )  # fmt: skip
    stats = workload.Stats()
    try:
        await faults.during(
            lambda until: run.run_workers(rate=faults.config.rate, deadline=until, stats=stats)
        )
        final = await run.finish(stats)
        if not final["drained"]:
            faults.notes.append("the share group's members did not drain the topic within the budget")
    finally:
        await faults.close()
    return await faults.summary(keys, stats, {"share": final})


def _coordinator_finder(faults: _Run) -> Callable[[], Awaitable[str | None]]:
    """The node coordinating the group workload's consumer group, as its members' clients found it
    (FindCoordinator; their statistics name it), for kill-coordinator."""
    nodes = {n.kafka: n.node_id for n in faults.cluster.nodes}

    async def find() -> str | None:
        run = faults.group_run
        address = run.coordinator() if run is not None else None
        return nodes.get(address) if address is not None else None

    return find


class _Run:
    """One run's workload phase: the topics, then what both workloads drive the same way (the history,
    the fault schedule and the nemesis that follows it while the workers run, the HTTP client, the heal,
    and the summary with the cluster's health once the final read is done) around the workload's own
    workers and final read (``_drive_queue``, ``_drive_txn``)."""

    recorder: Recorder
    windows: list[nemesis.Window]
    chaos: nemesis.Nemesis
    http: workload.Http

    def __init__(
        self,
        config: RunConfig,
        cluster: control.Cluster,
        network: control.Network | None,
        rng: random.Random,
        run_dir: str,
        notes: list[str],
    ) -> None:
        self.config, self.cluster, self.network, self.rng = config, cluster, network, rng
        self.run_dir, self.notes = run_dir, notes
        self.began = self.heal_began = 0.0  # time.monotonic() as the workers start, and the heal
        self.group_run: GroupRun | None = None  # the group workload's, once its clients exist

    async def drive(self) -> dict[str, Any]:
        config, cluster, rng = self.config, self.cluster, self.rng
        await _create_topics(cluster, config)
        keys = [workload.key_of(t, p) for t, count in sorted(config.topics.items()) for p in range(count)]
        await _wait_partitions(cluster, keys)
        self.recorder = Recorder(os.path.join(self.run_dir, "history.jsonl"))
        self.windows = nemesis.schedule(
            config.faults, config.time_limit_s, random.Random(rng.getrandbits(64))
        )
        self.chaos = nemesis.Nemesis(
            cluster,
            self.network,
            self.recorder,
            random.Random(rng.getrandbits(64)),
            config.topics,
            self.notes,
            coordinator=_coordinator_finder(self) if config.workload == "group" else None,
        )
        self.http = workload.Http(cluster.urls, random.Random(rng.getrandbits(64)))
        drive = {"txn": _drive_txn, "group": _drive_group, "share": _drive_share}.get(
            config.workload, _drive_queue
        )
        return await drive(self, rng, keys)

    async def during(self, workers: Callable[[float], Awaitable[object]]) -> None:
        """Run ``workers(deadline)`` (a loop-time deadline --time-limit away) under the fault schedule,
        then stop the nemesis and heal everything."""
        self.began = time.monotonic()
        started = asyncio.get_running_loop().time()
        stop = asyncio.Event()
        nemesis_task = asyncio.create_task(self.chaos.run(self.windows, started, stop))
        try:
            await workers(started + self.config.time_limit_s)
        finally:
            stop.set()
            await nemesis_task
        self.heal_began = time.monotonic()
        topics = sorted(self.config.topics.items())
        keys = [workload.key_of(topic, p) for topic, count in topics for p in range(count)]
        await _heal(self.cluster, self.chaos, self.notes, keys)

    async def summary(self, keys: list[str], stats: workload.Stats, final: dict[str, Any]) -> dict[str, Any]:
        """The run's summary, ``final`` (the final read's) among it, with the cluster's health now."""
        health = await _health(self.cluster)
        return {
            "keys": keys,
            "schedule": [dataclasses.asdict(w) for w in self.windows],
            "faults_started": self.chaos.counts,
            "restart_failures": self.chaos.restart_failures,
            "operations": stats.ops,
            "events": self.recorder.count,
            **final,
            "health_after": health,
            "durations_s": {"workload": round(self.heal_began - self.began, 1),
                            "heal_and_final_read": round(time.monotonic() - self.heal_began, 1)},
        }  # fmt: skip

    async def close(self) -> None:
        await self.http.close()
        self.recorder.close()


class _Clients:
    """The workload's clients: process ``i`` gets ``config.clients[i % n]``; HTTP workers share one
    ``Operations``, each Kafka worker has its own producer and consumer (its group is ``g<i>``)."""

    def __init__(
        self,
        config: RunConfig,
        cluster: control.Cluster,
        http: workload.Operations,
        recorder: Recorder,
        base_ms: int,
        kafka_log: str,
        model: workload.RecordModel = workload.QUEUE,
    ) -> None:
        self.config, self.cluster, self.http = config, cluster, http
        self.recorder, self.base_ms, self.kafka_log = recorder, base_ms, kafka_log
        self.model = model
        self.made: list[KafkaOperations] = []  # each has a producer and a consumer to close
        self.logger: logging.Logger | None = None  # librdkafka's lines, once a Kafka client is made

    def make(self, processes: range) -> list[workload.ClientOperations]:
        made: list[workload.ClientOperations] = []
        for process in processes:
            if self.config.clients[process % len(self.config.clients)] == "http":
                made.append(self.http)
                continue
            from jepsen import kafka_workload  # confluent-kafka only when a Kafka client is asked for

            self.logger = self.logger or kafka_workload.client_logger(self.kafka_log)
            kafka = kafka_workload.KafkaOperations(
                self.cluster.bootstrap_servers, self.recorder, self.base_ms, process=process,
                idempotent=workload.idempotent_worker(process, len(self.config.clients)), logger=self.logger,
                log_append_time_topics=LOG_APPEND_TIME_TOPICS, model=self.model,
            )  # fmt: skip
            self.made.append(kafka)
            made.append(kafka)
        return made

    async def close(self) -> None:
        await asyncio.gather(*(client.close() for client in self.made))
        if self.logger is not None:
            from jepsen import kafka_workload

            kafka_workload.close_client_logger(self.logger)


async def _create_topics(cluster: control.Cluster, config: RunConfig) -> None:
    replication = min(3, config.nodes)
    async with RaftlogClient(
        cluster.urls, admin_token=cluster.admin_token, retries=20, timeout_s=10
    ) as client:
        for topic, partitions in sorted(config.topics.items()):
            try:
                await client.create_topic(
                    topic,
                    partitions=partitions,
                    replication_factor=replication,
                    configs=config.topic_configs.get(topic, {}),
                )
            except ClientError as exc:
                raise control.ControlError(f"creating topic {topic}: {exc}") from exc


async def _wait_partitions(cluster: control.Cluster, keys: Sequence[str], timeout_s: float = 60.0) -> None:
    """Every partition answers an offsets query (it has a leader)."""
    deadline = time.monotonic() + timeout_s
    async with RaftlogClient(cluster.urls, retries=0, timeout_s=3) as client:
        for key in keys:
            topic, partition = workload.split_key(key)
            while True:
                try:
                    await client.offsets(topic, partition)
                    break
                except ClientError as exc:
                    if time.monotonic() > deadline:
                        raise control.ControlError(
                            f"{key} has no leader after {timeout_s:.0f} s: {exc}"
                        ) from exc
                    await asyncio.sleep(0.3)


async def _heal(
    cluster: control.Cluster, chaos: nemesis.Nemesis, notes: list[str], keys: Sequence[str]
) -> None:
    """All faults stopped (the nemesis did that), every node running and ready, and every partition
    led again (the final read then starts on a settled cluster)."""
    await chaos.heal()
    for spec in cluster.nodes:
        if not cluster.running(spec.node_id):
            nemesis.write_baseline(cluster.trace_file(spec.node_id), cluster.data_dir(spec.node_id))
            cluster.start(spec.node_id)
    not_ready = await asyncio.to_thread(
        cluster.wait_ready, [n.node_id for n in cluster.nodes], HEAL_READY_TIMEOUT_S
    )
    down = [n for n in not_ready if not cluster.running(n)]
    if down:
        notes.append(f"after healing, nodes exited and stay down: {down} (see logs/)")
    if not_ready:
        notes.append(f"after healing, not ready within {HEAL_READY_TIMEOUT_S:.0f} s: {not_ready}")
    try:
        await _wait_partitions(cluster, keys, HEAL_READY_TIMEOUT_S)
    except control.ControlError as exc:  # the final read retries and says what it could not read
        notes.append(f"after healing, {exc}")


async def _health(cluster: control.Cluster) -> dict[str, Any]:
    """GET /v1/cluster/health from every node after the final read (under-replicated partitions show
    replicas that never came back, e.g. after corruption)."""
    health: dict[str, Any] = {}
    for spec in cluster.nodes:
        async with RaftlogClient(
            [spec.http], admin_token=cluster.admin_token, retries=1, timeout_s=3
        ) as client:
            try:
                health[spec.node_id] = await client.cluster.health()
            except ClientError as exc:
                health[spec.node_id] = {"error": str(exc)}
    return health


def check(run_dir: str, report: bool = True) -> tuple[str, int]:
    """Run the checker (writes results.json) and, when ``report`` and it is available, the report;
    verdict and exit code."""
    try:
        from jepsen.checking import check as check_history
        from jepsen.history import HistoryError, read_history
    except ImportError as exc:
        print(f"jepsen run: no checker available ({exc}); verdict unknown", file=sys.stderr)
        return "unknown", EXIT_UNKNOWN
    try:
        results = check_history(read_history(os.path.join(run_dir, "history.jsonl")))
    except HistoryError as exc:
        print(f"jepsen run: the history is malformed: {exc}", file=sys.stderr)
        return "unknown", EXIT_HARNESS
    _write_json(os.path.join(run_dir, "results.json"), results)
    verdict = str(results.get("verdict", "unknown"))
    print(f"verdict: {verdict.upper()} {'; '.join(results.get('reasons', []))}", flush=True)
    if report:
        _write_report(run_dir)
    return verdict, {"valid": EXIT_VALID, "invalid": EXIT_INVALID}.get(verdict, EXIT_UNKNOWN)


def _write_report(run_dir: str) -> None:
    try:
        report = importlib.import_module("jepsen.report")
    except ImportError:
        print("jepsen run: jepsen.report not available; no HTML report", file=sys.stderr)
        return
    try:
        report.write_report(run_dir)
    except Exception as exc:  # the report is a by-product: the verdict stands without it
        print(f"jepsen run: the report failed: {exc!r}", file=sys.stderr)


def _write_json(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
