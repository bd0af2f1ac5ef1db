"""A log whose sealed segment is damaged, opened again when its records can be had from elsewhere.

A sealed segment was fsynced before the next one began, so damage there (a batch whose CRC fails, bytes
that are no batch, a segment that does not end where the next begins) is acknowledged data gone bad on
this disk. Opened plainly, the log refuses (``CorruptRecord``) and stays refused: it holds records no
other part of this node can give back. A partition replica whose group has other replicas can have them
back: they hold every committed record. For such a log, :func:`set_aside` moves the damaged segment and
every segment after it out of the log directory, whole and unchanged, into a directory of their own for
an operator to look at (renames only: nothing is copied or rewritten, so it is quick and a crash part way
leaves the same damage to find again at the next open). The log then ends where the damaged segment
began, below what its replica has applied, and the replica's recovery copies the rest from its peers
(``partitions.replicas.recovery``), batch for batch, CRC-checked (Kafka and Redpanda, too, cut a damaged log
and fetch again from the leader).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

from raftlog.storage.segment import fsync_directory

log = logging.getLogger("raftlog.storage")

SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex")


@dataclass(frozen=True, slots=True)
class Salvage:
    """What opening a damaged log set aside: the damage found, where the log ends now (the damaged
    segment's base offset) and the files moved, by their new paths."""

    damage: str
    end_offset: int
    moved: tuple[str, ...]


def set_aside(directory: str, bases: Sequence[int], damage: str, to: str) -> Salvage:
    """Move the segments of ``directory`` starting at ``bases`` (the damaged one first, then every later
    one) into the directory ``to`` (made here; on the same file system), fsyncing both directories."""
    os.makedirs(to, exist_ok=True)
    moved = []
    for base in reversed(bases):  # the last first: what a crash leaves is still a log with a damaged segment
        for suffix in SEGMENT_FILE_SUFFIXES:
            name = f"{base:020d}{suffix}"
            source = os.path.join(directory, name)
            if os.path.exists(source):
                os.replace(source, os.path.join(to, name))
                moved.append(os.path.join(to, name))
    fsync_directory(to)
    fsync_directory(directory)
    salvage = Salvage(damage, bases[0], tuple(sorted(moved)))
    log.error(
        "%s: %s; segments from offset %d on set aside in %s; the replica copies them again from its peers",
        directory, damage, bases[0], to,
    )  # fmt: skip
    return salvage
