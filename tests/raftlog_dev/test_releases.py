"""Two processes asking for the same previous release at once (two test workers, two terminals) get one
build: the second waits for the first's lock, then finds the release built. Before the lock, both ran
``git worktree add`` on one folder and the second failed with "already exists". The build itself is
replaced by a slow stand-in here (a real one, a git worktree, a virtualenv and the C extension, is made by
the upgrade tests, ``test_rolling_upgrade`` and ``test_previous_release_kept_out``): what is tried is who
builds, and when."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from raftlog_dev import releases

# each waits on its stdin, so both ask in the same moment; the build takes a second, so the second asker
# comes while the first builds
_ASK = """
import os, sys, time
from raftlog_dev import releases

def worktree(root, tree, commit):
    print("building", file=sys.stderr, flush=True)
    time.sleep(1.0)
    os.makedirs(tree, exist_ok=True)

def virtualenv(tree, python):
    os.makedirs(os.path.dirname(python), exist_ok=True)
    open(python, "w").close()

releases._worktree, releases._virtualenv = worktree, virtualenv
sys.stdin.readline()
print(releases.release("0.1.0", into=sys.argv[1]).python)
"""


def test_two_processes_asking_at_once_get_one_build(tmp_path: pathlib.Path) -> None:
    into = tmp_path / "releases"
    askers = [
        subprocess.Popen(
            [sys.executable, "-c", _ASK, str(into)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=releases.checkout_root(),
        )
        for _ in range(2)
    ]
    try:
        for asker in askers:
            assert asker.stdin is not None
            asker.stdin.write("go\n")
            asker.stdin.flush()
        answers = [asker.communicate(timeout=120) for asker in askers]
    finally:
        for asker in askers:
            asker.kill()
    assert [asker.returncode for asker in askers] == [0, 0], answers
    assert {out.strip() for out, _ in answers} == {str(into / "0.1.0" / ".venv" / "bin" / "python")}, answers
    assert sum(err.count("building") for _, err in answers) == 1, answers
