"""The transaction coordinator's defaults that a node's options name (``raftlog_node.options``): a leaf,
so that building a command line loads none of the coordinator."""

from __future__ import annotations

TRANSACTION_TIMEOUT_MS_MAX_DEFAULT = 900_000  # Kafka's transaction.max.timeout.ms: 15 minutes
