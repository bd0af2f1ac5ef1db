"""Leader changes per minute on a CPU-loaded machine (``raftlog bench leaders``).

Usage: ``raftlog bench leaders [--burners 4] [--duration 120] [--partitions 6] [--rate 200] [--dir DIR]``

Starts a 3-node ``raftlog dev`` cluster (``LocalCluster``: free loopback ports, a fresh data directory under
``--dir``, stopped at the end), creates a topic of ``--partitions`` partitions x 3 replicas, waits until
every partition has a leader and ``--settle`` seconds more (60: the leader balancer evens out the new topic,
which on a loaded machine takes it up to a minute), then for ``--duration`` seconds runs ``--burners``
CPU-bound processes (each a bounded ``while`` loop of its own, ending by itself at the window's end) beside
a steady load: one idempotent confluent-kafka producer (acks=all) sending ``--rate`` records/s of 100 B
round-robin over the partitions, and one consumer of a consumer group reading them back (committing every
second).

What it counts over the window, from the cluster itself:

- elections: how much each partition's Raft term rose (``GET /v1/partitions/{topic}/{p}``: every new
  leader holds a term of its own, so a step-down and re-election of the same node counts too), plus the
  controller group's (``raftlog_controller_term``);
- leader changes by cause: the sum over nodes of ``raftlog_leader_changes_total{cause=...}`` where the
  nodes export it (a release without that counter prints the elections only);
- the machine's load average (``/proc/loadavg``, sampled every second: min, mean, max), since other work
  may share it;
- records produced (acknowledged) and consumed, and the produce errors.

With ``--failovers N``, after the window (the burners have ended; the machine's other load stays), N
times: kill -9 of the node leading partition 0, the seconds until a surviving node answers with a new
leader in a higher term (asked every 50 ms), and the node started again.

The number it ends with, ``leader changes per minute``, is the elections over the window's minutes.
Numbers only, never an assertion about them; talks to the cluster only through HTTP, Kafka and the
``raftlog dev`` command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from raftlog_bench.arguments import add_dir_argument, add_json_argument, refused, standalone_parser
from raftlog_bench.output import emit, say
from raftlog_client.blocking import BlockingClient
from raftlog_client.errors import ClientError
from raftlog_client.local_cluster import LocalCluster
from raftlog_contract import METRICS_PATH, partition_state_path

DESCRIPTION = (
    "leader changes per minute with CPU-bound processes loading the machine, under produce and consume"
)

TOPIC = "bench-leaders"
RECORD_BYTES = 100
LEADERS_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_MS = 60_000
FAILOVER_TIMEOUT_S = 60.0
FAILOVER_SETTLE_S = 5.0  # after a killed node is back and every partition has a leader again
# One burner: a busy loop that ends by itself at its deadline (never outlives the benchmark).
BURNER = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
_CHANGES = re.compile(r'^raftlog_leader_changes_total\{cause="([^"]+)"\} ([0-9.e+]+)$', re.MULTILINE)
_CONTROLLER_TERM = re.compile(r"^raftlog_controller_term ([0-9.e+]+)$", re.MULTILINE)


@dataclass
class Snapshot:
    terms: dict[int, int]  # partition -> Raft term
    controller_term: int
    changes: Counter[str]  # cause -> leader changes, summed over the nodes exporting the counter
    counted: bool  # some node exports raftlog_leader_changes_total


@dataclass
class Load:
    """The produce and consume load: counts from the client threads."""

    produced: int = 0
    produce_errors: int = 0
    consumed: int = 0
    errors: Counter[str] = field(default_factory=Counter)


def _get_json(client: BlockingClient, path: str) -> Any:
    return json.loads(client.request("GET", path).body)


def _metrics(client: BlockingClient) -> str:
    answer = client.request("GET", METRICS_PATH)
    return answer.body.decode("utf-8", "replace")


def _snapshot(cluster: LocalCluster, partitions: int) -> Snapshot:
    terms: dict[int, int] = {}
    with BlockingClient(cluster.servers, CLIENT_TIMEOUT_MS) as client:
        for partition in range(partitions):
            state = _get_json(client, partition_state_path(TOPIC, partition))
            terms[partition] = int(state.get("term") or 0)
    changes: Counter[str] = Counter()
    controller_term = 0
    counted = False
    for url in cluster.servers:
        with BlockingClient([url], CLIENT_TIMEOUT_MS) as client:
            text = _metrics(client)
        for cause, value in _CHANGES.findall(text):
            changes[cause] += int(float(value))
            counted = True
        match = _CONTROLLER_TERM.search(text)
        if match is not None:
            controller_term = max(controller_term, int(float(match.group(1))))
    return Snapshot(terms, controller_term, changes, counted)


def _wait_leaders(cluster: LocalCluster, partitions: int) -> None:
    deadline = time.monotonic() + LEADERS_TIMEOUT_S
    with BlockingClient(cluster.servers, CLIENT_TIMEOUT_MS) as client:
        while time.monotonic() < deadline:
            states = [_get_json(client, partition_state_path(TOPIC, p)) for p in range(partitions)]
            if all(state.get("leader") for state in states):
                return
            time.sleep(0.5)
    raise RuntimeError(f"{TOPIC}: not every partition has a leader after {LEADERS_TIMEOUT_S} s")


def _produce(bootstrap: str, rate: int, partitions: int, until: float, load: Load) -> None:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
    })  # fmt: skip

    def report(error: Any, message: Any) -> None:
        if error is None:
            load.produced += 1
        else:
            load.produce_errors += 1
            load.errors[f"produce {error.name()}"] += 1

    value = b"x" * RECORD_BYTES
    sent = 0
    started = time.monotonic()
    while (now := time.monotonic()) < until:
        due = int((now - started) * rate)
        while sent < due:
            try:
                producer.produce(TOPIC, value, partition=sent % partitions, on_delivery=report)
            except BufferError:
                load.errors["produce queue full"] += 1
                break
            sent += 1
        producer.poll(0.01)
    producer.flush(30)


def _consume(bootstrap: str, until: float, load: Load) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-leaders", "auto.offset.reset": "earliest",
        "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
    })  # fmt: skip
    consumer.subscribe([TOPIC])
    try:
        while time.monotonic() < until:
            for message in consumer.consume(500, 0.2):
                error = message.error()
                if error is None:
                    load.consumed += 1
                elif not error.name().endswith("PARTITION_EOF"):
                    load.errors[f"consume {error.name()}"] += 1
    finally:
        consumer.close()


def _sample_load(until: float, samples: list[float]) -> None:
    while time.monotonic() < until:
        with open("/proc/loadavg", encoding="ascii") as file:
            samples.append(float(file.read().split()[0]))
        time.sleep(1.0)


def _failover_s(cluster: LocalCluster) -> float:
    """kill -9 the node leading partition 0, and the seconds until another node answers as its leader
    (asked of the surviving nodes every 50 ms); the node is started again before this returns."""
    with BlockingClient(cluster.servers, CLIENT_TIMEOUT_MS) as client:
        state = _get_json(client, partition_state_path(TOPIC, 0))
    victim = str(state["leader"])
    term = int(state.get("term") or 0)
    survivors = [url for node, url in sorted(cluster.urls.items()) if node != victim]
    os.kill(cluster.pids[victim], signal.SIGKILL)
    killed = time.monotonic()
    elapsed: float | None = None
    with BlockingClient(survivors, CLIENT_TIMEOUT_MS) as client:
        while time.monotonic() - killed < FAILOVER_TIMEOUT_S:
            with contextlib.suppress(ClientError):
                state = _get_json(client, partition_state_path(TOPIC, 0))
                if state.get("leader") not in (None, victim) and int(state.get("term") or 0) > term:
                    elapsed = time.monotonic() - killed
                    break
            time.sleep(0.05)
    cluster.control("start", victim)
    if elapsed is None:
        raise RuntimeError(f"no new leader of {TOPIC}/0 within {FAILOVER_TIMEOUT_S} s of killing {victim}")
    return elapsed


def _measure(cluster: LocalCluster, args: argparse.Namespace) -> dict[str, Any]:
    with BlockingClient(cluster.servers, CLIENT_TIMEOUT_MS) as client:
        client.create_topic(TOPIC, args.partitions, 3)
    _wait_leaders(cluster, args.partitions)
    say(f"every partition of {TOPIC} has a leader; settling {args.settle} s")
    time.sleep(args.settle)
    before = _snapshot(cluster, args.partitions)
    say(f"{args.burners} burners, {args.rate} records/s produced and consumed, for {args.duration} s")
    started = time.monotonic()
    until = started + args.duration
    burners = [
        subprocess.Popen([sys.executable, "-c", BURNER.format(seconds=args.duration)])
        for _ in range(args.burners)
    ]
    load = Load()
    samples: list[float] = []
    threads = [
        threading.Thread(
            target=_produce, args=(cluster.bootstrap_servers, args.rate, args.partitions, until, load)
        ),
        threading.Thread(target=_consume, args=(cluster.bootstrap_servers, until, load)),
        threading.Thread(target=_sample_load, args=(until, samples)),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(args.duration + 60)
    finally:
        for burner in burners:
            if burner.poll() is None:
                burner.kill()
            burner.wait()
    window_s = time.monotonic() - started
    after = _snapshot(cluster, args.partitions)
    elections = sum(after.terms[p] - before.terms[p] for p in before.terms)
    controller = after.controller_term - before.controller_term
    minutes = window_s / 60
    result: dict[str, Any] = {
        "burners": args.burners,
        "duration_s": round(window_s, 1),
        "partitions": args.partitions,
        "rate": args.rate,
        "partition_elections": elections,
        "controller_elections": controller,
        "leader_changes_per_minute": round((elections + controller) / minutes, 2),
        "load_average": {
            "min": min(samples, default=0.0),
            "mean": round(statistics.fmean(samples), 2) if samples else 0.0,
            "max": max(samples, default=0.0),
        },
        "load": {**asdict(load), "errors": dict(load.errors)},
    }
    if after.counted:
        result["leader_changes_by_cause"] = dict(sorted((after.changes - before.changes).items()))
    failovers = []
    for trial in range(args.failovers):
        say(f"failover {trial + 1}/{args.failovers}: kill -9 of partition 0's leader")
        failovers.append(round(_failover_s(cluster), 2))
        _wait_leaders(cluster, args.partitions)
        time.sleep(FAILOVER_SETTLE_S)
    result["failover_s"] = failovers
    return result


def _table(result: dict[str, Any]) -> str:
    load = result["load"]
    average = result["load_average"]
    lines = [
        f"{result['burners']} CPU-bound processes for {result['duration_s']} s; "
        f"{result['partitions']} partitions x 3 replicas; {result['rate']} records/s produced and consumed",
        f"load average (1 min) during the window: min {average['min']}, mean {average['mean']}, "
        f"max {average['max']}",
        f"produced {load['produced']} (errors {load['produce_errors']}), consumed {load['consumed']}",
        f"elections: partitions {result['partition_elections']}, controller {result['controller_elections']}",
    ]
    if "leader_changes_by_cause" in result:
        causes = result["leader_changes_by_cause"]
        lines.append(
            "leader changes by cause: " + (", ".join(f"{k} {v}" for k, v in causes.items()) or "none")
        )
    if result["failover_s"]:
        times = result["failover_s"]
        lines.append(
            f"failover after kill -9 of a leader (s, {len(times)} trials): min {min(times)}, "
            f"median {statistics.median(times)}, max {max(times)}"
        )
    if load["errors"]:
        lines.append("client errors: " + ", ".join(f"{k} {v}" for k, v in sorted(load["errors"].items())))
    lines.append(f"leader changes per minute: {result['leader_changes_per_minute']}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (also registered by ``raftlog bench leaders``)."""
    parser.add_argument(
        "--burners", type=int, default=4, help="CPU-bound processes during the window (default 4)"
    )
    parser.add_argument("--duration", type=float, default=120.0, help="the window, seconds (default 120)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the topic (default 6)")
    parser.add_argument("--rate", type=int, default=200, help="records/s produced and consumed (default 200)")
    parser.add_argument(
        "--settle", type=float, default=60.0, help="seconds between leaders and window (default 60)"
    )
    parser.add_argument(
        "--failovers", type=int, default=0,
        help="after the window, N times: kill -9 partition 0's leader, time its successor (default 0)",
    )  # fmt: skip
    add_dir_argument(parser, "the cluster's temporary data directory")
    add_json_argument(parser, "the result")


def _problem(args: argparse.Namespace) -> str | None:
    checks = [
        (0 <= args.burners <= 64, "--burners must be in [0, 64]"),
        (10 <= args.duration <= 3600, "--duration must be in [10, 3600]"),
        (1 <= args.partitions <= 1000, "--partitions must be in [1, 1000]"),
        (1 <= args.rate <= 100_000, "--rate must be in [1, 100000]"),
        (0 <= args.settle <= 600, "--settle must be in [0, 600]"),
        (0 <= args.failovers <= 100, "--failovers must be in [0, 100]"),
    ]
    return next((message for ok, message in checks if not ok), None)


def run_from_args(args: argparse.Namespace) -> int:
    problem = _problem(args)
    if problem is not None:
        return refused("leaders", problem)
    os.makedirs(args.dir, exist_ok=True)
    directory = tempfile.mkdtemp(prefix="bench-leaders-", dir=args.dir)
    try:
        with LocalCluster(directory) as cluster:
            result = _measure(cluster, args)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    emit(args.json, _table(result), result)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("leaders", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
