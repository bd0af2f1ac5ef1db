"""The Raft journal's defaults that a node's options name (``raftlog_node.options``): a leaf, so that
building a command line loads none of the consensus."""

from __future__ import annotations

SYNC_THREAD_MIN_BYTES_DEFAULT = 64 * 1024  # a sync of fewer bytes stays on the Raft thread
JOURNAL_SYNC_THREADS_DEFAULT = 8  # threads start as syncs overlap: idle ones cost nothing
JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT = SYNC_THREAD_MIN_BYTES_DEFAULT // 1024
COMPACTION_MIN_BYTES_DEFAULT = 256 * 1024 * 1024  # a journal compacts once it holds this much (CoreConfig)
