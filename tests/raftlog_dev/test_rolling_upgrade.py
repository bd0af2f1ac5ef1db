"""A rolling upgrade for real: a 3-node ``raftlog dev`` cluster on the previous release's code (a git
worktree of the commit CHANGELOG.md names, with its own virtualenv: ``raftlog_dev.releases``, built once
under ``.releases/``), produced to and consumed from through both doors the whole time, each node in turn
put in maintenance, restarted on this checkout's code (``raftlog dev restart nX --python``) and let out
of maintenance once the cluster is healthy (the first one also goes back to the previous release and
forward again: until the level is raised, a node may); then the operator finalizes ``raftlog.version`` 2
and ``transaction.version`` 2 (the upgraded cluster stays at level 1 of both until then), the
transactional load going on across the switch; then each node in turn is started again on the previous
release (its data, its command line) and kept out (``old_release.kept_out_round``), and back. No
acknowledged record is lost or duplicated, no committed offset lost, every replica byte for byte the same
at the end (``raftlog log compare``), no client error but retriable ones and those a node running the
previous release gave (attributed per answer: ``upgrade_load``), and the cluster is healthy after each step.
The numbers checked are printed."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from old_release import cli, compare_replicas, healthy, kept_out_round, ok
from test_dev import ENV, description
from upgrade_load import IDEMPOTENT, PARTITIONS, PREVIOUS, THIS, TRANSACTIONAL, WEB, Load, Releases, check

import raftlog
from partitions.features import BASE_LEVEL, RAFTLOG_VERSION, SUPPORTED
from raftlog_dev import layout, releases
from tests.waiting import wait_for

NODES = ("n1", "n2", "n3")


@pytest.fixture(scope="module")
def previous() -> releases.Release:
    return releases.release(PREVIOUS)


def shown(data: pathlib.Path, *argv: str, server: str | None = None) -> Any:
    return json.loads(ok(data, *argv, "--json", server=server))


def knows(http: str, topic: str) -> bool:
    """``GET /topics/TOPIC`` on that node describes the topic."""
    try:
        with urllib.request.urlopen(f"{http}/topics/{topic}", timeout=10) as answer:
            return answer.status == 200
    except OSError:
        return False


def restart(data: pathlib.Path, releases: Releases, node: str, python: str, release: str) -> str:
    """``raftlog dev restart NODE --python PYTHON``, the node's code noted as switching meanwhile."""
    releases.switching(node)
    restarted = ok(data, "dev", "restart", node, "--data-dir", str(data), "--python", python)
    releases.switched(node, release)
    return restarted


def progress_condition(load: Load, *parts: str) -> Callable[[], bool | Lagging]:
    """A condition: every part of the load (or those named) acknowledged more than now; a client error of
    any part fails it at once."""
    since = load.tally.progress()
    if parts:
        since = {part: count for part, count in since.items() if part in parts}
    return lambda: progressed(load, since)


class Lagging(dict[str, int]):
    """The parts of the load that acknowledged nothing more (part -> its count): false while there are any,
    so that a wait that ends names them."""

    def __bool__(self) -> bool:
        return not len(self)


def progressed(load: Load, since: dict[str, int]) -> bool | Lagging:
    """Whether every part of the load acknowledged more since ``since``; a client error fails at once."""
    with load.tally.lock:
        assert not load.tally.errors, "\n".join(load.tally.errors[:20])
    now = load.tally.progress()
    lagging = Lagging({part: now[part] for part in since if now[part] <= since[part]})
    return True if not lagging.keys() else lagging


# Eleven node restarts, each step bounded by its own wait (up to 90 s for a healthy cluster): the run's
# bound only catches a hang none of them does. 300 s, the suite's default, was what the steps took on a
# CI machine twice as slow as usual (143-163 s before), cutting the run while it went on.
@pytest.mark.timeout(900)
def test_a_cluster_of_the_previous_release_upgrades_node_by_node_under_load(
    tmp_path: pathlib.Path, previous: releases.Release
) -> None:
    data = tmp_path / "data"
    base_port = layout.free_base_port(len(NODES))
    output = tmp_path / "dev.out"
    with open(output, "wb") as out:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "raftlog_cli", "dev", "--nodes", str(len(NODES)), "--data-dir", str(data),
             "--base-port", str(base_port), "--python", previous.python],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=ENV,
        )  # fmt: skip
    load: Load | None = None
    try:
        wait_for(
            lambda: "up; cluster.json" in output.read_text() or supervisor.poll() is not None,
            "the cluster of the previous release up",
            timeout_s=120,
        )
        assert supervisor.poll() is None, output.read_text()
        nodes = description(data)["nodes"]
        http, kafka = [n["http"] for n in nodes], [n["kafka"] for n in nodes]
        assert {n["id"]: n["python"] for n in nodes} == dict.fromkeys(NODES, previous.python)
        for topic in (IDEMPOTENT, TRANSACTIONAL, WEB):
            body = json.dumps({"name": topic, "partitions": PARTITIONS, "replication_factor": 3}).encode()
            created = urllib.request.Request(
                f"{http[0]}/v1/topics", data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(created, timeout=60) as answer:
                assert answer.status == 201

        # a topic just created reaches each node's metadata a moment later: the load starts once every
        # node describes every topic (a node that has not learned it yet answers 404, as it should)
        wait_for(
            lambda: all(knows(h, t) for h in http for t in (IDEMPOTENT, TRANSACTIONAL, WEB)),
            "every node to know the load's topics",
            timeout_s=60,
        )
        releases = Releases(NODES, PREVIOUS)
        load = Load(http, kafka, releases=releases)
        load.start()
        wait_for(lambda: progressed(load, dict.fromkeys(load.tally.progress(), 0)), "load on the old cluster")
        for step, node in enumerate(NODES):
            ok(data, "node", "maintenance", node)
            since = load.tally.progress()
            restarted = restart(data, releases, node, sys.executable, THIS)
            assert "ready" in restarted, restarted
            wait_for(lambda: healthy(http[0]), f"the cluster healthy with {node} upgraded", timeout_s=90)
            if step == 0:  # level 1: what it wrote meanwhile the previous release reads, so it may go back
                for python, release in ((previous.python, PREVIOUS), (sys.executable, THIS)):
                    restart(data, releases, node, python, release)
                    wait_for(
                        lambda: healthy(http[0]), f"the cluster healthy, {node} on {python}", timeout_s=90
                    )
            ok(data, "node", "maintenance", node, "--off")
            upgraded_http = http[NODES.index(node)]
            features = shown(data, "cluster", "features", server=upgraded_http)
            upgraded = {n: features["nodes"][n]["version"] for n in NODES[: step + 1]}
            assert upgraded == dict.fromkeys(NODES[: step + 1], raftlog.version()), features
            old = {n: features["nodes"][n]["version"] for n in NODES[step + 1 :]}
            assert old == dict.fromkeys(NODES[step + 1 :], None), features  # 0.1.0 gossips no version
            # finalization is the operator's act: level 1 stays until raised, also once every node runs 0.2.0
            assert features["finalized"] == dict.fromkeys(SUPPORTED, BASE_LEVEL), features
            if step == len(NODES) - 2:  # refused, naming the one node still on the previous release
                refused = cli(
                    data, "cluster", "features", "upgrade", "--feature", RAFTLOG_VERSION, "--level", "2",
                    server=upgraded_http,
                )  # fmt: skip
                assert refused.returncode != 0 and "not every node supports it" in refused.stderr, (
                    refused.stdout + refused.stderr
                )
                assert f"{NODES[-1]} (supports 1)" in refused.stderr, refused.stdout + refused.stderr
            wait_for(lambda s=since: progressed(load, s), f"load through the restart of {node}", timeout_s=90)

        ok(data, "cluster", "features", "upgrade")  # every level every node supports, in one step
        assert shown(data, "cluster", "features")["finalized"] == dict(SUPPORTED)
        since = load.tally.progress()
        wait_for(lambda: progressed(load, since), "load at the new feature level", timeout_s=90)
        # the level raised: each node started again on the previous release is kept out, and comes back
        rounds = []
        for node in NODES:
            rounds.append(
                kept_out_round(
                    data,
                    NODES,
                    node,
                    previous.python,
                    lambda: progress_condition(load, IDEMPOTENT),
                    IDEMPOTENT,
                    releases,
                )
            )
        load.stop()
        # a replica the load's last writes left behind on a loaded machine is briefly under-replicated
        wait_for(lambda: healthy(http[0]), "the cluster healthy once the load stopped", timeout_s=90)
        counted = check(load, http[0])
        supervisor.send_signal(2)
        supervisor.wait(60)
        compared = compare_replicas(data)
        retried, previous_answers = dict(load.tally.retried), dict(load.tally.previous_release)
        summary = compared.strip().splitlines()[-1]
        print(
            f"rolling upgrade {PREVIOUS} -> {raftlog.version()}: {counted}; retried: {retried}; answered by "
            f"nodes on {PREVIOUS}: {previous_answers}; kept out: {rounds}; {summary}"
        )
        assert counted["idempotent acknowledged"] > 0 and counted["transactions committed"] > 0
    finally:
        if load is not None:
            load.stop()
        if supervisor.poll() is None:
            supervisor.send_signal(2)
            supervisor.wait(60)
