"""What the tables kept beside a log's segments (``leader_epochs.LeaderEpochs``,
``transactions.LogTransactions``) share: a checkpoint file that covers the log up to an end offset, so
that opening walks only the batch headers after it, written whole (``segment.write_durably``) when the
table changed or the log moved past what it covers."""

from __future__ import annotations

import logging
import os

from raftlog.storage.errors import StorageError
from raftlog.storage.segment import write_durably

log = logging.getLogger("raftlog.storage")


class Checkpointed:
    """A table with a checkpoint file: ``dirty`` when it changed since the file was written, ``saved_end``
    the end offset the file covers (None: no file, or one that cannot be trusted)."""

    checkpoint_file: str  # the file's name in the log's directory
    checkpoint_name: str  # the file in words, for errors and the log

    def __init__(self, directory: str, saved_end: int | None) -> None:
        self.directory = directory
        self.dirty = saved_end is None
        self.saved_end = saved_end

    def checkpoint(self, end_offset: int) -> str | bytes:
        """The file's contents, covering the log up to ``end_offset``."""
        raise NotImplementedError

    def save(self, end_offset: int) -> None:
        """Write the checkpoint file, covering the log up to ``end_offset`` (its end now). Raises
        ``DiskFull`` or ``StorageUnavailable``; the file on disk is then the old one, whole."""
        path = os.path.join(self.directory, self.checkpoint_file)
        write_durably(path, self.checkpoint(end_offset), f"the {self.checkpoint_name}")
        self.dirty = False
        self.saved_end = end_offset

    def save_if_behind(self, end_offset: int) -> None:
        """Write the checkpoint if the table changed or the log moved past what it covers (a roll, a
        close). A write that fails is logged and left for the next one: the file on disk stays one that
        was true when written, only older (opening walks more headers)."""
        if not self.dirty and self.saved_end == end_offset:
            return
        try:
            self.save(end_offset)
        except StorageError as exc:
            log.warning("%s: %s not written (again later): %s", self.directory, self.checkpoint_name, exc)
