"""The test worker's node fork server (``raftlog_node/forkserver.py``): started when a worker's session
starts, named to every process the worker starts by ``RAFTLOG_NODE_FORKSERVER``, so that the suite's few
hundred nodes (``raftlog dev``'s, the scenario clusters', the tests' own) start as forks of a process that
imported the node once instead of each importing it (about 0.6 CPU s a node).

``RAFTLOG_NODE_FORKSERVER=`` (set and empty) runs a session without it: every node exec'd."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from raftlog_node import forkserver
from raftlog_node.launch import SOCKET_ENV

_started: list[tuple[subprocess.Popen[bytes], str]] = []


def start() -> None:
    if SOCKET_ENV in os.environ:  # set by the caller: its server, or none when empty
        return
    folder = tempfile.mkdtemp(prefix="raftlog-forks-")
    path = os.path.join(folder, "forks.sock")
    with open(os.path.join(folder, "forkserver.log"), "ab") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "raftlog_node.forkserver", path, "--room", forkserver.room()],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    _started.append((server, folder))
    os.environ[SOCKET_ENV] = path  # a launch before it binds execs its node; after, waits for its imports


def stop() -> None:
    while _started:
        server, folder = _started.pop()
        os.environ.pop(SOCKET_ENV, None)
        server.terminate()
        server.wait(30)
        shutil.rmtree(folder, ignore_errors=True)
