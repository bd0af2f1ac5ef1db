"""``FileHandle``: a file's descriptor that a node may close while the file stays in use (a segment's
data file, its indexes), opened again by the next use."""

from __future__ import annotations

import os

from raftlog.errors import check


class FileHandle:
    """A file opened (created if missing) read-write now; :meth:`release_descriptor` closes its
    descriptor and :attr:`fd` opens it again on the next use, so a node holding thousands of idle
    partitions keeps no descriptor for each. A use after :meth:`close_descriptor` is a bug."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._closed = False

    @property
    def fd(self) -> int:
        """The file's descriptor, opened again if :meth:`release_descriptor` closed it."""
        if self._fd is None:
            check(not self._closed, f"{self.path}: used after close")
            self._fd = os.open(self.path, os.O_RDWR)
        return self._fd

    def release_descriptor(self) -> None:
        """Close the descriptor; the next use opens it again."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close_descriptor(self) -> None:
        """Close the descriptor for good."""
        self.release_descriptor()
        self._closed = True
