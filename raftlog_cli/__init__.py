"""The ``raftlog`` command line (see README.md): a client tool above the server, the client package and
the benchmarks. ``main`` is the command: it answers ``--version`` before importing any command, and
``cli.main`` imports the server (``serve``, ``dev``) and the benchmarks only for the commands that run
them, so a command starts in a fraction of a second."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words == ["--version"]:
        import raftlog

        print(f"raftlog {raftlog.version()}")
        return 0
    from raftlog_cli import cli

    return cli.main(words)
