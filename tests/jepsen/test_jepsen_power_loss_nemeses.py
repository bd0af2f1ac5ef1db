"""The plumbing of the lazy file system's power losses, against a stand-in cluster that records what was
done to which node: one node is killed before its file system is cleared, a whole-cluster one freezes and
kills every running node before any file system is cleared (those already down cleared too), stopping
either restarts what is down, and without lazy file systems both are refused, never dropped."""

from __future__ import annotations

import argparse
import json
import pathlib
import random
from dataclasses import dataclass, field

import pytest

from jepsen import nemesis, runner
from jepsen.control import ControlError
from jepsen.recorder import Recorder


@dataclass
class Node:
    node_id: str


@dataclass
class StandInCluster:
    """What the nemesis asks of ``control.Cluster`` for these faults, recording every action in order."""

    directory: pathlib.Path
    nodes: list[Node] = field(default_factory=lambda: [Node("n1"), Node("n2"), Node("n3")])
    up: set[str] = field(default_factory=lambda: {"n1", "n2", "n3"})
    lazy_mounts: dict[str, object] = field(default_factory=lambda: {"n1": 1, "n2": 2, "n3": 3})
    small_disks: dict[str, object] = field(default_factory=dict)
    actions: list[tuple[str, str]] = field(default_factory=list)

    def running(self, node_id: str) -> bool:
        return node_id in self.up

    def pause(self, node_id: str) -> None:
        self.actions.append(("pause", node_id))

    def kill(self, node_id: str) -> None:
        self.actions.append(("kill", node_id))
        self.up.discard(node_id)

    def clear_cache(self, node_id: str) -> dict[str, int]:
        if node_id in self.up:
            raise ControlError(f"{node_id} is running")
        self.actions.append(("clear", node_id))
        return {"files": 1, "bytes": 10}

    def start(self, node_id: str) -> int:
        self.actions.append(("start", node_id))
        self.up.add(node_id)
        return 4242

    def trace_file(self, node_id: str) -> str:
        return str(self.directory / f"{node_id}.fsync")

    def data_dir(self, node_id: str) -> str:
        path = self.directory / "data" / node_id
        path.mkdir(parents=True, exist_ok=True)
        return str(path)


def chaos_of(cluster: StandInCluster, tmp_path: pathlib.Path, notes: list[str]) -> nemesis.Nemesis:
    recorder = Recorder(str(tmp_path / "history.jsonl"))
    return nemesis.Nemesis(cluster, None, recorder, random.Random(5), {"t0": 1}, notes)  # type: ignore[arg-type]


def events(tmp_path: pathlib.Path) -> list[dict[str, object]]:
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def test_node_power_loss_kills_one_node_then_clears_its_file_system_and_restarts_it(
    tmp_path: pathlib.Path,
) -> None:
    cluster = StandInCluster(tmp_path)
    chaos = chaos_of(cluster, tmp_path, [])
    await chaos.start("node-power-loss")
    [active] = chaos.active
    [node] = active.targets
    assert cluster.actions == [("kill", node), ("clear", node)]
    await chaos.heal()
    assert cluster.actions[-1] == ("start", node) and cluster.up == {"n1", "n2", "n3"}
    start, stop = events(tmp_path)
    assert start["f"] == "start" and start["fault"] == "node-power-loss"
    assert start["value"] == {"nodes": [node], "dropped": {node: {"files": 1, "bytes": 10}}}
    assert stop["f"] == "stop" and stop["value"]["restarted"] == {node: {"pid": 4242}}  # type: ignore[index]


async def test_cluster_power_loss_freezes_and_kills_everyone_before_clearing_every_file_system(
    tmp_path: pathlib.Path,
) -> None:
    cluster = StandInCluster(tmp_path)
    cluster.up.discard("n2")  # down already (another fault): its unsynced writes go too
    chaos = chaos_of(cluster, tmp_path, [])
    await chaos.start("cluster-power-loss")
    kinds = [kind for kind, _ in cluster.actions]
    assert kinds == ["pause", "pause", "kill", "kill", "clear", "clear", "clear"]
    assert {n for kind, n in cluster.actions if kind == "kill"} == {"n1", "n3"}
    assert [n for kind, n in cluster.actions if kind == "clear"] == ["n1", "n2", "n3"]
    await chaos.start("cluster-power-loss")  # not twice at once
    assert len(chaos.active) == 1
    await chaos.heal()
    assert cluster.up == {"n1", "n2", "n3"}
    start = events(tmp_path)[0]
    assert start["value"]["were_running"] == ["n1", "n3"]  # type: ignore[index]


async def test_without_lazy_file_systems_the_power_losses_are_refused_never_dropped(
    tmp_path: pathlib.Path,
) -> None:
    """``jepsen.fault_tools`` refuses such a run before it starts; the nemesis itself never drops one."""
    cluster = StandInCluster(tmp_path, lazy_mounts={})
    chaos = chaos_of(cluster, tmp_path, [])
    for fault in ("node-power-loss", "cluster-power-loss"):
        assert not chaos.usable(fault)
        with pytest.raises(ControlError, match=f"{fault}: unavailable without lazy file systems"):
            await chaos.start(fault)
    assert cluster.actions == [] and chaos.active == []


async def test_a_clear_that_fails_is_noted_and_the_node_is_still_restarted(tmp_path: pathlib.Path) -> None:
    cluster = StandInCluster(tmp_path)

    def refuse(node_id: str) -> dict[str, int]:
        raise ControlError("control socket gone")

    cluster.clear_cache = refuse  # type: ignore[method-assign]
    notes: list[str] = []
    chaos = chaos_of(cluster, tmp_path, notes)
    await chaos.start("node-power-loss")
    assert any("clear-cache failed" in note for note in notes)
    await chaos.heal()
    assert cluster.up == {"n1", "n2", "n3"}


@pytest.mark.parametrize(
    ("nemeses", "fs"),
    [
        ("node-power-loss,kill", "lazy"),
        ("cluster-power-loss", "lazy"),
        ("kill,pause", "plain"),
        ("all", "plain"),  # all has disk-full and leaves the lazy power losses out
        ("node-power-loss,disk-full", "plain"),
    ],
)
def test_the_file_system_follows_the_faults_unless_named(nemeses: str, fs: str) -> None:
    parser = argparse.ArgumentParser()
    runner.add_run_arguments(parser)
    assert runner.config_from_args(parser.parse_args(["--nemesis", nemeses])).fs == fs
    named = parser.parse_args(["--nemesis", nemeses, "--fs", "lazy"])
    assert runner.config_from_args(named).fs == "lazy"
    with pytest.raises(SystemExit):
        parser.parse_args(["--fs", "tmpfs"])


def test_the_stand_in_matches_the_clusters_names() -> None:
    from jepsen.control import Cluster

    for name in ("running", "pause", "kill", "clear_cache", "start", "trace_file", "data_dir"):
        assert callable(getattr(Cluster, name)), name
    assert {"lazy_mounts", "small_disks", "nodes"} <= set(Cluster.__dataclass_fields__)
