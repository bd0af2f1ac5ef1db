"""raftlog.storage.removal: a tree goes deepest first; a big file is shrunk step by step at the given pace
before it is unlinked; a stop request ends it between steps; what is already gone is skipped. A Remover
removes what any thread gives it one path at a time, faster while its backlog is long, and stops on
close."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from raftlog.storage import removal
from raftlog.storage.removal import Remover, Stopped, Trash, remove_tree, tree_bytes

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


def test_a_single_file_is_removed_too(tmp_path: Path) -> None:
    sparse(tmp_path / "segment-0000000003.log", 20 * MiB)
    pauses: list[float] = []
    remove_tree(
        str(tmp_path / "segment-0000000003.log"), bytes_per_s=8 * MiB, step_bytes=8 * MiB, sleep=pauses.append
    )
    assert not (tmp_path / "segment-0000000003.log").exists()
    assert pauses == [1.0, 1.0]  # 20 -> 12 -> 4 MiB, then unlinked


def wait_until_done(remover: Remover, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while remover.pending():
        assert time.monotonic() < deadline, "the remover did not finish"
        time.sleep(0.01)


def test_a_remover_removes_one_path_at_a_time_in_the_order_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str, str]] = []
    real = removal.remove_tree

    def watched(path: str, *args: object) -> None:
        events.append(("start", Path(path).name, threading.current_thread().name))
        time.sleep(0.02)  # long enough for a second worker, if there were one, to start meanwhile
        real(path, *args)  # type: ignore[arg-type]
        events.append(("end", Path(path).name, threading.current_thread().name))

    monkeypatch.setattr(removal, "remove_tree", watched)
    remover = Remover(bytes_per_s=1 << 40, name="remover-under-test")
    names = [f"dropped-{i}" for i in range(4)]
    for name in names:
        sparse(tmp_path / name / "log", MiB)
    submitters = [threading.Thread(target=remover.submit, args=(str(tmp_path / name),)) for name in names[:2]]
    for thread in submitters:  # two threads at once (the driver and the event loop do this)
        thread.start()
    for thread in submitters:
        thread.join()
    for name in names[2:]:
        remover.submit(str(tmp_path / name))
    wait_until_done(remover)
    remover.close()
    assert not any((tmp_path / name).exists() for name in names)
    assert [kind for kind, _, _ in events] == ["start", "end"] * 4  # never two at once
    assert {thread for _, _, thread in events} == {"remover-under-test"}
    started = [name for kind, name, _ in events if kind == "start"]
    assert sorted(started[:2]) == names[:2] and started[2:] == names[2:]
    assert remover.removed == 4


def test_a_remover_goes_faster_while_its_backlog_is_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paces: list[float] = []
    gate = threading.Event()

    def recorded(path: str, bytes_per_s: float | None, *args: object) -> None:
        if Path(path).name == "first":
            gate.wait(5)  # the worker is busy with this one until the four segments are queued
        else:
            assert bytes_per_s is not None
            paces.append(bytes_per_s)
        os.unlink(path)

    monkeypatch.setattr(removal, "remove_tree", recorded)
    sparse(tmp_path / "first", MiB)
    for i in range(4):
        sparse(tmp_path / f"segment-{i}", 64 * MiB)
    assert tree_bytes(str(tmp_path)) == 257 * MiB
    remover = Remover(bytes_per_s=8 * MiB, catch_up_s=8.0)
    remover.submit(str(tmp_path / "first"))
    for i in range(4):
        remover.submit(str(tmp_path / f"segment-{i}"))
    assert (remover.pending(), remover.backlog_bytes()) == (5, 257 * MiB)
    gate.set()
    wait_until_done(remover)
    remover.close()
    # segment-0 starts while 256 MiB are queued: 32 MiB/s clears that in 8 s; then 192, 128, 64 MiB
    # queued (24, 16, 8 MiB/s); never below the base pace
    assert paces == [32 * MiB, 24 * MiB, 16 * MiB, 8 * MiB]


def test_a_closed_remover_stops_between_steps_and_takes_nothing_more(tmp_path: Path) -> None:
    big = tmp_path / "dropped" / "log"
    sparse(big, 64 * MiB)
    remover = Remover(bytes_per_s=8 * MiB, step_bytes=8 * MiB)  # a step per second
    remover.submit(str(tmp_path / "dropped"))
    deadline = time.monotonic() + 5
    while os.stat(big).st_size == 64 * MiB:
        assert time.monotonic() < deadline, "no step taken"
        time.sleep(0.01)
    started = time.monotonic()
    remover.close()
    assert time.monotonic() - started < 0.5  # the pause between steps ends at once
    assert 0 < os.stat(big).st_size < 64 * MiB  # left for the next start
    sparse(tmp_path / "later", MiB)
    remover.submit(str(tmp_path / "later"))
    assert (tmp_path / "later").exists() and remover.pending() == 1


def test_bad_remover_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        Remover(bytes_per_s=0)
    with pytest.raises(ValueError, match="positive"):
        Remover(catch_up_s=0)


def test_the_trash_takes_a_path_by_one_rename_and_its_remover_deletes_it_later(tmp_path: Path) -> None:
    remover = Remover(bytes_per_s=1 << 40, name="test-trash")
    trash = Trash(str(tmp_path / "trash"), remover)
    try:
        doomed = tmp_path / "logs" / "t-0.1"
        doomed.mkdir(parents=True)
        (doomed / "segment.log").write_bytes(b"x" * 1000)
        trash.discard(str(doomed))
        assert not doomed.exists(), "gone from where it was at once: a rename"
        trash.discard_if_present(str(tmp_path / "logs" / "went-with-its-directory.log"))  # no error
        with pytest.raises(FileNotFoundError):
            trash.discard(str(tmp_path / "nothing-here"))
        deadline = time.monotonic() + 10
        while any((tmp_path / "trash").iterdir()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any((tmp_path / "trash").iterdir()), "the remover deleted it"
    finally:
        remover.close()


def test_emptying_the_trash_at_start_removes_what_a_crash_left(tmp_path: Path) -> None:
    left = tmp_path / "trash" / "t-0.1.abc" / "journal"
    left.mkdir(parents=True)
    (left / "segment").write_bytes(b"x" * 100)
    trash = Trash(str(tmp_path / "trash"), Remover(name="unused"))
    trash.empty()
    assert not (tmp_path / "trash").exists() or not any((tmp_path / "trash").iterdir())
    trash.empty()  # nothing there: nothing to do
