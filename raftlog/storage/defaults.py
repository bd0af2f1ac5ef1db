"""The storage's defaults that a node's options name (``raftlog_node.options``): a leaf, so that building
a command line loads none of the storage."""

from __future__ import annotations

MiB = 1024 * 1024

# max.message.bytes and four times the largest batch the HTTP door encodes from records (a request of at
# most 16 MiB), so batches compressed ten or twenty times still pass, while a bomb holds at most this
# much of a node's memory per inflating thread.
INFLATED_BYTES_MAX_DEFAULT = 64 * MiB
RETENTION_CHECK_MS_DEFAULT = 60_000  # how often retention deletes old segments
CLEANER_RATE_BYTES_PER_S_DEFAULT = 64 * MiB
CLEANER_INTERVAL_MS_DEFAULT = 15_000  # Kafka's log.cleaner.backoff.ms
