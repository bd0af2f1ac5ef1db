"""``python -m raftlog_cli ...``: the ``raftlog`` command."""

import sys

from raftlog_cli import main

sys.exit(main())
