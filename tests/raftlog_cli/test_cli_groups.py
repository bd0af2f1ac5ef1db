"""``raftlog topic delete``, ``group list|describe|reset`` and ``partition describe`` against the API over
fake nodes."""

from __future__ import annotations

import json
from typing import Any

from fake_node import FakeCluster
from harness import Node
from test_cli import run


async def test_groups_listed_described_and_reset(
    cluster: FakeCluster, n1: Node, n2: Node, capsys: Any
) -> None:
    cluster.add_topic("t", 2, [["n1"], ["n2"]])
    for p, values in ((0, ["a", "b", "c"]), (1, ["d"])):
        answer = await n1.client.post(
            f"/topics/t/partitions/{p}", json={"records": [{"value": v} for v in values]}
        )
        assert answer.status == 200
    server = ("--server", n1.url)
    code, _, _ = await run(
        capsys, "consume", "t", "--group", "g", "--from-beginning", "--max", "2", "--follow", *server
    )
    assert code == 0  # a member read two records and committed them, then left
    code, out, _ = await run(capsys, "group", "list", *server)
    # empty: state, no door, no member
    assert code == 0 and any(
        line.split()[:5] == ["g", "classic", "Empty", "-", "0"] for line in out.splitlines()
    ), out
    code, out, _ = await run(capsys, "group", "describe", "g", "--json", *server)
    described = json.loads(out)
    assert code == 0 and described["members"] == []
    rows = {r["partition"]: (r["committed_offset"], r["end_offset"]) for r in described["unassigned"]}
    assert set(rows) == {0, 1} and sum(c or 0 for c, _ in rows.values()) == 2, rows  # its commits stay
    code, out, _ = await run(capsys, "group", "describe", "g", *server)
    assert (
        code == 0
        and "0 member(s)" in out
        and [line.split()[-1] for line in out.splitlines()[2:]] == ["-", "-"]
    )

    await n1.client.post("/consumers/g", json={"name": "watcher"})  # a member that stays
    code, out, _ = await run(capsys, "group", "list", *server)
    assert code == 0 and any(
        line.split()[:5] == ["g", "classic", "Stable", "http", "1"] for line in out.splitlines()
    ), out
    code, out, _ = await run(capsys, "group", "describe", "g", "--json", *server)
    described = json.loads(out)
    assert code == 0 and described["group"] == "g" and described["members"][0]["client_host"] == "127.0.0.1"

    code, _, err = await run(capsys, "group", "reset", "g", "--topic", "t", "--to-earliest", *server)
    assert code != 0 and "has 1 live member(s)" in err  # refused while a member runs
    code, _, err = await run(capsys, "group", "delete", "g", *server)
    assert code != 0 and "40916" in err  # so is deleting it
    await n1.client.delete("/consumers/g/instances/watcher")
    code, out, _ = await run(capsys, "group", "reset", "g", "--topic", "t", "--to-latest", *server)
    assert code == 0 and sorted(out.splitlines()) == ["t/0 -> 3", "t/1 -> 1"]
    code, out, _ = await run(
        capsys, "group", "reset", "g", "--topic", "t", "--partition", "0", "--to-offset", "1", *server
    )
    assert code == 0 and out.strip() == "t/0 -> 1"  # backwards too: a reset
    committed = await (await n1.client.get("/consumers/g/offsets", params={"topic": "t"})).json()
    assert sorted((o["partition"], o["offset"]) for o in committed["offsets"]) == [(0, 1), (1, 1)]

    code, out, _ = await run(capsys, "group", "delete", "g", *server)
    assert (code, out) == (0, "deleted group g and its offsets of 2 partition(s)\n")
    committed = await (await n1.client.get("/consumers/g/offsets", params={"topic": "t"})).json()
    assert committed["offsets"] == []  # deleted with it
    code, out, _ = await run(capsys, "group", "list", *server)
    assert code == 0 and not any(line.split()[:1] == ["g"] for line in out.splitlines()), out
    code, _, err = await run(capsys, "group", "delete", "g", *server)
    assert code != 0 and "40404" in err


async def test_a_forced_reset_says_what_it_does(
    cluster: FakeCluster, n1: Node, n2: Node, capsys: Any
) -> None:
    cluster.add_topic("t", 1, [["n1"]])
    server = ("--server", n1.url)
    assert (await n1.client.post("/consumers/g", json={"name": "watcher"})).status == 200
    code, out, err = await run(
        capsys, "group", "reset", "g", "--topic", "t", "--to-offset", "0", "--force", *server
    )
    assert code == 0 and out.strip() == "t/0 -> 0", err
    assert "1 live member(s) (HTTP consumer instances); resetting anyway" in err
    plain = await n1.client.post(
        "/consumers/g/offsets", json={"offsets": [{"topic": "t", "partition": 0, "offset": 0}], "reset": True}
    )
    assert plain.status == 409 and (await plain.json())["members"] == 1  # without force the door refuses


async def test_topic_delete_and_partition_describe(cluster: FakeCluster, n1: Node, capsys: Any) -> None:
    cluster.add_topic("t", 1)
    server = ("--server", n1.url)
    code, out, _ = await run(capsys, "partition", "describe", "t", "0", *server)
    assert code == 0 and out.startswith("t/0: leader n1") and "NODE" in out, out
    code, out, _ = await run(capsys, "topic", "delete", "t", *server)
    assert (code, out) == (0, "deleted topic t\n")
    assert "t" not in cluster.topics
    code, _, err = await run(capsys, "topic", "delete", "t", *server)
    assert code == 1 and "40401" in err
