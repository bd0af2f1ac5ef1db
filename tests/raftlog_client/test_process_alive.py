"""``raftlog_client.local_cluster.alive``, which ``raftlog dev status`` reports of each process,
``raftlog dev stop`` waits on until the supervisor is gone and the benchmarks wait on for a killed node
or peer: a process that exited is not alive, even while its parent has not yet collected its exit status
(a zombie), as a supervisor started by a script is until the script waits for it."""

from __future__ import annotations

import os
import subprocess
import sys

from raftlog_client.local_cluster import alive


def test_a_running_process_is_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert alive(child.pid)
    finally:
        child.communicate(b"")
    assert not alive(child.pid)


def test_a_process_that_exited_is_not_alive_before_its_parent_waits_for_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # until it exited, leaving it unreaped
        with open(f"/proc/{child.pid}/stat", "rb") as stat:
            assert b") Z " in stat.read(), "a zombie until waited for"
        assert not alive(child.pid)
    finally:
        child.wait()


def test_no_pid_is_not_alive() -> None:
    assert not alive(None) and not alive(0) and not alive(-1)
