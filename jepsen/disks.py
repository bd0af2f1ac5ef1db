"""Small file systems of their own, to fill up for real: the disk-full fault's disks.

A :class:`SmallDisk` is an ext4 image file loop-mounted on a directory (needs root, ``mkfs.ext4``,
``mount`` and a loop device). Made with no blocks reserved for root (``-m 0``: the node runs as root, and
a reserve would let it write on where an ordinary disk is full) and no discards. ext4, not tmpfs, because
it is what a node's disk is: direct I/O, delayed allocation, a journal of its own.

:func:`fill` takes every free block with a ballast file (``posix_fallocate`` in shrinking chunks, then
single blocks, until the file system refuses even one); :func:`empty` removes it. Filling takes no time
and writes nothing (the blocks are allocated, not written).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from dataclasses import dataclass

BALLAST = "ballast"
COMMAND_TIMEOUT_S = 30.0
_CHUNKS = (64 << 20, 1 << 20, 64 << 10, 4 << 10)


class DiskError(RuntimeError):
    """A small disk could not be made, mounted or unmounted (not a finding about the cluster)."""


def unavailable() -> str | None:
    """Why small disks cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "loop-mounted disks need root"
    for tool in ("mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is missing"
    if not os.path.exists("/dev/loop-control"):
        return "no loop devices (/dev/loop-control)"
    return None


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise DiskError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")


@dataclass
class SmallDisk:
    """An ext4 file system of ``size_mib`` in ``image``, mounted on ``mount_point`` by :meth:`mount`."""

    image: str
    mount_point: str
    size_mib: int
    mounted: bool = False

    def mount(self) -> str:
        os.makedirs(self.mount_point, exist_ok=True)
        if not os.path.exists(self.image):
            with open(self.image, "wb") as file:
                file.truncate(self.size_mib << 20)
            _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard", self.image])
        _run(["mount", "-o", "loop", self.image, self.mount_point])
        self.mounted = True
        return self.mount_point

    def unmount(self) -> None:
        """Unmount (lazily if something still holds it: the loop device goes once nothing does)."""
        if not self.mounted:
            return
        try:
            _run(["umount", self.mount_point])
        except DiskError:
            _run(["umount", "-l", self.mount_point])
        self.mounted = False

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.mount_point).free


def fill(directory: str) -> int:
    """Take every free block of ``directory``'s file system with its ballast file (added to, if there is
    one already); returns the bytes the ballast holds now."""
    path = os.path.join(directory, BALLAST)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        for chunk in _CHUNKS:
            while True:
                try:
                    os.posix_fallocate(fd, size, chunk)
                except OSError as error:
                    if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    break
                size += chunk
        os.fsync(fd)
        return size
    finally:
        os.close(fd)


def empty(directory: str) -> bool:
    """Remove the ballast file of ``directory``; whether there was one."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, BALLAST))
        return True
    return False
