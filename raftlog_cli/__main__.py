"""``python -m raftlog_cli ...``: the ``raftlog`` command."""

import sys

# kio (the Kafka schemas, which ``raftlog dev`` and the commands reading a node's options import) registers
# a hypothesis strategy per type when hypothesis can be imported: ~0.5 s of CPU at every command where the
# test tools are installed (as python -m raftlog_node does for a node; raftlog_cli.main, called in a test's
# own process, leaves it alone)
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from raftlog_cli import main  # noqa: E402

sys.exit(main())
