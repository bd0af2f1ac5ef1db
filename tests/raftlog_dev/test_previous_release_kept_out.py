"""A node started again on the previous release (0.1.0: a git worktree of the commit CHANGELOG.md names,
``raftlog_dev.releases``) after the cluster's levels rose above it is kept out, whichever node and in
turn each of them, under an idempotent producer: it neither receives nor serves entries, the others name
it in their health and refuse it a leadership, every acknowledged record is read back exactly once, and
every partition's replicas are byte for byte the same afterwards (``raftlog log compare``). Two clusters
formed by this checkout: at its own levels (2), and at release 0.1.0's (``--release-version 0.1.0``),
where the node may go back to 0.1.0 and serve until the operator raises the level, and is kept out after.
The cluster upgraded from 0.1.0 goes through the same rounds in ``test_rolling_upgrade``."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from old_release import RELEASE_LEVELS_1, compare_replicas, health, healthy, kept_out_round, ok
from test_dev import ENV, description
from upgrade_load import IDEMPOTENT, PARTITIONS, PREVIOUS, THIS, Load, Releases, exactly_once, read_http

from partitions.features import RAFTLOG_VERSION
from raftlog_dev import layout, releases
from tests.waiting import wait_for

NODES = ("n1", "n2", "n3")


@pytest.fixture(scope="module")
def previous() -> releases.Release:
    return releases.release("0.1.0")


class DevCluster:
    """``raftlog dev`` of this checkout, 3 nodes, with the topic of an idempotent producer's load."""

    def __init__(self, tmp_path: pathlib.Path, *serve_args: str) -> None:
        self.data = tmp_path / "data"
        self.output = tmp_path / "dev.out"
        with open(self.output, "wb") as out:
            self.supervisor = subprocess.Popen(
                [sys.executable, "-m", "raftlog_cli", "dev", "--nodes", str(len(NODES)), "--data-dir",
                 str(self.data), "--base-port", str(layout.free_base_port(len(NODES))), *serve_args],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=ENV,
            )  # fmt: skip
        wait_for(
            lambda: "up; cluster.json" in self.output.read_text() or self.supervisor.poll() is not None,
            "the cluster up",
            timeout_s=120,
        )
        assert self.supervisor.poll() is None, self.output.read_text()
        nodes = description(self.data)["nodes"]
        self.http, self.kafka = [n["http"] for n in nodes], [n["kafka"] for n in nodes]
        body = json.dumps({"name": IDEMPOTENT, "partitions": PARTITIONS, "replication_factor": 3}).encode()
        created = urllib.request.Request(
            f"{self.http[0]}/v1/topics", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(created, timeout=60) as answer:
            assert answer.status == 201
        wait_for(lambda: healthy(self.http[0]), "the new topic's replicas up", timeout_s=60)
        self.releases = Releases(NODES, THIS)  # which code each node runs: the load attributes answers by it
        self.load = Load(self.http, self.kafka, only_idempotent=True, releases=self.releases)

    def progressed(self) -> Callable[[], bool]:
        """A condition: the idempotent producer acknowledged more than now; a client error fails at once."""
        since = len(self.load.tally.acked[IDEMPOTENT])

        def more() -> bool:
            with self.load.tally.lock:
                assert not self.load.tally.errors, "\n".join(self.load.tally.errors[:20])
                return len(self.load.tally.acked[IDEMPOTENT]) > since

        return more

    def finish(self) -> dict[str, int]:
        """Stop the load, read everything back once, stop the cluster, compare the replicas offline."""
        self.load.stop()
        wait_for(lambda: healthy(self.http[0]), "the cluster healthy once the load stopped", timeout_s=90)
        tally = self.load.tally
        read = read_http(self.http[0], IDEMPOTENT)
        problems = list(tally.errors) + exactly_once(
            IDEMPOTENT, read, tally.acked[IDEMPOTENT], tally.unsure[IDEMPOTENT]
        )
        assert not problems, "\n".join(problems[:40])
        self.stop()
        compared = compare_replicas(self.data)
        assert "identical" in compared, compared
        return {
            "acknowledged": len(tally.acked[IDEMPOTENT]),
            "read": len(read),
            "answered by a node on 0.1.0": sum(tally.previous_release.values()),
        }

    def stop(self) -> None:
        if self.supervisor.poll() is None:
            self.supervisor.send_signal(2)
            self.supervisor.wait(60)


@pytest.fixture
def cluster_factory(tmp_path: pathlib.Path) -> Iterator[Callable[..., DevCluster]]:
    made: list[DevCluster] = []

    def make(*serve_args: str) -> DevCluster:
        made.append(DevCluster(tmp_path, *serve_args))
        return made[-1]

    yield make
    for cluster in made:
        cluster.load.stop()
        cluster.stop()


def test_each_node_started_again_on_0_1_0_is_kept_out_of_a_cluster_formed_at_level_2(
    cluster_factory: Callable[..., DevCluster], previous: releases.Release
) -> None:
    cluster = cluster_factory()
    assert ok(cluster.data, "cluster", "features").startswith(f"{RAFTLOG_VERSION}: finalized level 2")
    cluster.load.start()
    wait_for(cluster.progressed(), "the load acknowledged", timeout_s=60)
    rounds = [
        kept_out_round(cluster.data, NODES, node, previous.python, cluster.progressed, IDEMPOTENT)
        for node in NODES
    ]
    # two at once, a majority: the newer node keeps both out, and they cannot serve among themselves either
    # (their partition logs are fenced: release 0.1.0 refuses to open them), so nothing is acknowledged
    # from their logs; both back, every acknowledged record is there once
    for node in ("n2", "n3"):
        cluster.releases.switching(node)
        ok(
            cluster.data,
            "dev",
            "restart",
            node,
            "--data-dir",
            str(cluster.data),
            "--python",
            previous.python,
            "--no-wait",
        )
        cluster.releases.switched(node, PREVIOUS)
        cluster.releases.kept_out.add(node)
    wait_for(
        lambda: set(health(cluster.http[0]).get("nodes_kept_out", {})) == {"n2", "n3"},
        "n1 names both kept out",
        timeout_s=60,
    )
    wait_for(
        lambda: all(
            "log format 'kafka-record-batch-v2 level=2'" in (cluster.data / node / "node.log").read_text()
            for node in ("n2", "n3")
        ),
        "both refused to open their fenced logs on 0.1.0",
        timeout_s=60,
    )
    fenced = [
        line
        for node in ("n2", "n3")
        for line in (cluster.data / node / "node.log").read_text().splitlines()
        if "log format 'kafka-record-batch-v2 level=2'" in line
    ]
    for node in ("n2", "n3"):
        cluster.releases.switching(node)
        ok(cluster.data, "dev", "restart", node, "--data-dir", str(cluster.data), "--python", sys.executable)
        cluster.releases.switched(node, THIS)
        cluster.releases.kept_out.discard(node)
    wait_for(lambda: healthy(cluster.http[0]), "the cluster healthy with n2 and n3 back", timeout_s=90)
    wait_for(cluster.progressed(), "the load acknowledged once they are back", timeout_s=90)
    counted = cluster.finish()
    print(f"kept out of a cluster formed at level 2: {counted}; {rounds}; fenced logs refused: {len(fenced)}")


def test_a_cluster_formed_at_0_1_0s_levels_lets_a_node_go_back_until_the_level_is_raised(
    cluster_factory: Callable[..., DevCluster], previous: releases.Release
) -> None:
    cluster = cluster_factory(RELEASE_LEVELS_1)
    assert ok(cluster.data, "cluster", "features").startswith(f"{RAFTLOG_VERSION}: finalized level 1")
    cluster.load.start()
    wait_for(cluster.progressed(), "the load acknowledged", timeout_s=60)
    # level 1: n1 may run 0.1.0 on its data, and serves (the cluster healthy, nobody kept out)
    cluster.releases.switching("n1")
    ok(cluster.data, "dev", "restart", "n1", "--data-dir", str(cluster.data), "--python", previous.python)
    cluster.releases.switched("n1", PREVIOUS)
    wait_for(lambda: healthy(cluster.http[1]), "the cluster healthy with n1 on 0.1.0", timeout_s=90)
    assert health(cluster.http[1])["nodes_kept_out"] == {}
    wait_for(cluster.progressed(), "the load acknowledged with n1 on 0.1.0", timeout_s=90)
    cluster.releases.switching("n1")
    ok(cluster.data, "dev", "restart", "n1", "--data-dir", str(cluster.data), "--python", sys.executable)
    cluster.releases.switched("n1", THIS)
    wait_for(lambda: healthy(cluster.http[1]), "the cluster healthy, n1 back", timeout_s=90)
    ok(cluster.data, "cluster", "features", "upgrade", "--feature", RAFTLOG_VERSION, "--level", "2")
    # raised: the same node, started on 0.1.0 again, is kept out now
    rounds = [
        kept_out_round(
            cluster.data, NODES, "n1", previous.python, cluster.progressed, IDEMPOTENT, cluster.releases
        )
    ]
    counted = cluster.finish()
    print(f"formed at level 1, raised to 2: {counted}; {rounds}")
