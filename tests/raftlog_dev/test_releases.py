"""Two processes asking for the same previous release at once (two test workers, two terminals) get one
build: the second waits for the first's lock, then finds the release built. Before the lock, both ran
``git worktree add`` on one folder and the second failed with "already exists". The build itself is
replaced by a stand-in that goes on only once both asked (a real one, a git worktree, a virtualenv and
the C extension, is made by the upgrade tests, ``test_rolling_upgrade`` and
``test_previous_release_kept_out``): what is tried is who builds, and when."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from raftlog_dev import releases

# each waits on its stdin, so both ask in the same moment, and says it asked (a file) just before it does;
# the build goes on once both asked, so the second asker comes while the first builds, however slowly
# either process started
_ASK = """
import os, sys, time
from raftlog_dev import releases

into, me = sys.argv[1], sys.argv[2]

def worktree(root, tree, commit):
    print("building", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 60
    while not all(os.path.exists(os.path.join(into, f"asked-{n}")) for n in ("0", "1")):
        assert time.monotonic() < deadline, "the other asker never asked"
        time.sleep(0.01)
    os.makedirs(tree, exist_ok=True)

def virtualenv(tree, python):
    os.makedirs(os.path.dirname(python), exist_ok=True)
    open(python, "w").close()

releases._worktree, releases._virtualenv = worktree, virtualenv
sys.stdin.readline()
os.makedirs(into, exist_ok=True)
open(os.path.join(into, f"asked-{me}"), "w").close()
print(releases.release("0.1.0", into=into).python)
"""


def test_two_processes_asking_at_once_get_one_build(tmp_path: pathlib.Path) -> None:
    into = tmp_path / "releases"
    askers = [
        subprocess.Popen(
            [sys.executable, "-c", _ASK, str(into), str(me)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=releases.checkout_root(),
        )
        for me in range(2)
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
