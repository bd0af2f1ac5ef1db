"""The replicas' defaults that a node's options name (``raftlog_node.options``): a leaf, so that building
a command line loads none of the replicas."""

from __future__ import annotations

RECOVERY_RATE_BYTES_PER_S_DEFAULT = 100 * 1024 * 1024  # all recoveries of a node together
