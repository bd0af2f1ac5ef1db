"""The pure parts of the nemesis: schedules, partition shapes, targets, power-loss arithmetic, bit flips."""

from __future__ import annotations

import itertools
import random

import pytest

from jepsen import fault_shapes, nemesis
from jepsen.fault_shapes import (
    bridge,
    cut_pairs,
    durable_sizes,
    flip_bits,
    halves,
    isolate,
    majorities_ring,
    pick_targets,
    visible,
)
from jepsen.nemesis import (
    Window,
    parse_faults,
    schedule,
)

NODES3 = ["n1", "n2", "n3"]
NODES5 = ["n1", "n2", "n3", "n4", "n5"]


@pytest.mark.parametrize("seed", range(20))
def test_schedule_windows_are_ordered_disjoint_and_inside_the_limit(seed: int) -> None:
    faults = ("kill", "pause", "partition")
    windows = schedule(faults, 120.0, random.Random(seed), tail_s=3.0)
    assert windows, "two minutes always hold at least one window"
    for window in windows:
        assert 0 < window.start_s < window.end_s <= 117.0
        assert 1 <= len(window.faults) <= 2
        assert set(window.faults) <= set(faults)
        assert len(set(window.faults)) == len(window.faults)
    for before, after in itertools.pairwise(windows):
        assert before.end_s < after.start_s


def test_schedule_is_deterministic_per_seed_and_empty_without_faults() -> None:
    first = schedule(("kill", "pause"), 60.0, random.Random(7))
    assert first == schedule(("kill", "pause"), 60.0, random.Random(7))
    assert first != schedule(("kill", "pause"), 60.0, random.Random(8))
    assert schedule((), 60.0, random.Random(7)) == []
    assert all(isinstance(w, Window) for w in first)


def test_schedule_combines_faults_sometimes() -> None:
    windows = schedule(("kill", "pause", "clock"), 2000.0, random.Random(1), combine_probability=0.5)
    sizes = {len(w.faults) for w in windows}
    assert sizes == {1, 2}


def test_parse_faults_resolves_aliases_and_rejects_unknown_names() -> None:
    assert parse_faults("kill, pause,kill") == ("kill", "pause")
    assert parse_faults("all") == nemesis.ALL
    assert parse_faults("none") == ()
    assert parse_faults("power,skew") == ("power-loss", "clock")
    assert parse_faults("disk-full,kill") == parse_faults("disk,kill") == ("disk-full", "kill")
    assert "disk-full" in parse_faults("all")
    assert {"node-power-loss", "cluster-power-loss"}.isdisjoint(parse_faults("all"))  # named with --fs lazy
    assert parse_faults("node-power,cluster-power") == ("node-power-loss", "cluster-power-loss")
    with pytest.raises(ValueError, match="unknown nemesis"):
        parse_faults("kill,meteor")


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("nodes", [NODES3, NODES5])
def test_halves_split_everyone_into_two_groups_that_cannot_talk(seed: int, nodes: list[str]) -> None:
    grudge = halves(nodes, random.Random(seed))
    seen = visible(grudge, nodes)
    groups = {seen[n] for n in nodes}
    assert len(groups) == 2
    small, large = sorted(groups, key=len)
    assert small | large == set(nodes) and not small & large
    assert len(small) == len(nodes) // 2
    # exactly one side keeps a majority
    assert len(large) > len(nodes) // 2 >= len(small)


def test_isolate_cuts_one_node_from_all_others_both_ways() -> None:
    grudge = isolate("n2", NODES5)
    pairs = set(cut_pairs(grudge))
    assert pairs == {("n2", n) for n in NODES5 if n != "n2"} | {(n, "n2") for n in NODES5 if n != "n2"}
    assert visible(grudge, NODES5)["n2"] == {"n2"}
    assert visible(grudge, NODES5)["n1"] == set(NODES5) - {"n2"}


@pytest.mark.parametrize("seed", range(10))
def test_majorities_ring_every_node_sees_a_distinct_majority(seed: int) -> None:
    grudge = majorities_ring(NODES5, random.Random(seed))
    seen = visible(grudge, NODES5)
    for node in NODES5:
        assert node in seen[node]
        assert len(seen[node]) == 3, seen
    assert len({seen[n] for n in NODES5}) == 5
    # visibility is symmetric (links are cut both ways)
    assert all((a in seen[b]) == (b in seen[a]) for a in NODES5 for b in NODES5)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("nodes", [NODES3, NODES5])
def test_bridge_has_one_node_that_sees_everyone_and_two_sides_that_do_not_meet(
    seed: int, nodes: list[str]
) -> None:
    grudge = bridge(nodes, random.Random(seed))
    seen = visible(grudge, nodes)
    hubs = [n for n in nodes if seen[n] == set(nodes)]
    assert len(hubs) == 1
    others = [n for n in nodes if n != hubs[0]]
    sides = {seen[n] - {hubs[0]} for n in others}
    assert len(sides) == 2
    left, right = sides
    assert not left & right and left | right == set(others)


def test_majorities_ring_on_three_nodes_falls_back_to_a_bridge() -> None:
    assert majorities_ring(NODES3, random.Random(3)) == bridge(NODES3, random.Random(3))


@pytest.mark.parametrize("seed", range(10))
def test_pick_targets_sizes(seed: int) -> None:
    rng = random.Random(seed)
    assert len(pick_targets(NODES5, rng, mode="one")) == 1
    assert 1 <= len(pick_targets(NODES5, rng, mode="minority")) <= 2
    assert len(pick_targets(NODES5, rng, mode="majority")) == 3
    assert pick_targets(NODES5, rng, mode="all") == NODES5
    assert len(pick_targets(NODES3, rng, mode="minority")) == 1


def test_durable_sizes_follow_syncs_renames_and_restarts() -> None:
    trace = [
        "start\t-\t0",
        "base\t/d/a.log\t10",
        "sync\t/d/a.log\t40",
        "sync\t/d/tmp\t5",
        "rename\t/d/tmp\t/d/snapshot",
        "rename\t/d/unsynced\t/d/other",
        "sync\t/d/b.log\t7",
    ]
    assert durable_sizes(trace) == {"/d/a.log": 40, "/d/snapshot": 5, "/d/b.log": 7}
    # a restart's baseline replaces what came before
    assert durable_sizes([*trace, "start\t-\t0", "base\t/d/a.log\t41"]) == {"/d/a.log": 41}


def test_discard_unsynced_cuts_files_back_to_their_last_fsync(tmp_path: object) -> None:
    import os
    import pathlib

    root = pathlib.Path(str(tmp_path))
    data = root / "data"
    (data / "logs").mkdir(parents=True)
    synced = data / "logs" / "0.log"
    synced.write_bytes(b"x" * 100)
    fresh = data / "logs" / "1.log"
    fresh.write_bytes(b"y" * 30)
    trace = root / "trace"
    fault_shapes.write_baseline(str(trace), str(data))
    with open(synced, "ab") as f:
        f.write(b"z" * 50)  # written after the baseline, never fsynced
    with open(trace, "a", encoding="utf-8") as f:
        f.write(f"sync\t{os.path.realpath(synced)}\t120\n")
    new = data / "logs" / "2.log"
    new.write_bytes(b"w" * 9)  # created and never fsynced
    cut = fault_shapes.discard_unsynced(str(trace), str(data))
    assert synced.stat().st_size == 120
    assert fresh.stat().st_size == 30
    assert new.stat().st_size == 0
    assert {c["file"] for c in cut} == {"logs/0.log", "logs/2.log"}
    (data / "ballast").write_bytes(b"b" * 10)  # the disk-full fault's, fsynced by the harness
    fault_shapes.discard_unsynced(str(trace), str(data))
    assert (data / "ballast").stat().st_size == 10


def test_flip_bits_changes_exactly_the_reported_bits() -> None:
    data = bytearray(64)
    flipped = flip_bits(data, random.Random(5), 4)
    expected = bytearray(64)
    for position, bit in flipped:
        expected[position] ^= 1 << bit
    assert data == expected
    assert any(data)


@pytest.mark.parametrize("seed", range(30))
def test_corruption_only_ever_reaches_a_minority(seed: int) -> None:
    rng = random.Random(seed)
    corrupted: set[str] = set()
    for _ in range(20):
        candidates = [n for n in NODES5 if rng.random() < 0.7]
        chosen = fault_shapes.corrupt_targets(candidates, corrupted, 2, rng)
        assert set(chosen) <= set(candidates)
        corrupted |= set(chosen)
        assert len(corrupted) <= 2
    assert corrupted, "some node was damaged"
