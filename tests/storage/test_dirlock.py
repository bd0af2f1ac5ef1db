"""One process per data directory: a second one is refused at once, naming the holder, and touches
nothing; the lock goes with its holder, however that ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from raftlog.storage.dirlock import LOCK_FILE, DirectoryLock, Holder
from raftlog.storage.errors import DirectoryLocked

HOLD = textwrap.dedent(
    """
    import sys, time
    from raftlog.storage.dirlock import DirectoryLock
    lock = DirectoryLock.acquire(sys.argv[1], "node n7")
    print("locked", flush=True)
    time.sleep(60)
    """
)


def _holder_process(directory: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, directory], stdout=subprocess.PIPE, text=True, env=env
    )
    assert process.stdout is not None and process.stdout.readline() == "locked\n"
    return process


def test_a_second_lock_is_refused_naming_the_holder_and_the_first_stays_held(tmp_path) -> None:
    directory = str(tmp_path / "n1")
    first = DirectoryLock.acquire(directory, "node n1", clock=lambda: 1_700_000_000.0)
    with pytest.raises(DirectoryLocked) as refused:
        DirectoryLock.acquire(directory, "node n1")
    assert str(refused.value) == (
        f"data directory {directory} is in use by node n1 (pid {os.getpid()}, since 2023-11-14T22:13:20Z)"
    )
    assert os.listdir(directory) == [LOCK_FILE]
    with pytest.raises(DirectoryLocked):  # the refusal did not release or rewrite the first
        DirectoryLock.acquire(directory, "someone else")
    first.close()
    first.close()  # idempotent
    with DirectoryLock.acquire(directory, "node n1") as again:
        assert again.holder.pid == os.getpid() and not again.closed
    assert again.closed


def test_a_lock_held_by_another_process_names_it_and_is_free_once_it_is_killed(tmp_path) -> None:
    directory = str(tmp_path)
    holder = _holder_process(directory)
    try:
        with pytest.raises(DirectoryLocked, match=rf"in use by node n7 \(pid {holder.pid}, since "):
            DirectoryLock.acquire(directory, "node n1")
    finally:
        holder.send_signal(signal.SIGKILL)  # no clean-up code runs: the kernel releases the lock
        holder.wait(10)
    DirectoryLock.acquire(directory, "node n1").close()


def test_child_processes_do_not_inherit_the_lock(tmp_path) -> None:
    lock = DirectoryLock.acquire(str(tmp_path), "raftlog dev")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock.close()
        DirectoryLock.acquire(str(tmp_path), "raftlog dev").close()  # the child holds no copy of it
    finally:
        child.kill()
        child.wait(10)


def test_a_holder_that_has_not_said_who_it_is_is_reported_as_such(tmp_path) -> None:
    assert Holder.decode(b"") is None and Holder.decode(b'{"pid": "x"}') is None
    assert Holder.decode(Holder(5, "node n2", "t").encode()) == Holder(5, "node n2", "t")
    with DirectoryLock.acquire(str(tmp_path), "node n1"):
        with open(tmp_path / LOCK_FILE, "wb") as f:
            f.write(b"not json")
        with pytest.raises(DirectoryLocked, match="another process \\(it has not written who it is yet\\)"):
            DirectoryLock.acquire(str(tmp_path), "node n1")
