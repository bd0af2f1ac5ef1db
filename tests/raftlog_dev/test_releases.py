"""Two processes asking for the same previous release at once (two test workers, two terminals) get one
build: the second waits for the first's lock, then finds the release built. Before the lock, both ran
``git worktree add`` on one folder and the second failed with "already exists"."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from raftlog_dev import releases

# each waits on its stdin, so both ask in the same moment
_ASK = """
import sys
from raftlog_dev import releases
sys.stdin.readline()
print(releases.release("0.1.0", say=True, into=sys.argv[1]).python)
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
            asker.stdin.write("go\n")
            asker.stdin.flush()
        answers = [asker.communicate(timeout=900) for asker in askers]
        assert [asker.returncode for asker in askers] == [0, 0], answers
        pythons = {out.strip() for out, _ in answers}
        assert pythons == {str(into / "0.1.0" / ".venv" / "bin" / "python")}, answers
        builds = sum(err.count("building release 0.1.0") for _, err in answers)
        assert builds == 1, answers
        ran = subprocess.run(
            [pythons.pop(), "-c", "import raftlog, sys; print(raftlog.__file__)"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        assert ran.returncode == 0 and ran.stdout.startswith(str(into / "0.1.0")), ran
    finally:
        for asker in askers:
            asker.kill()
        subprocess.run(
            ["git", "-C", releases.checkout_root(), "worktree", "remove", "--force", str(into / "0.1.0")],
            capture_output=True,
        )
