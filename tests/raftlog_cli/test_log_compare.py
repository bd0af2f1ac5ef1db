"""``raftlog log compare``: a partition's replicas given as directories, or every partition of nodes' data
directories (a ``raftlog dev`` folder): what it prints, as text and as JSON, and its exit status (0
identical, 1 a partition differs, 2 a usage error)."""

from __future__ import annotations

import json
import pathlib

import pytest

from raftlog.storage import Log, LogConfig, ProducerRecord
from raftlog.storage.dirlock import DirectoryLock
from raftlog_cli.cli import main

CLOCK_MS = 1_700_000_000_000


def _records(i: int) -> list[ProducerRecord]:
    return [ProducerRecord(f"value-{i}-{j}".encode(), f"k{j}".encode()) for j in range(1 + i % 3)]


def _replica(directory: pathlib.Path, batches: int, lose: int | None = None) -> str:
    """A log of ``batches`` batches, written as a node applies them; ``lose``: a batch left out (offsets
    after it shift, as on a replica that applied an entry as a no-op)."""
    config = LogConfig(segment_bytes=1024, index_interval_bytes=64, flush_mode="group")
    log = Log.open(str(directory), config, clock=lambda: CLOCK_MS)
    for i in range(batches):
        if i != lose:
            log.append(_records(i), term=2)
    log.close()
    return str(directory)


def _offset(batches: int) -> int:
    return sum(len(_records(i)) for i in range(batches))


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> pathlib.Path:
    """A raftlog dev folder of three nodes: ``t.0`` alike on all (n3 behind), ``t.1`` with a batch lost on
    n2, ``t.2`` held by n1 only."""
    root = tmp_path / "dev"
    for node in ("n1", "n2", "n3"):
        _replica(root / node / "logs" / "t.0", 12 if node == "n3" else 20)
        _replica(root / node / "logs" / "t.1", 20, lose=6 if node == "n2" else None)
    _replica(root / "n1" / "logs" / "t.2", 3)
    return root


def test_identical_directories_exit_zero_saying_what_was_compared(tmp_path, capsys) -> None:
    a, b = _replica(tmp_path / "a" / "t.0", 20), _replica(tmp_path / "b" / "t.0", 14)
    assert main(["log", "compare", a, b]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"partition t.0: identical, 14 batches compared over offsets [0, {_offset(14)})"
    assert out[1] == f"  {a}  [0, {_offset(20)})"
    assert out[2] == f"  {b}  [0, {_offset(14)})  behind by {_offset(20) - _offset(14)} offsets"
    assert out[-1] == "1 partition compared: 1 identical, 0 differ; 14 batches compared"


def test_a_dev_folder_compares_each_partition_held_twice_and_exits_one_on_a_difference(
    cluster, capsys
) -> None:
    assert main(["log", "compare", "--nodes", str(cluster)]) == 1
    out = capsys.readouterr().out
    paragraphs = out.split("\n\n")
    assert (
        paragraphs[0].splitlines()[0]
        == f"partition t.0: identical, 20 batches compared over offsets [0, {_offset(20)})"
    )
    assert f"  n3  [0, {_offset(12)})  behind by {_offset(20) - _offset(12)} offsets" in paragraphs[0]
    first = paragraphs[1].splitlines()[0]
    assert first == (
        f"partition t.1: DIFFERS at offset {_offset(6)} (different bytes): length, CRC, records count, last "
        f"offset delta differ; 6 batches identical over [0, {_offset(6)})"
    )
    assert f"note: offsets diverge from {_offset(6)}" in paragraphs[1]
    assert f"batch [{_offset(6)}, {_offset(7)})" in paragraphs[1]  # n1's and n3's
    assert (
        f"batch [{_offset(6)}, {_offset(6) + len(_records(7))})" in paragraphs[1]
    )  # n2's: the next batch's records
    assert out.splitlines()[-2:] == [
        "2 partitions compared: 1 identical, 1 differs; 26 batches compared",
        "1 held by one node only, not compared: t.2 (n1)",
    ]


def test_json_prints_an_object_per_partition(cluster, capsys) -> None:
    assert main(["log", "compare", "--nodes", "--json", str(cluster / "n1"), str(cluster / "n2")]) == 1
    out, err = capsys.readouterr()
    rows = {row["partition"]: row for row in map(json.loads, out.splitlines())}
    assert rows["t.0"]["verdict"] == "identical" and rows["t.0"]["compared"] == {
        "from": 0,
        "to": _offset(20),
        "batches": 20,
    }
    difference = rows["t.1"]["difference"]
    assert rows["t.1"]["verdict"] == "differs" and difference["offset"] == _offset(6)
    assert difference["kind"] == "different bytes" and "records count" in difference["fields"]
    assert difference["batches"]["n1"]["records_count"] == len(_records(6))
    assert difference["batches"]["n2"]["records_count"] == len(_records(7))
    assert [(r["name"], r["behind_by"]) for r in rows["t.1"]["replicas"]] == [
        ("n1", 0),
        ("n2", len(_records(6))),
    ]
    assert rows["t.2"] == {"partition": "t.2", "verdict": "not compared", "replicas": ["n1"]}
    assert err.splitlines()[0] == "2 partitions compared: 1 identical, 1 differs; 26 batches compared"


def test_a_running_node_is_named_and_read_without_its_lock(cluster, capsys) -> None:
    lock = DirectoryLock.acquire(str(cluster / "n1"), "node n1")
    try:
        code = main(
            ["log", "compare", str(cluster / "n1" / "logs" / "t.0"), str(cluster / "n2" / "logs" / "t.0")]
        )
    finally:
        lock.close()
    assert code == 0
    out = capsys.readouterr().out
    holder = f"node n1 (pid {lock.holder.pid}, since {lock.holder.started_at})"
    assert f"its lock file names {holder}: the node may be running" in out


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["one"], "give two partition log directories or more"),
        (["--nodes", "nowhere"], "nowhere is no node data directory"),
        (["--nodes", "dev/n1"], "nothing to compare: no partition of 1 node (n1) is held by more than one"),
        (["dev/n1/logs/t.0", "dev/n1/logs/missing"], "dev/n1/logs/missing: No such file or directory"),
        (["dev/n1/logs/t.0", "dev/n1/logs/t.0"], "a directory is given twice"),
    ],
)
def test_usage_errors_exit_two_naming_what_is_wrong(cluster, capsys, monkeypatch, arguments, message) -> None:
    monkeypatch.chdir(cluster.parent)
    assert main(["log", "compare", *arguments]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("raftlog log compare: ") and message in err
