"""Real node processes holding many partitions: deleting a large topic costs the controller no election
and stops no produce elsewhere; a node restarted under them deposes no working leader (pre-vote) and
the cluster serves throughout."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from api.app import PRODUCE_TIMEOUT_MS_DEFAULT
from tests.waiting import wait_for

from .cluster import ProcessCluster

# the run's bound only catches a hang the steps' own waits do not (the topic's replicas opening, SETTLE_S;
# the restart's exit and reopening; the deletion's 120 s): their sum, not the suite's default of 300 s
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

BIG = 2000  # partitions x 3 replicas: 2,001 replicas per node with the probe topic
SETTLE_S = 240.0


def call(url: str, method: str = "GET", body: object = None, timeout_s: float = 10.0) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            text = answer.read()
            return answer.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        lines = answer.read().decode().splitlines()
    values = {}
    for line in lines:
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.partition(" ")
            values[name] = float(value)
    return values


# How often a wait asks the nodes: each ask reads every node's /metrics, which renders the series of
# every partition the node leads (about 60 ms of a node's CPU at 700 led partitions), and the waits here
# last tens of seconds; a term only grows, so a sparser sample still sees every election.
ASK_EVERY_S = 2.0


# What holds a produce back on a node: its Raft driver's rounds, its journal's syncs, its event loop.
HELD_BACK = ("raft_driver_round_seconds", "journal_sync_seconds", "event_loop_lag_seconds")


def buckets(url: str) -> dict[str, dict[float, float]]:
    """Each ``HELD_BACK`` histogram of a node: its cumulative count at each upper bound."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as answer:
        lines = answer.read().decode().splitlines()
    found: dict[str, dict[float, float]] = {name: {} for name in HELD_BACK}
    for line in lines:
        for name in HELD_BACK:
            prefix = f'raftlog_{name}_bucket{{le="'
            if line.startswith(prefix):
                bound, _, count = line[len(prefix) :].partition('"} ')
                found[name][float(bound)] = float(count)
    return found


def held_back(before: dict[str, dict[float, float]], after: dict[str, dict[float, float]]) -> str:
    """How many of each between two readings took over 1 s, and the bound the longest stayed under."""
    parts = []
    for name in HELD_BACK:
        grew = {b: after[name].get(b, 0.0) - before[name].get(b, 0.0) for b in after[name]}
        total = grew.get(float("inf"), 0.0)
        over_1s = total - max((n for b, n in grew.items() if b <= 1.0), default=0.0)
        longest = min((b for b, n in grew.items() if n == total), default=0.0)
        parts.append(f"{name}: {total:.0f}, {over_1s:.0f} over 1 s, all under {longest} s")
    return "; ".join(parts)


@dataclass
class OpenReplicas:
    """Each node's open replicas (None: its /metrics did not answer); true once each holds ``count``. A
    wait that runs out prints it: how far each node got."""

    count: int
    by_node: dict[str, float | None]

    def __bool__(self) -> bool:
        return all(held == self.count for held in self.by_node.values())


def replicas_open(cluster: ProcessCluster, node_ids: list[str], count: int) -> OpenReplicas:
    by_node: dict[str, float | None] = {}
    for node_id in node_ids:
        try:
            by_node[node_id] = metrics(cluster.url(node_id)).get("raftlog_partition_replicas")
        except OSError:
            by_node[node_id] = None
    return OpenReplicas(count, by_node)


# A probe waits for the node's own answer: a node answers every produce within its produce timeout, 200
# once committed or an error once not, so the node decides whether it served, never the test's clock (a
# client timeout equal to the node's own, as it was, raced the node's answer on a loaded CI machine). The
# margin is the loopback round trip and the request's wait for a CPU there.
PROBE_TIMEOUT_S = PRODUCE_TIMEOUT_MS_DEFAULT / 1000 + 20


SLOW_S = 2.0  # an answer this slow goes into the probe's timeline, which a failure prints


@dataclass
class Probe:
    """One single-record produce to ``probe``/0 every 100 ms through the given nodes, round-robin: any
    answer but 200, or none within ``PROBE_TIMEOUT_S``, is a failure. ``timeline``: what the test did
    and when; a failure's message places the failed and slow answers among them."""

    urls: list[str]
    failures: list[str] = field(default_factory=list)
    sent: int = 0
    slowest_s: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    began: float = field(default_factory=time.monotonic)
    timeline: list[tuple[float, str]] = field(default_factory=list)

    def run(self) -> None:
        while not self.stop.is_set():
            url = self.urls[self.sent % len(self.urls)] + "/topics/probe/partitions/0"
            started = time.monotonic()
            outcome = "200"
            try:
                status, body = call(url, "POST", {"records": [{"value": "x"}]}, PROBE_TIMEOUT_S)
                if status != 200:
                    outcome = f"{status} {body}"
                    self.failures.append(outcome)
            except OSError as error:
                outcome = repr(error)
                self.failures.append(outcome)
            took = time.monotonic() - started
            self.slowest_s = max(self.slowest_s, took)
            if outcome != "200" or took >= SLOW_S:
                self.event(
                    f"a produce via {url.split('/topics')[0]} sent: {outcome[:80]} after {took:.2f} s",
                    started,
                )
            self.sent += 1
            self.stop.wait(0.1)

    def event(self, what: str, at: float | None = None) -> None:
        self.timeline.append(((time.monotonic() if at is None else at) - self.began, what))

    def report(self) -> str:
        lines = [f"{t:7.2f} s  {what}" for t, what in sorted(self.timeline)]
        return (
            f"{len(self.failures)} of {self.sent} produces failed, slowest {self.slowest_s:.2f} s:\n"
            + "\n".join(lines)
        )

    def goes_on(self, sends: int) -> None:
        """Returns once ``sends`` more produces were answered (a window as long as the cluster takes to
        serve them, not a fixed time)."""
        target = self.sent + sends
        wait_for(lambda: self.sent >= target, f"{sends} more probe produces", 120, every_s=0.1)


@contextmanager
def probing(urls: list[str]) -> Iterator[Probe]:
    probe = Probe(urls)
    thread = threading.Thread(target=probe.run, daemon=True)
    thread.start()
    try:
        yield probe
    finally:
        probe.stop.set()
        thread.join(15)


def with_big_topic(cluster: ProcessCluster, partitions: int = BIG) -> None:
    admin = cluster.urls[0]
    status, body = call(
        admin + "/v1/topics", "POST", {"name": "probe", "partitions": 1, "replication_factor": 3}
    )
    assert status == 201, body
    status, body = call(
        admin + "/v1/topics",
        "POST",
        {"name": "big", "partitions": partitions, "replication_factor": 3},
        timeout_s=120,
    )
    assert status == 201, body
    node_ids = [n.node_id for n in cluster.nodes]
    wait_for(
        lambda: replicas_open(cluster, node_ids, partitions + 1),
        f"{partitions + 1} replicas open on every node",
        SETTLE_S,
        every_s=ASK_EVERY_S,
    )


def controller_terms(cluster: ProcessCluster, node_ids: list[str]) -> dict[str, float | None]:
    return {n: metrics(cluster.url(n)).get("raftlog_controller_term") for n in node_ids}


def test_under_many_partitions_a_restart_deposes_no_leader_and_a_delete_costs_no_election(
    cluster: ProcessCluster,
) -> None:
    """One big topic (building it is most of the time) serves both: first a node restarted under it,
    then the topic's deletion."""
    with_big_topic(cluster)
    node_ids = [n.node_id for n in cluster.nodes]

    # a node restarted under many partitions deposes no working leader (pre-vote)
    victim, probe_leader = pick_victim(cluster)
    survivors = [n for n in node_ids if n != victim]
    probe_term = partition_term(cluster, "probe", probe_leader)
    terms = {n: t for n, t in controller_terms(cluster, survivors).items()}
    before = {n: buckets(cluster.url(n)) for n in survivors}
    with probing([cluster.url(n) for n in survivors]) as probe:
        probe.event(f"the probe's leader is {probe_leader}")
        restart_under_probe(cluster, victim, probe, BIG + 1, exit_s=60, open_s=SETTLE_S)
    report = (
        probe.report()
        + "".join(f"\n{n}: {held_back(before[n], buckets(cluster.url(n)))}" for n in survivors)
        + "\nwhat the nodes logged of the probe partition's group:\n"
        + "\n".join(group_lines(cluster, "probe-0."))
    )
    print(report)  # shown with -s, or beside a failure
    assert partition_term(cluster, "probe", probe_leader) == probe_term, (
        f"the probe partition held an election: {report}"
    )
    assert controller_terms(cluster, survivors) == terms, f"the controller held an election: {report}"
    assert probe.sent > 10 and probe.failures == [], report

    # deleting the large topic costs the controller no election and stops no produce elsewhere
    terms = controller_terms(cluster, node_ids)
    assert all(term is not None and term > 0 for term in terms.values()), terms
    with probing(cluster.urls) as probe:
        probe.goes_on(10)  # served before the delete
        probe.event("deleting the big topic")
        status, body = call(cluster.urls[0] + "/v1/topics/big", "DELETE", timeout_s=60)
        assert status == 204, body
        seen: list[dict[str, float | None]] = []

        def dropped() -> bool:  # one /metrics of each node gives both its term and its replicas
            values = {n: metrics(cluster.url(n)) for n in node_ids}
            seen.append({n: v.get("raftlog_controller_term") for n, v in values.items()})
            return all(v.get("raftlog_partition_replicas") == 1 for v in values.values())

        wait_for(dropped, "the big topic's replicas dropped on every node", 120, every_s=ASK_EVERY_S)
        probe.event("the big topic's replicas dropped on every node")
        probe.goes_on(20)
    assert all(sample == terms for sample in seen), f"the controller held an election: {terms} -> {seen}"
    print(probe.report())
    assert probe.sent > 10 and probe.failures == [], probe.report()


def group_lines(cluster: ProcessCluster, group_prefix: str) -> list[str]:
    """Each node's log lines about a Raft group (leader changes and their causes, check-quorum step-downs),
    its opening excepted, in time order: what a failure needs to tell a stall from a deposed leader."""
    found = []
    for node in cluster.nodes:
        with open(os.path.join(cluster.root, node.node_id, "node.log"), errors="replace") as log:
            found += [
                f"{node.node_id}: {line.rstrip()}"
                for line in log
                if f"group {group_prefix}" in line and " opened " not in line
            ]
    return sorted(found, key=lambda line: line.partition(": ")[2])


def pick_victim(cluster: ProcessCluster) -> tuple[str, str]:
    """The node to restart (neither the probe partition's leader nor the controller) and that leader."""
    probe_leader = partition_leader(cluster, "probe")
    controller = controller_of(cluster)
    victim = next(n.node_id for n in cluster.nodes if n.node_id not in (probe_leader, controller))
    return victim, probe_leader


def restart_under_probe(
    cluster: ProcessCluster, victim: str, probe: Probe, replicas: int, exit_s: float, open_s: float
) -> float:
    """Stop ``victim`` (SIGTERM), start it again once it exited, wait until it holds its ``replicas`` again
    and for 20 more probe produces after (while it takes up its part again); the steps go into the
    probe's timeline. Returns the seconds the stop took."""
    probe.event(f"{victim} stopping")
    began = time.monotonic()
    cluster.processes[victim].terminate()
    cluster.processes[victim].wait(exit_s)
    stopped_s = time.monotonic() - began
    probe.event(f"{victim} exited after {stopped_s:.1f} s; starting it")
    cluster.start(victim)
    wait_for(
        lambda: replicas_open(cluster, [victim], replicas),
        f"{victim} reopening its replicas",
        open_s,
        every_s=ASK_EVERY_S,
    )
    probe.event(f"{victim} has its {replicas} replicas open")
    probe.goes_on(20)
    return stopped_s


def controller_of(cluster: ProcessCluster) -> str:
    return str(call(cluster.urls[0] + "/v1/cluster/health", timeout_s=30)[1]["controller"])  # type: ignore[index]


def partition_leader(cluster: ProcessCluster, topic: str) -> str:
    status, body = call(cluster.urls[0] + f"/v1/partitions/{topic}/0")
    assert status == 200 and isinstance(body, dict) and body["leader"], body
    return str(body["leader"])


def partition_term(cluster: ProcessCluster, topic: str, via: str) -> int:
    status, body = call(cluster.url(via) + f"/v1/partitions/{topic}/0")
    assert status == 200 and isinstance(body, dict), body
    return int(body["term"])
