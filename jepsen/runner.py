"""``python -m jepsen run``: one fault run from cluster start to verdict.

    python -m jepsen run --nodes 5 --nemesis kill,partition --time-limit 300 [--rate 40] [--concurrency 8]
                         [--dir runs] [--no-netns] [--seed N] [--fs plain|lazy]
                         [--workload queue|compact|txn|group|share] [--group-protocol classic|consumer]
                         [--break-markers flip-abort]

Creates ``DIR/<UTC timestamp>/`` with ``history.jsonl``, ``run.json`` (settings, seed, network mode,
schedule, notes on approximated faults, final-read summary), ``logs/nK.log`` (every life of
every node), ``data/`` and ``faults/`` (fsync traces, clock files); then runs the checker
(``results.json``) and, when ``jepsen.report`` is importable, the HTML report. Exit status: 0 valid,
1 invalid, 2 unknown, 3 the harness itself failed (the cluster never came up, bad arguments, a named fault
this machine cannot run: ``jepsen.fault_tools``, refused before anything starts, never dropped).

Phases: start the nodes and create the topics; workload and nemesis together for ``--time-limit``
seconds (longer when a window waits for the cluster's recovery from the one before, and after the last
until a span without faults holds the writes the workload plans: ``jepsen.recovery``); heal every fault
and restart every node that is down; the final read (``compact``: one, then another once every node's
cleaner has caught up; ``txn``: a new producer per transactional id first, which ends every open
transaction; ``group``: the members drain the topic and the committed offsets are read);
stop (with the ``old-release`` fault: then compare every partition's replicas, ``raftlog log compare``,
``run.json``'s ``replicas``); check (``txn``: ``jepsen.txn_checker``; ``group``: ``jepsen.group_checker``).
Namespaces, links and processes are removed in ``finally`` blocks, also on Ctrl-C and SIGTERM.
This module makes the run's ``RunConfig`` (``jepsen.run_config``) from the command line, starts and
stops the cluster and checks the history; between the start and the stop, ``jepsen.drives`` drives the
workload (topics, workers under the nemesis, heal, final read, health).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import importlib
import json
import os
import random
import signal
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from jepsen import control, fault_shapes, fault_tools, lazyfs, nemesis, old_release_fault, upgrade_fault
from jepsen.drives import ENDS_MAX_S, WorkloadPhase
from jepsen.run_config import CLIENTS, FILE_SYSTEMS, GROUP_PROTOCOLS, MARKER_FAULTS, WORKLOADS, RunConfig
from raftlog_dev import layout, releases

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_HARNESS = 3
READY_TIMEOUT_S = 60.0
DISK_MIB = 256  # each node's disk of its own when the run has the disk-full fault


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
                             "upgrade, old-release (not part of all)")  # fmt: skip
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds of workload under faults")
    parser.add_argument("--rate", type=float, default=30.0, help="client operations per second (total)")
    parser.add_argument("--concurrency", type=int, default=6, help="client processes (one op in flight each)")
    parser.add_argument("--dir", default="runs", help="where run directories are created (default runs/)")
    parser.add_argument(
        "--no-netns", action="store_true", help="run on 127.0.0.1 (partition, delay, loss refused)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the schedule, targets and workload")
    parser.add_argument(
        "--min-ends",
        type=int,
        default=0,
        help=f"txn: after the heal, go on (no faults) until this many transactions ended, one in ten of "
        f"them sending offsets (at most {ENDS_MAX_S:.0f} s more)",
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
        "transactions; group: one consumer group's members, their generations, deliveries and "
        "commits (topic gq; the kill-coordinator fault, part of all)",
    )
    parser.add_argument(
        "--group-protocol",
        choices=GROUP_PROTOCOLS,
        default="classic",
        help="the group workload's members: classic (the classic group protocol, eager range assignment) "
        "or consumer (KIP-848's consumer group protocol, group.protocol=consumer: the coordinator assigns "
        "incrementally, each member has its member epoch)",
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
        help="the upgrade and old-release faults' previous release, built under .releases/ (default: the "
        "newest release CHANGELOG.md names with its commit)",
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
    refused = layout.serve_arg_refusal(list(args.serve_arg))  # said before anything starts, not per node
    if refused is not None:
        raise ValueError(f"--serve-arg: {refused} (raftlog serve --help)")
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
    try:
        return run(config).exit_code
    except fault_tools.MissingTool as exc:
        print(f"jepsen run: {exc}", file=sys.stderr)
        return EXIT_HARNESS


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
    fault_tools.refuse_missing(config)  # a fault it cannot run is refused before anything starts
    other = _other_code(config)
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
        else:  # no network fault is named (fault_tools refused the run otherwise)
            notes.append(f"network namespaces unavailable ({why}): loopback mode")
    info["network"] = mode
    fs = config.fs
    info["fs"] = {"kind": fs}
    disk_mib = DISK_MIB if nemesis.DISK_FAULTS & set(config.faults) else 0
    info["disk_mib"] = disk_mib
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
            claim = control.claim_subnet()
            specs = control.plan_netns(config.nodes, prefix, claim.third_octet)
            network = control.Network(prefix, claim, specs)
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
            fault_shapes.write_baseline(cluster.trace_file(spec.node_id), cluster.data_dir(spec.node_id))
            cluster.start(spec.node_id)
        not_ready = cluster.wait_ready([n.node_id for n in specs], READY_TIMEOUT_S)
        if other is not None and not not_ready:
            not_ready = upgrade_fault.roll_forward(cluster, READY_TIMEOUT_S)
        if not_ready:
            raise control.ControlError(f"nodes not ready within {READY_TIMEOUT_S:.0f} s: {not_ready}; "
                                       + " | ".join(cluster.log_tail(n, 5) for n in not_ready))  # fmt: skip
        if old_release_fault.NAME in config.faults:  # the operator raises the level the old code is below
            info["levels_raised"] = raised = old_release_fault.raise_levels(cluster)
            print(f"jepsen run: {raised['command']}: {raised['finalized']}", flush=True)
        info.update(asyncio.run(WorkloadPhase(config, cluster, network, rng, run_dir, notes).drive()))
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
                    if old_release_fault.NAME in config.faults and "harness_error" not in info:
                        info["replicas"] = old_release_fault.compare_replicas(cluster)
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


def _other_code(config: RunConfig) -> control.OtherCode | None:
    """The previous release's code for the upgrade fault (``raftlog_dev.releases``: built under
    ``.releases/`` once, then reused); None when no upgrade is named, ``MissingTool`` when it cannot be
    had."""
    if not set(nemesis.VERSION_FAULTS) & set(config.faults):
        return None
    named = releases.released_commits(control.REPO_ROOT)
    version = config.upgrade_from or max(named, key=lambda v: tuple(int(p) for p in v.split(".")), default="")
    try:
        built = releases.release(version, root=control.REPO_ROOT)
    except releases.ReleaseError as exc:
        named_faults = ", ".join(f for f in config.faults if f in nemesis.VERSION_FAULTS)
        raise fault_tools.MissingTool(
            f"{named_faults}: needs the previous release's code: release {version or '(none named)'} "
            f"unavailable ({exc})"
        ) from exc
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
        history = read_history(os.path.join(run_dir, "history.jsonl"))
        results = check_history(history, replicas=compared_replicas(run_dir))
    except HistoryError as exc:
        print(f"jepsen run: the history is malformed: {exc}", file=sys.stderr)
        return "unknown", EXIT_HARNESS
    _write_json(os.path.join(run_dir, "results.json"), results)
    verdict = str(results.get("verdict", "unknown"))
    print(f"verdict: {verdict.upper()} {'; '.join(results.get('reasons', []))}", flush=True)
    if report:
        _write_report(run_dir)
    return verdict, {"valid": EXIT_VALID, "invalid": EXIT_INVALID}.get(verdict, EXIT_UNKNOWN)


def compared_replicas(run_dir: str) -> dict[str, Any] | None:
    """The replicas' comparison the run made once its nodes stopped (``run.json``'s ``replicas``; the
    ``old-release`` fault's), None when it made none."""
    try:
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
            replicas = json.load(f).get("replicas")
    except (OSError, ValueError):
        return None
    return replicas if isinstance(replicas, dict) else None


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
