"""A file system of its own for a test, small enough to fill: ``jepsen.disks``' loop-mounted ext4 (root and
loop devices; without them the test fails naming what is missing: ``required_tools``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from required_tools import require, unusable

from jepsen import disks


@contextlib.contextmanager
def small_disk(directory: Path, size_mib: int = 16) -> Iterator[str]:
    """Mount a fresh ext4 of ``size_mib`` under ``directory``; yields its mount point."""
    require("small-disks")
    disk = disks.SmallDisk(str(directory / "disk.img"), str(directory / "disk"), size_mib)
    try:
        disk.mount()
    except disks.DiskError as exc:
        unusable(f"a loop-mounted disk: {exc}")
    try:
        yield disk.mount_point
    finally:
        disk.unmount()
