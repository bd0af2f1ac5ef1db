"""The ``raftlog`` topic/produce/consume commands against the API over a fake node."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import re
from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Node
from waiting import wait_until

from raftlog_cli.cli import main


async def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def test_topic_create_list_describe(cluster: FakeCluster, n1: Node, capsys: Any) -> None:
    code, out, _ = await run(
        capsys, "topic", "create", "orders", "--partitions", "3", "--replication-factor", "1",
        "--config", "retention.ms=60000", "--server", n1.url,
    )  # fmt: skip
    assert (code, out) == (
        0,
        "created topic orders: 3 partition(s), replication factor 1, configs: retention.ms=60000\n",
    )
    assert cluster.topics["orders"].configs == {"retention.ms": "60000"}
    code, out, _ = await run(capsys, "topic", "list", "--server", n1.url)
    assert (code, out) == (0, "orders\n")
    code, out, _ = await run(capsys, "topic", "list", "--json", "--server", n1.url)
    assert (code, json.loads(out)) == (0, ["orders"])
    code, out, _ = await run(capsys, "topic", "describe", "orders", "--server", n1.url)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("orders: 3 partition(s), replication factor 1"), out
    assert [line.split()[0] for line in lines[2:]] == ["0", "1", "2"] and "LEADER" in lines[1]
    code, out, _ = await run(capsys, "topic", "describe", "orders", "--json", "--server", n1.url)
    assert code == 0 and [p["partition"] for p in json.loads(out)["partitions"]] == [0, 1, 2]
    code, _, err = await run(capsys, "topic", "create", "orders", "--server", n1.url)
    assert code == 1 and "40901" in err


async def test_topic_add_partitions_grows_a_topic_and_refuses_a_lower_count(
    cluster: FakeCluster, n1: Node, capsys: Any
) -> None:
    cluster.add_topic("grow", 2, [["n1"], ["n1"]])
    code, out, _ = await run(
        capsys, "topic", "add-partitions", "grow", "--partitions", "4", "--validate-only", "--server", n1.url
    )
    # the new partitions placed as the controller places them: on the nodes holding the fewest replicas
    assert (code, out) == (0, "topic grow would have 4 partition(s): 0:n1 1:n1 2:n2 3:n2\n")
    assert cluster.topics["grow"].partitions == 2, "validate only: nothing changed"
    grow = ("topic", "add-partitions", "grow", "--server", n1.url)
    code, out, _ = await run(capsys, *grow, "--partitions", "3")
    assert (code, out) == (0, "topic grow now has 3 partition(s): 0:n1 1:n1 2:n2\n")
    assert cluster.topics["grow"].partitions == 3
    code, _, err = await run(capsys, *grow, "--partitions", "2")
    assert code == 1 and "40001" in err and "currently has 3 partition(s); 2 would not be an increase" in err
    code, _, err = await run(
        capsys, "topic", "add-partitions", "nope", "--server", n1.url, "--partitions", "2"
    )
    assert code == 1 and "40401" in err


async def test_produce_from_stdin_and_values_then_consume(
    cluster: FakeCluster, n1: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.add_topic("t", 2)
    monkeypatch.setattr("sys.stdin", io.StringIO("first\nsecond\n"))
    code, out, _ = await run(capsys, "produce", "t", "--partition", "1", "--json", "--server", n1.url)
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"partition": 1, "offset": 0},
        {"partition": 1, "offset": 1},
    ]
    code, out, _ = await run(capsys, "produce", "t", "--value", "third", "--key", "k", "--server", n1.url)
    assert code == 0 and re.fullmatch(r"t/[01] offset \d+\n", out), out
    await run(capsys, "produce", "t", "--partition", "1", "--value", "third", "--server", n1.url)

    code, out, _ = await run(
        capsys, "consume", "t", "--partition", "1", "--from-beginning", "--server", n1.url
    )
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["offset"], r["value"]) for r in rows][:2] == [(0, "first"), (1, "second")]
    code, out, _ = await run(
        capsys, "consume", "t", "--partition", "1", "--offset", "1", "--max", "1", "--server", n1.url
    )
    assert [json.loads(line)["value"] for line in out.splitlines()] == ["second"]


async def test_consume_follow_waits_for_new_records(cluster: FakeCluster, n1: Node, capsys: Any) -> None:
    cluster.add_topic("t", 1)
    consumer = asyncio.create_task(
        run(capsys, "consume", "t", "--partition", "0", "--offset", "0", "--follow", "--max", "2",
            "--server", n1.url)
    )  # fmt: skip

    async def fetching() -> bool:
        return n1.data.calls["fetch"] >= 1

    await wait_until(fetching, "the consumer asked for records")
    assert not consumer.done()
    await n1.client.post("/topics/t", json={"records": [{"value": "a"}, {"value": "b"}]})
    code, out, _ = await asyncio.wait_for(consumer, 10)
    assert code == 0
    assert [json.loads(line)["value"] for line in out.splitlines()] == ['"a"', '"b"']


async def test_server_from_environment_and_errors(
    cluster: FakeCluster, n1: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_SERVER", n1.url)
    code, out, _ = await run(capsys, "topic", "list")
    assert (code, out) == (0, "")
    code, _, err = await run(capsys, "consume", "missing", "--partition", "0", "--offset", "0")
    assert code == 1 and "40401" in err
    code, _, err = await run(capsys, "topic", "list", "--server", "http://127.0.0.1:9", "--retries", "1")
    assert code == 2 and "raftlog:" in err


async def test_consume_reads_every_partition_from_the_beginning_unless_told(
    cluster: FakeCluster, n1: Node, capsys: Any
) -> None:
    cluster.add_topic("t", 3)
    for p in range(3):
        body = {"records": [{"key": f"k{p}", "value": f"v{p}-{i}"} for i in range(3)]}
        assert (await n1.client.post(f"/topics/t/partitions/{p}", json=body)).status == 200
    server = ("--server", n1.url)
    code, out, _ = await run(capsys, "consume", "t", *server)
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and sorted((r["partition"], r["offset"]) for r in rows) == [
        (p, o) for p in range(3) for o in range(3)
    ]
    code, out, _ = await run(capsys, "consume", "t", "--offset", "-1", "--format", "%p:%o:%k=%s\\n", *server)
    assert code == 0 and sorted(out.splitlines()) == [
        f'{p}:2:"k{p}"="v{p}-2"' for p in range(3)
    ]  # JSON records: keys and values are JSON text
    code, out, _ = await run(capsys, "consume", "t", "--partition", "1", "--offset", "end", *server)
    assert (code, out) == (0, "")
    code, out, _ = await run(capsys, "consume", "t", "--max", "4", "--format", "%s\\n", *server)
    assert code == 0 and len(out.splitlines()) == 4
    with pytest.raises(SystemExit):
        main(["consume", "t", "--format", "%q"])  # not a token: refused before anything runs
    with pytest.raises(SystemExit, match=r"--json\).*or --format, not both"):
        main(["consume", "t", "--json", "--format", "%s"])


async def test_produce_sends_stdin_lines_as_they_come_with_keys_split_off(
    cluster: FakeCluster, n1: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.add_topic("t", 1)
    read_end, write_end = os.pipe()
    monkeypatch.setattr("sys.stdin", os.fdopen(read_end, "r"))
    producer = asyncio.create_task(run(capsys, "produce", "t", "-K", ":", "--server", n1.url))
    os.write(write_end, b"user-1:logged in\n")

    async def stored() -> list[dict[str, Any]]:
        fetched = await n1.client.get("/topics/t/partitions/0/records", params={"offset": "0"})
        return list(await fetched.json())

    deadline = asyncio.get_running_loop().time() + 10
    while not await stored():  # sent while stdin is still open, as with tail -f
        assert asyncio.get_running_loop().time() < deadline, "the first line was not sent before EOF"
        await asyncio.sleep(0.05)
    assert not producer.done()
    os.write(write_end, b"no key here\n")
    os.close(write_end)
    code, out, _ = await asyncio.wait_for(producer, 10)
    assert (code, out) == (0, "t/0 offset 0\nt/0 offset 1\n")
    decoded = [
        (r["key"] and base64.b64decode(r["key"]).decode(), base64.b64decode(r["value"]).decode())
        for r in await stored()
    ]
    assert decoded == [
        ("user-1", "logged in"),
        (None, "no key here"),
    ]


async def test_an_unreachable_server_fails_at_once_saying_what_to_check(capsys: Any) -> None:
    code, _, err = await run(capsys, "topic", "list", "--server", "http://127.0.0.1:9")
    assert code == 2 and "no usable answer in 2 attempts" in err and "raftlog dev status" in err


def test_version_and_ctrl_c(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as shown:
        main(["--version"])
    assert shown.value.code == 0 and capsys.readouterr().out.startswith("raftlog ")

    def interrupted_with_client(args: Any, work: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr("raftlog_cli.cli._with_client", interrupted_with_client)
    assert main(["topic", "list"]) == 130 and capsys.readouterr().err == ""


async def test_consume_as_a_group_member_commits_what_it_printed(
    cluster: FakeCluster, n1: Node, n2: Node, capsys: Any
) -> None:
    cluster.add_topic("t", 2, [["n1"], ["n2"]])
    for p, values in ((0, ["a", "b"]), (1, ["c"])):
        answer = await n1.client.post(
            f"/topics/t/partitions/{p}", json={"records": [{"value": v} for v in values]}
        )
        assert answer.status == 200
    code, out, _ = await run(capsys, "consume", "t", "--group", "g", "--from-beginning", "--server", n2.url)
    assert code == 0
    assert sorted(json.loads(line)["value"] for line in out.splitlines()) == ['"a"', '"b"', '"c"']
    committed = await (await n1.client.get("/consumers/g/offsets", params={"topic": "t"})).json()
    assert sorted((o["partition"], o["offset"]) for o in committed["offsets"]) == [(0, 2), (1, 1)]
    code, out, _ = await run(capsys, "consume", "t", "--group", "g", "--server", n1.url)
    assert (code, out) == (0, "")  # the group goes on from its committed offsets


async def test_tombstones_headers_timestamps_and_offsets_by_time(
    cluster: FakeCluster, n1: Node, capsys: Any
) -> None:
    cluster.add_topic("t", 1)
    server = ("--server", n1.url)
    for argv in (
        ("--value", "a", "--timestamp", "100", "--header", "h=1", "--header", "empty"),
        ("--value", "b", "--timestamp", "300"),
        ("--tombstone", "--key", "gone", "--timestamp", "200"),
    ):
        code, _, err = await run(capsys, "produce", "t", "--partition", "0", *argv, *server)
        assert code == 0, err
    code, out, _ = await run(capsys, "consume", "t", "--partition", "0", "--from-beginning", *server)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["value"], r["timestamp"], r["timestamp_type"]) for r in rows] == [
        (None, "a", 100, "CreateTime"),
        (None, "b", 300, "CreateTime"),
        ("gone", None, 200, "CreateTime"),
    ]
    assert rows[0]["headers"] == [{"key": "h", "value": "1"}, {"key": "empty", "value": None}]

    at = ("offsets", "t", "--partition", "0", "--timestamp")
    code, out, _ = await run(capsys, *at, "150", "--json", *server)
    assert json.loads(out) == {
        "topic": "t",
        "partition": 0,
        "timestamp": 150,
        "offset": 1,
        "record_timestamp": 300,
    }
    code, out, _ = await run(capsys, *at, "150", *server)
    assert out == "t/0: offset 1 is the first record at or after 150 ms (its timestamp 300)\n"
    code, out, _ = await run(capsys, *at, "301", "--json", *server)
    assert json.loads(out)["offset"] is None and json.loads(out)["record_timestamp"] is None
    code, out, _ = await run(capsys, *at, "301", *server)
    assert out == "t/0: no record at or after 301 ms\n"
    code, out, _ = await run(capsys, "offsets", "t", "--partition", "0", "--json", *server)
    assert json.loads(out) == {"topic": "t", "partition": 0, "beginning_offset": 0, "end_offset": 3}
    code, out, _ = await run(capsys, "offsets", "t", "--partition", "0", *server)
    assert out == "t/0: log start offset 0, next offset 3\n"
    code, out, _ = await run(capsys, "consume", "t", "--partition", "0", "--timestamp", "250", *server)
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [1, 2]
    code, out, _ = await run(capsys, "consume", "t", "--partition", "0", "--timestamp", "999", *server)
    assert code == 0 and out == ""


async def test_delete_records_moves_the_log_start_and_refuses_past_the_end(
    cluster: FakeCluster, n1: Node, capsys: Any
) -> None:
    cluster.add_topic("t", 1)
    server = ("--server", n1.url)
    answer = await n1.client.post(
        "/topics/t/partitions/0", json={"records": [{"value": v} for v in range(5)]}
    )
    assert answer.status == 200
    code, out, _ = await run(capsys, "delete-records", "t", "--partition", "0", "--before", "3", *server)
    assert (code, out) == (0, "t/0: log start offset 3\n")
    code, out, _ = await run(capsys, "offsets", "t", "--partition", "0", "--json", *server)
    assert json.loads(out) == {"topic": "t", "partition": 0, "beginning_offset": 3, "end_offset": 5}
    code, out, _ = await run(capsys, "consume", "t", "--partition", "0", "--from-beginning", *server)
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [3, 4]
    code, _, err = await run(capsys, "delete-records", "t", "--partition", "0", "--before", "9", *server)
    assert code != 0 and "out of range" in err
    at_end = ("delete-records", "t", "--partition", "0", "--before", "-1", "--json", *server)
    code, out, _ = await run(capsys, *at_end)
    assert json.loads(out) == {"topic": "t", "partition": 0, "beginning_offset": 5}


def test_a_tombstone_needs_a_key_and_no_value() -> None:
    for argv in (["--tombstone"], ["--tombstone", "--key", "k", "--value", "v"]):
        with pytest.raises(SystemExit, match="--tombstone produces one null value"):
            main(["produce", "t", *argv])
