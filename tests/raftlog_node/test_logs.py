"""A node's log file (``raftlog serve --log-file``, ``raftlog_node.logs.to_file``) is rotated by size: a
process that logs far more than its bound keeps at most ``--log-files-kept`` rotated files besides the
current one, each within the bound (the current one, and only it, plus what was written on stderr after
the last rotation), the newest lines in the current file, the oldest removed; what the process writes on
its stderr (a traceback printed at exit) follows the file through every rotation."""

from __future__ import annotations

import pathlib
import subprocess
import sys

FILE_BYTES_MAX = 64 * 1024
FILES_KEPT = 2
LINES = 20_000  # about 2 MiB of log: thirty times what the files may hold together
# What the script below writes on its stderr after its last log line: it goes to the current file past the
# handler's size check, which rotates before a line would take a file past the bound
AT_EXIT = ("written to stderr after the last rotation", "the process ends with a message on its stderr")
AT_EXIT_BYTES = sum(len(line) + 1 for line in AT_EXIT)

_LOGGING = """
import logging, sys
from raftlog_node import logs
logs.configure(verbose=False)  # as a node's start does, then serve --log-file
logs.to_file(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
log = logging.getLogger("raftlog.test")
for number in range(int(sys.argv[4])):
    log.info("line %06d of a node that logs a lot %s", number, "x" * 40)
print(sys.argv[5], file=sys.stderr)
raise SystemExit(sys.argv[6])
"""


def test_a_node_log_is_rotated_within_its_bound_and_takes_stderr_along(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "node.log"
    done = subprocess.run(
        [sys.executable, "-c", _LOGGING, str(path), str(FILE_BYTES_MAX), str(FILES_KEPT), str(LINES),
         *AT_EXIT],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done
    assert done.stdout == "" and done.stderr == "", "everything went to the log file"
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["node.log", "node.log.1", "node.log.2"], files  # the older ones removed
    for name in files:
        size = (tmp_path / name).stat().st_size
        assert 0 < size <= FILE_BYTES_MAX + (AT_EXIT_BYTES if name == "node.log" else 0), (name, size)
    current = path.read_text()
    assert f"line {LINES - 1:06d}" in current  # the newest lines in the current file
    assert current.endswith("".join(f"{line}\n" for line in AT_EXIT)), current[-300:]
    kept = "".join((tmp_path / name).read_text() for name in files)
    assert "line 000000 " not in kept  # the oldest went with the files removed
