"""``python -m raftlog_node [-v] --node-id n1 ...``: one node process, the same as ``raftlog serve`` (the
options of ``raftlog_node/options.py``). The server's own entry: ``raftlog dev``, the fault harness and the
test clusters start nodes this way, so running a node needs nothing of the command-line package."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

if __name__ == "__main__":
    # kio (the Kafka schemas) registers a hypothesis strategy per type when hypothesis can be imported,
    # which costs a node process ~0.5 s of CPU at every start where the test tools are installed; a node
    # never generates test data.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from raftlog_node import logs, options, serve


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="raftlog serve", description="Run one node (HTTP API, Raft, storage)."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    options.add_arguments(parser)
    args = parser.parse_args(argv)
    logs.configure(args.verbose)
    return serve.main(args)


if __name__ == "__main__":
    sys.exit(main())
