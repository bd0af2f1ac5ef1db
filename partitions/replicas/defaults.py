"""The replicas' defaults that a node's options name (``raftlog_node.options``): a leaf, so that building
a command line loads none of the replicas."""

from __future__ import annotations

RECOVERY_RATE_BYTES_PER_S_DEFAULT = 100 * 1024 * 1024  # all recoveries of a node together
# a stopping node hands over its leaderships for at most this long (``partitions.replicas.handover``)
CONTROLLED_SHUTDOWN_MS_DEFAULT = 10_000
