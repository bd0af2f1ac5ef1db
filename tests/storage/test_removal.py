"""raftlog.storage.removal: a tree goes deepest first; a big file is shrunk step by step at the given pace
before it is unlinked; a stop request ends it between steps; what is already gone is skipped."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from raftlog.storage.removal import Stopped, remove_tree

MiB = 1 << 20


def sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no blocks (truncations of it cost nothing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as file:
        file.truncate(size)


def test_a_tree_is_removed_with_each_big_file_shrunk_at_the_pace_asked(tmp_path: Path) -> None:
    root = tmp_path / "trash" / "orders-0.7"
    sparse(root / "logs" / "00000000000000000000.log", 20 * MiB)
    sparse(root / "logs" / "00000000000000000000.index", 1000)
    sparse(root / "raft" / "journal" / "segment-1", 8 * MiB)
    (root / "empty").mkdir()
    (root / "link").symlink_to(root / "logs")
    sizes: list[int] = []
    pauses: list[float] = []
    log_file = root / "logs" / "00000000000000000000.log"

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if log_file.exists() and os.stat(log_file).st_size < 20 * MiB:  # its own steps, not another's
            sizes.append(os.stat(log_file).st_size)

    remove_tree(str(root), bytes_per_s=4 * MiB, step_bytes=4 * MiB, sleep=sleep)
    assert not root.exists() and (tmp_path / "trash").is_dir()
    assert sizes == [16 * MiB, 12 * MiB, 8 * MiB, 4 * MiB]  # then unlinked; never a step over 4 MiB
    assert pauses == [1.0] * 5  # four steps of the log file, one of the 8 MiB journal segment


def test_without_a_pace_everything_goes_at_once(tmp_path: Path) -> None:
    sparse(tmp_path / "t" / "big", 100 * MiB)
    pauses: list[float] = []
    remove_tree(str(tmp_path / "t"), bytes_per_s=None, sleep=pauses.append)
    assert pauses == [] and not (tmp_path / "t").exists()


def test_a_stop_request_ends_the_removal_between_steps_and_leaves_the_rest(tmp_path: Path) -> None:
    big = tmp_path / "t" / "big"
    sparse(big, 40 * MiB)
    stop = threading.Event()

    def sleep(seconds: float) -> None:
        stop.set()  # the node closes during the first pause

    with pytest.raises(Stopped):
        remove_tree(str(tmp_path / "t"), bytes_per_s=1 << 30, step_bytes=8 * MiB, stop=stop, sleep=sleep)
    assert os.stat(big).st_size == 32 * MiB  # one step done, the file left for the next start


def test_a_missing_tree_is_nothing_to_do_and_bad_paces_are_refused(tmp_path: Path) -> None:
    remove_tree(str(tmp_path / "never-there"), sleep=lambda seconds: None)
    with pytest.raises(ValueError, match="step_bytes"):
        remove_tree(str(tmp_path), bytes_per_s=0)
    with pytest.raises(ValueError, match="step_bytes"):
        remove_tree(str(tmp_path), step_bytes=0)
