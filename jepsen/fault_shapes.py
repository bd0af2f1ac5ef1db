"""What a fault does, pure, for the nemesis (``jepsen.nemesis``): the shapes of a network partition (a
grudge: each node and the nodes it cannot reach), and power loss and corruption of a node's files (what a
write trace says was synced, the bits flipped)."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jepsen import disks

Grudge = dict[str, frozenset[str]]


# -- partition shapes (pure) ----------------------------------------------------------------------------


def grudge_of_components(components: Iterable[Iterable[str]]) -> Grudge:
    """Nodes in different components cannot talk."""
    groups = [frozenset(c) for c in components]
    everyone = frozenset().union(*groups)
    grudge: Grudge = {}
    for group in groups:
        for node in group:
            grudge[node] = everyone - group
    return grudge


def halves(nodes: Sequence[str], rng: random.Random) -> Grudge:
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    middle = len(shuffled) // 2
    return grudge_of_components([shuffled[:middle], shuffled[middle:]])


def isolate(node: str, nodes: Sequence[str]) -> Grudge:
    return grudge_of_components([[node], [n for n in nodes if n != node]])


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Nodes on a random ring, each hearing only its nearest neighbours: every node sees a majority
    (itself included), no two see the same one. Needs 5+ nodes; with fewer it is a :func:`bridge`."""
    if len(nodes) < 5:
        return bridge(nodes, rng)
    ring = list(nodes)
    rng.shuffle(ring)
    count = len(ring)
    reach = math.ceil((count // 2) / 2)
    grudge: Grudge = {}
    for i, node in enumerate(ring):
        visible = {ring[(i + d) % count] for d in range(-reach, reach + 1)}
        grudge[node] = frozenset(ring) - visible
    return grudge


def bridge(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Two halves that cannot talk, plus one node that talks to both."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    middle = len(shuffled) // 2
    left, hub, right = shuffled[:middle], shuffled[middle], shuffled[middle + 1 :]
    grudge: Grudge = {hub: frozenset()}
    for node in left:
        grudge[node] = frozenset(right)
    for node in right:
        grudge[node] = frozenset(left)
    return grudge


def cut_pairs(grudge: Mapping[str, frozenset[str]]) -> list[tuple[str, str]]:
    """Directed (from, to) pairs to drop; symmetric closure so every cut is both ways."""
    pairs = set()
    for node, enemies in grudge.items():
        for enemy in enemies:
            pairs.add((node, enemy))
            pairs.add((enemy, node))
    return sorted(pairs)


def visible(grudge: Mapping[str, frozenset[str]], nodes: Sequence[str]) -> dict[str, frozenset[str]]:
    """Who each node can hear (itself included) under the grudge, after the symmetric closure."""
    pairs = set(cut_pairs(grudge))
    return {n: frozenset(m for m in nodes if (n, m) not in pairs) for n in nodes}


def pick_targets(nodes: Sequence[str], rng: random.Random, *, mode: str) -> list[str]:
    """``one``, ``minority`` (1..n//2 nodes... at least one), ``majority`` or ``all``."""
    count = len(nodes)
    size = {
        "one": 1,
        "minority": rng.randint(1, max(1, (count - 1) // 2)),
        "majority": count // 2 + 1,
        "all": count,
    }[mode]
    return sorted(rng.sample(list(nodes), size))


# -- power loss and corruption (pure) ------------------------------------------------------------------


def durable_sizes(trace_lines: Iterable[str]) -> dict[str, int]:
    """From a nodeshim trace: the size of each file at its last fsync. ``base`` lines (written when the
    node starts) reset the picture; ``sync`` raises a file's durable size; ``rename`` moves it."""
    sizes: dict[str, int] = {}
    for line in trace_lines:
        parts = line.rstrip("\n").split("\t")
        if parts[0] == "start":
            sizes = {}
        elif parts[0] in ("base", "sync") and len(parts) == 3:
            sizes[parts[1]] = int(parts[2])
        elif parts[0] == "rename" and len(parts) == 3:
            moved = sizes.pop(parts[1], None)
            if moved is None:
                sizes.pop(parts[2], None)
            else:
                sizes[parts[2]] = moved
    return sizes


def flip_bits(data: bytearray, rng: random.Random, count: int) -> list[tuple[int, int]]:
    """Flip ``count`` random bits in place; returns (byte position, bit)."""
    flipped = []
    for _ in range(count):
        position = rng.randrange(len(data))
        bit = rng.randrange(8)
        data[position] ^= 1 << bit
        flipped.append((position, bit))
    return flipped


def corrupt_targets(
    candidates: Sequence[str], corrupted: set[str], budget: int, rng: random.Random
) -> list[str]:
    """Nodes to damage now, keeping every node ever damaged within ``budget`` (a minority)."""
    pool = list(candidates)
    rng.shuffle(pool)
    wanted = rng.randint(1, max(1, budget))
    chosen: list[str] = []
    for node in pool:
        if len(chosen) < wanted and len(corrupted | {*chosen, node}) <= budget:
            chosen.append(node)
    return sorted(chosen)


def _files(directory: str) -> list[str]:
    found: list[str] = []
    for root, _, names in os.walk(directory):
        found.extend(os.path.join(root, n) for n in names)
    return sorted(found)


def write_baseline(trace_path: str, data_dir: str) -> None:
    """Before a node starts: everything on its disk now counts as durable."""
    lines = ["start\t-\t0"]
    for path in _files(os.path.realpath(data_dir)):
        try:
            lines.append(f"base\t{path}\t{os.path.getsize(path)}")
        except OSError:
            continue
    with open(trace_path, "a", encoding="utf-8", errors="surrogateescape") as f:
        f.write("\n".join(lines) + "\n")


def discard_unsynced(trace_path: str, data_dir: str) -> list[dict[str, Any]]:
    """Cut every file of a dead node back to its last fsynced size; returns what was cut."""
    try:
        with open(trace_path, encoding="utf-8", errors="surrogateescape") as f:
            sizes = durable_sizes(f)
    except FileNotFoundError:
        sizes = {}
    cut = []
    for path in _files(os.path.realpath(data_dir)):
        if os.path.basename(path) == disks.BALLAST:
            continue  # the disk-full fault's, fsynced by the harness: not the node's to lose
        size = os.path.getsize(path)
        keep = min(size, sizes.get(path, 0))
        if keep < size:
            os.truncate(path, keep)
            cut.append({"file": os.path.relpath(path, data_dir), "from": size, "to": keep})
    return cut


def segment_files(data_dir: str) -> list[str]:
    logs = os.path.join(data_dir, "logs")
    return [p for p in _files(logs) if p.endswith(".log") and os.path.getsize(p) > 0]


def corrupt_node(data_dir: str, rng: random.Random) -> dict[str, Any]:
    files = segment_files(data_dir)
    if not files:
        return {"skipped": "no non-empty segment file"}
    path = rng.choice(files)
    relative = os.path.relpath(path, data_dir)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if rng.random() < 0.5:
        flipped = flip_bits(data, rng, rng.randint(1, 8))
        with open(path, "r+b") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return {"file": relative, "size": len(data), "flipped": flipped}
    keep = rng.randrange(len(data))
    os.truncate(path, keep)
    return {"file": relative, "truncated_from": len(data), "to": keep}
