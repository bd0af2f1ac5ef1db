"""What a node keeps of the cluster's feature levels in its own data directory, beside the replicated
metadata (``partitions.features``), each file written durably and read at start:

- ``formation``: the levels a new cluster forms at, written by ``raftlog format --release-version`` (as
  ``kafka-storage format`` writes the bootstrap ``metadata.version``), or else by a node at its first start
  on an unused data directory without ``--join`` (its own release's levels). Only a controller leader
  whose log holds no command yet proposes them (``FormCluster``, refused after any other command), so a
  node re-provisioned later with its original command line, which writes the file again, finalizes
  nothing.
- ``finalized``: the highest finalized level of each feature this node has applied. Levels are never
  lowered, so it is a floor: a node that restarts knows the cluster's levels before its controller replica
  has caught up, and keeps out a node of an earlier release from its first Raft connection on
  (``partitions.features.kept_out``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from raftlog.consensus.journal_files import write_file_durably
from raftlog.errors import check

FORMATION_FILE = "formation"
FINALIZED_FILE = "finalized"


def _read(data_dir: str, name: str) -> dict[str, int] | None:
    path = os.path.join(data_dir, name)
    try:
        with open(path, encoding="utf-8") as file:
            levels = json.load(file)
    except FileNotFoundError:
        return None
    check(
        isinstance(levels, dict)
        and all(isinstance(k, str) and type(v) is int and v >= 1 for k, v in levels.items()),
        f"malformed feature levels in {path}: {levels!r}",
    )
    return dict(levels)


def _write(data_dir: str, name: str, levels: Mapping[str, int]) -> None:
    body = json.dumps(dict(sorted(levels.items()))).encode() + b"\n"
    write_file_durably(os.path.join(data_dir, name), body)


def formation(data_dir: str) -> dict[str, int] | None:
    """The levels this node was told to form a new cluster at; None: it formed none (it joined, or
    started on a data directory of an earlier release)."""
    return _read(data_dir, FORMATION_FILE)


def record_formation(data_dir: str, levels: Mapping[str, int]) -> None:
    _write(data_dir, FORMATION_FILE, levels)


class FinalizedFloor:
    """The highest finalized levels this node has seen, kept in ``data_dir`` (read once at start,
    written when one rises). Any thread; ``raise_to`` is called where the metadata is applied."""

    def __init__(self, data_dir: str) -> None:
        self._data_dir = data_dir
        self._levels: Mapping[str, int] = _read(data_dir, FINALIZED_FILE) or {}

    def levels(self) -> Mapping[str, int]:
        return self._levels

    def raise_to(self, finalized: Mapping[str, int]) -> bool:
        """Keep ``finalized``'s levels that are above the floor (written before this returns); whether any
        rose."""
        higher = {f: level for f, level in finalized.items() if level > self._levels.get(f, 0)}
        if not higher:
            return False
        levels = {**self._levels, **higher}
        _write(self._data_dir, FINALIZED_FILE, levels)
        self._levels = levels
        return True


def merged(floor: Mapping[str, int], finalized: Mapping[str, int]) -> dict[str, int]:
    """The cluster's levels as this node knows them: the higher of its floor and its applied metadata."""
    return {f: max(floor.get(f, 0), finalized.get(f, 0)) for f in {*floor, *finalized}}
