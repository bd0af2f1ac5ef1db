"""``raftlog format --data-dir DIR --release-version V``: prepare a node's unused data directory to form a
new cluster at release V's feature levels, as Kafka's ``kafka-storage format --release-version`` writes the
bootstrap ``metadata.version``: a cluster formed at 0.1.0's levels can still go back to release 0.1.0
until the operator raises them (``raftlog cluster features upgrade``). Run it on each node of the new
cluster before its first start; a node started on an unused data directory without it forms the cluster
at its own release's levels. The setting lives in the data directory (``local_levels.formation``), not on
``raftlog serve``'s command line, which an earlier release must still be able to read.
"""

from __future__ import annotations

import argparse
import os
import sys

from partitions.errors import FeatureUpdateRefused
from partitions.features import RELEASE_LEVELS, release_levels
from partitions.metadata import local_levels
from partitions.replicas.raft_host import RAFT_DIR

DATA_DIR_MODE = 0o700


class FormatRefused(Exception):
    """The data directory cannot be formatted as asked; nothing was written."""


def format_data_dir(data_dir: str, release: str) -> str:
    """Record that a node started on ``data_dir`` forms a new cluster at ``release``'s levels; what was
    done. FormatRefused for a directory a node already used (its cluster's levels are in its metadata)
    or one formatted for other levels."""
    try:
        levels = release_levels(release)
    except FeatureUpdateRefused as exc:
        raise FormatRefused(str(exc)) from None
    if os.path.exists(os.path.join(data_dir, RAFT_DIR)):
        raise FormatRefused(
            f"{data_dir} was used by a node: its cluster's levels are in its metadata (raftlog cluster "
            "features); nothing written"
        )
    recorded = local_levels.formation(data_dir) if os.path.isdir(data_dir) else None
    if recorded is not None and recorded != levels:
        raise FormatRefused(f"{data_dir} is already formatted for levels {recorded}; nothing written")
    os.makedirs(data_dir, mode=DATA_DIR_MODE, exist_ok=True)
    local_levels.record_formation(data_dir, levels)
    shown = ", ".join(f"{feature} {level}" for feature, level in sorted(levels.items()))
    return f"{data_dir}: a new cluster formed from here starts at release {release}'s levels ({shown})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", required=True, help="the node's data directory, unused so far")
    parser.add_argument(
        "--release-version",
        required=True,
        choices=tuple(RELEASE_LEVELS),
        help="the release whose feature levels the new cluster starts at",
    )


def main(args: argparse.Namespace) -> int:
    try:
        print(format_data_dir(os.path.abspath(args.data_dir), args.release_version))
    except FormatRefused as exc:
        print(f"raftlog format: {exc}", file=sys.stderr)
        return 1
    return 0
