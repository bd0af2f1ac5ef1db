"""Snapshots: the log compaction of a replica, the snapshot it loads, and a compaction asked for.

``Snapshots``, one of ``RaftCore``'s jobs (a mixin over ``core_base.CoreBase``: it reads the journal, the
state machine, the configurations and pysyncobj's serializer state), replaces pysyncobj's pickled dump: a
snapshot is the state machine's small metadata snapshot in a CRC-checked msgpack file written with fsync
(``raftlog.consensus.snapshot``), never pickle; a state machine answering None ("not now") skips that
compaction. A snapshot received from the leader is fsynced, with its directory, before it is acted on.
``CompactionAttempt`` is the tick callback that ``RaftCore.request_compaction`` installs.
"""

from __future__ import annotations

import logging
import os

from pysyncobj.config import FAIL_REASON

from raftlog.consensus.core_base import Callback, CoreBase
from raftlog.consensus.core_log import as_entry
from raftlog.consensus.core_membership import Memberships
from raftlog.consensus.journal_files import fsync_directory, write_file_durably
from raftlog.consensus.snapshot import decode_snapshot, encode_snapshot, snapshot_membership
from raftlog.errors import InvariantViolation
from raftlog.storage.errors import DiskFull

logger = logging.getLogger("raftlog.consensus.core")  # RaftCore's lines, whichever of its jobs logs them

# A compaction that found no room for its snapshot file is tried again after this (see core_space).
SPACE_RETRY_COMPACTION_S = 5.0


class Snapshots(Memberships):
    """Compaction and snapshot loading, ``RaftCore``'s (see the module docstring)."""

    def _try_log_compaction(self) -> None:
        """pysyncobj's ``__tryLogCompaction``: due by entries, bytes or time (or forced), snapshot the state
        machine and its configuration at the last applied index, durably, and drop the journal before it."""
        path = self._config.snapshot_path
        if path is None:
            return
        now = self._clock()
        if now < self._compaction_retry_at:
            return  # the last snapshot found no room (see core_space)
        forced = self._SyncObj__forceLogCompaction
        if (
            not forced
            and len(self._journal) <= self._config.compaction_min_entries
            and self._journal.size_bytes <= self._config.compaction_min_bytes
            and now - self._SyncObj__lastSerializedTime <= self._config.compaction_min_interval_ms / 1000
        ):
            return
        self._SyncObj__forceLogCompaction = False
        self._SyncObj__lastSerializedTime = now
        last_applied = self._SyncObj__raftLastApplied
        prev, last = self._entry_at(last_applied - 1), self._entry_at(last_applied)
        if prev is None or last is None or prev[1] == self._SyncObj__lastSerializedEntry:
            return
        state = self._state_machine.snapshot()
        if state is None:
            return  # "not now" (see StateMachine.snapshot): the journal stays; a later tick asks again
        config = self._memberships.at(last_applied)  # (a change appended since is still in the journal)
        write_file_durably(path, encode_snapshot(state, last, prev, config.voters, config.learners))
        self._SyncObj__lastSerializedEntry = prev[1]
        # Keep prev and last: pysyncobj needs two entries to resume replication after a snapshot.
        self._journal.deleteEntriesTo(prev[1] - self._journal.first_index)

    def _make_received_snapshot_durable(self) -> None:
        """pysyncobj renamed the received file into place without fsync; do it before acting on it."""
        path = self._config.snapshot_path
        if path is None:
            raise InvariantViolation(f"{self.node_id}: snapshot received but no snapshot_path configured")
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(os.path.dirname(os.path.abspath(path)))

    def _load_snapshot(self, clear_journal: bool) -> None:
        path = self._config.snapshot_path
        if path is None:
            raise InvariantViolation(f"{self.node_id}: snapshot received but no snapshot_path configured")
        with open(path, "rb") as file:
            snapshot = decode_snapshot(path, file.read())
        last, prev = as_entry(snapshot["last"]), as_entry(snapshot["prev"])
        self._state_machine.restore(snapshot["state"])
        journal = self._journal
        if (
            clear_journal
            or len(journal) < 2
            or self._entry_at(prev[1]) != prev
            or self._entry_at(last[1]) != last
        ):
            journal.clear()
            journal.add(*prev)
            journal.add(*last)
        self._SyncObj__raftLastApplied = last[1]
        if self._SyncObj__raftCommitIndex < last[1]:
            self._SyncObj__raftCommitIndex = last[1]
        # The snapshot's configuration, then the changes of the entries kept after it (a restart).
        self._memberships = self._replayed_memberships(last[1], snapshot_membership(snapshot))
        self._install_membership()


class CompactionAttempt:
    """A tick callback forcing one compaction up to the index applied when it first runs."""

    def __init__(self, core: CoreBase, timeout_s: float, callback: Callback) -> None:
        self._core = core
        self._timeout_s = timeout_s
        self._callback = callback
        self._target: int | None = None
        self._deadline = 0.0

    def __call__(self) -> None:
        core = self._core
        now = core._clock()
        if self._target is None:
            self._target = core._SyncObj__raftLastApplied
            self._deadline = now + self._timeout_s
        if core._journal.first_index < self._target - 1:
            core._SyncObj__forceLogCompaction = True
            try:
                core._SyncObj__tryLogCompaction()
            except DiskFull as full:
                logger.warning("%s: requested log compaction put off: %s", core.node_id, full)
                core._compaction_retry_at = now + SPACE_RETRY_COMPACTION_S
                self._finish(FAIL_REASON.REQUEST_DENIED)
                return
        if core._journal.first_index >= self._target - 1:
            self._finish(FAIL_REASON.SUCCESS)
        elif now > self._deadline:
            core._SyncObj__forceLogCompaction = False
            self._finish(FAIL_REASON.REQUEST_DENIED)
        # else: the state machine said "not now" (or a full disk's retry time is not up): next tick

    def _finish(self, fail_reason: int) -> None:
        self._core.removeOnTickCallback(self)
        self._callback(None, fail_reason)
