"""The operator commands of ``raftlog`` against the API over fake nodes, behind an admin token."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Harness, Node

from partitions.controller.commands import CancelMove, MoveReplicas, StepMove
from raftlog_cli.admin import every_level_up
from raftlog_cli.cli import main
from tests.waiting import wait_until


async def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(["n1", "n2", "n3"])


@pytest.fixture
async def guarded(cluster: FakeCluster, harness: Harness) -> Node:
    return await harness.start(cluster, "n1", admin_token="tok")


async def test_the_token_comes_from_the_environment_never_from_the_command_line(
    guarded: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAFTLOG_ADMIN_TOKEN", raising=False)
    code, _, err = await run(capsys, "cluster", "health", "--server", guarded.url)
    assert code == 1 and "40101" in err
    for option in ("--admin-token", "--token"):  # ps would show it to every local user
        code, out, err = await run(capsys, "cluster", "health", "--server", guarded.url, option, "tok")
        assert code == 2 and out == "" and "$RAFTLOG_ADMIN_TOKEN" in err and "tok " not in err, err
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    code, out, _ = await run(capsys, "cluster", "health", "--server", guarded.url)
    assert code == 0 and "healthy: yes" in out and "disk n1:" in out
    code, out, _ = await run(capsys, "cluster", "nodes", "--server", guarded.url)
    assert code == 0 and out.splitlines()[0].startswith("NODE") and len(out.splitlines()) == 4


async def test_cluster_health_exits_1_when_unhealthy(
    cluster: FakeCluster, guarded: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    cluster.states["n3"] = "dead"
    code, out, _ = await run(capsys, "cluster", "health", "--json", "--server", guarded.url)
    assert code == 1 and json.loads(out)["nodes_down"] == ["n3"]


async def test_partition_move_status_cancel_and_transfer(
    cluster: FakeCluster, guarded: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    cluster.add_topic("t", 1, replicas=[["n1", "n2"]])
    auth = ("--server", guarded.url)
    code, _, err = await run(capsys, "partition", "move", "t", "0", "--replicas", "n1,n9", *auth)
    assert code == 1 and "40405" in err and "n9" in err
    code, out, _ = await run(capsys, "partition", "move", "t", "0", "--replicas", "n1,n3", *auth)
    assert code == 0 and "moving to n1,n3" in out
    code, out, _ = await run(capsys, "partition", "status", "t", "0", *auth)
    assert code == 0 and "moving to" in out
    code, out, _ = await run(capsys, "partition", "cancel", "t", "0", *auth)
    assert code == 0 and "cancelled, returning to n1,n2" in out
    code, out, _ = await run(capsys, "partition", "transfer", "t", "0", "--target", "n2", *auth)
    assert code == 0 and "leader is now n2" in out


async def test_node_and_topic_config_commands(
    cluster: FakeCluster, guarded: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    cluster.add_topic("t", 1, replicas=[["n1", "n2"]])
    auth = ("--server", guarded.url)
    code, out, _ = await run(capsys, "node", "decommission", "n2", *auth)
    assert code == 0 and "n2: decommissioning, 1 replica(s) left" in out
    code, out, _ = await run(capsys, "node", "recommission", "n2", *auth)
    assert code == 0 and "not decommissioning" in out
    # n3 holds no replica: its decommission is finished at once, and every command says "decommissioned"
    code, out, _ = await run(capsys, "node", "decommission", "n3", *auth)
    assert code == 0 and "n3: decommissioned" in out
    code, out, _ = await run(capsys, "cluster", "health", *auth)
    assert code == 0 and "decommissioned (hold no replica, may be stopped): n3" in out
    assert "decommissioning" not in out
    code, out, _ = await run(capsys, "cluster", "nodes", *auth)
    row = next(line for line in out.splitlines() if line.startswith("n3"))
    assert code == 0 and "decommissioned" in row and "decommissioning" not in row
    code, out, _ = await run(capsys, "node", "recommission", "n3", *auth)
    assert code == 0 and "not decommissioning" in out
    code, out, _ = await run(capsys, "node", "maintenance", "n3", *auth)
    assert code == 0 and "maintenance on" in out and cluster.flags["maintenance"] == {"n3"}
    code, out, _ = await run(capsys, "node", "maintenance", "n3", "--off", *auth)
    assert code == 0 and cluster.flags["maintenance"] == set()
    code, out, _ = await run(capsys, "topic", "config", "t", "--set", "retention.ms=5000", *auth)
    assert code == 0 and out.strip() == "retention.ms=5000"
    code, _, err = await run(capsys, "topic", "config", "t", "--set", "bogus=1", *auth)
    assert code == 1 and "40001" in err
    code, out, _ = await run(capsys, "topic", "config", "t", "--json", *auth)
    assert json.loads(out) == {"retention.ms": 5000}


async def test_wait_prints_progress_until_done(
    cluster: FakeCluster, guarded: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    cluster.add_topic("t", 1, replicas=[["n1", "n2"]])
    auth = ("--server", guarded.url)

    async def finish_later() -> None:
        # once the command's move is under way, it turns back and ends where it began (the fake drives none)
        await wait_until(lambda: ("t", 0) in cluster.moves, "the move started", 30.0, every_s=0.02)
        cluster.propose(CancelMove("t", 0))
        cluster.propose(StepMove("t", 0, ["n1", "n2"]))

    finishing = asyncio.create_task(finish_later())
    code, out, _ = await run(capsys, "partition", "move", "t", "0", "--replicas", "n1,n3", "--wait", *auth)
    await finishing
    assert code == 0 and out.strip().splitlines()[-1] == "t/0: replicas n1,n2, no move in progress"
    code, out, _ = await run(capsys, "node", "decommission", "n3", "--wait", *auth)
    assert code == 0 and "decommissioned" in out
    await run(capsys, "node", "recommission", "n3", *auth)  # somewhere for n2's replica to go
    code, _, err = await run(capsys, "node", "decommission", "n2", "--wait", "--timeout", "0.3", *auth)
    assert code == 1 and "not done after 0.3 s" in err


async def test_a_decommission_that_could_never_finish_is_refused_and_changes_nothing(
    cluster: FakeCluster, guarded: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    cluster.add_topic("orders", 2, replicas=[["n1", "n2", "n3"], ["n2", "n3", "n1"]])  # RF 3 on 3 nodes
    auth = ("--server", guarded.url)
    code, out, err = await run(capsys, "node", "decommission", "n3", "--wait", *auth)
    assert code == 1 and out == "" and "40909" in err
    assert (
        "cannot decommission n3: 2 replica(s) have no node to go to (orders/0, orders/1): each of their "
        "partitions already has a replica on every other live node that is not being decommissioned; add a "
        "node or lower the replication factor"
    ) in err
    assert cluster.flags["decommissioning"] == set() and cluster.moves == {}
    answer = await guarded.client.put("/v1/nodes/n3/decommission", headers={"Authorization": "Bearer tok"})
    body = await answer.json()
    assert answer.status == 409 and body["error_code"] == 40909
    assert body["partitions"] == [
        {
            "topic": "orders",
            "partition": p,
            "reason": "no node to go to: every other live node (n1, n2) already holds a replica of it",
        }
        for p in (0, 1)
    ]
    code, out, _ = await run(capsys, "node", "status", "n3", *auth)
    assert code == 0 and "n3: not decommissioning" in out


async def test_a_decommission_whose_only_target_died_says_why_nothing_moves(
    harness: Harness, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    cluster = FakeCluster(["n1", "n2", "n3", "n4"])
    node = await harness.start(cluster, "n1", admin_token="tok")
    cluster.add_topic("orders", 1, replicas=[["n1", "n2", "n3"]])
    auth = ("--server", node.url)
    code, out, _ = await run(capsys, "node", "decommission", "n3", *auth)
    assert code == 0 and out.strip() == "n3: decommissioning, 1 replica(s) left; moving now: none"
    # the controller leader started the move to n4 (the fake drives none), then n4 died
    cluster.propose(MoveReplicas("orders", 0, ["n1", "n2", "n4"]))
    cluster.propose(StepMove("orders", 0, ["n1", "n2", "n3"], adding="n4"))
    cluster.states["n4"] = "dead"
    code, out, _ = await run(capsys, "node", "status", "n3", *auth)
    assert code == 0 and out.splitlines()[1:] == [
        "blocked: 1 partition(s) cannot move now:",
        "  orders/0: moving to n1,n2,n4, but n4 is not alive",
    ]
    code, out, err = await run(capsys, "node", "decommission", "n3", "--wait", "--timeout", "0.3", *auth)
    assert code == 1 and "orders/0: moving to n1,n2,n4, but n4 is not alive" in out
    assert "not done after 0.3 s" in err


def test_every_level_up_is_each_feature_at_the_highest_level_every_node_supports() -> None:
    upgraded = {
        "finalized": {"raftlog.version": 1, "transaction.version": 1},
        "nodes": {n: {"features": {"raftlog.version": 2, "transaction.version": 2}} for n in ("n1", "n2")},
    }
    assert every_level_up(upgraded) == {"raftlog.version": 2, "transaction.version": 2}
    # one node still on 0.1.0 (it names no features: level 1 of each): nothing to raise
    upgraded["nodes"]["n3"] = {"version": None, "features": None}
    assert every_level_up(upgraded) == {}
    upgraded["nodes"]["n3"] = {"features": {"raftlog.version": 2, "transaction.version": 1}}
    assert every_level_up(upgraded) == {"raftlog.version": 2}
    upgraded["finalized"] = {"raftlog.version": 2, "transaction.version": 1}
    assert every_level_up(upgraded) == {}


async def test_controller_describe_shows_how_long_ago_the_leader_heard_each_member(
    cluster: FakeCluster, guarded: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    auth = ("--server", guarded.url)
    code, out, _ = await run(capsys, "controller", "describe", *auth)
    assert code == 0 and "heard" not in out, "a leader below raftlog.version 2 keeps no times: none shown"
    now = int(time.time() * 1000)
    cluster.controller_times = {"n1": (now, now), "n2": (now - 60_000, None), "n3": (now, now - 30_000)}
    code, out, _ = await run(capsys, "controller", "describe", *auth)
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert code == 0 and "heard" not in rows["n1"], out  # the leader itself
    progress = r"\s*n\d  voter  match index \d+, heard (\d+\.\d) s ago, caught up (never|(\d+\.\d) s ago)"
    n2, n3 = re.fullmatch(progress, rows["n2"]), re.fullmatch(progress, rows["n3"])
    assert n2 is not None and float(n2[1]) >= 60 and n2[2] == "never", out
    assert n3 is not None and float(n3[1]) < 30 <= float(n3[3]), out
