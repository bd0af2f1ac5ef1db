"""A node's data directory as Kafka's ``DescribeLogDirs`` (``kafka-log-dirs --describe``) shows it: one
log directory, the volume's total and usable bytes (KIP-827), and each replica this node holds with its
size on disk and its lag (pure: the caller reads the replicas and the volume).

raftlog keeps every partition log of a node under one directory (``DATA_DIR/logs``), so a node has one
log dir. A replica's lag is in its Raft group's entries: those this replica knows to be committed and has
not applied to its log yet (``commit_index - last_applied``; 0 on a leader that is up to date), the
Raft counterpart of Kafka's ``high watermark - log end offset`` of the replica. A replica joining in a
move (a learner) reports the same from its own side; how far it is behind the leader is in ``GET
/v1/partitions/{topic}/{partition}`` (the leader's view).

A move of a replica to another log directory of its node (Kafka's ``AlterReplicaLogDirs``,
``kafka-reassign-partitions`` with ``log_dirs``) has one directory to go to: ``move_within`` says what
a move asked of this node comes to, as a Kafka broker with one log directory answers it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True, slots=True)
class ReplicaDir:
    topic: str
    partition: int
    size_bytes: int
    lag: int


@dataclass(frozen=True, slots=True)
class LogDir:
    path: str
    total_bytes: int  # the volume's size (-1: unknown)
    usable_bytes: int  # the room left on it (-1: unknown)
    replicas: tuple[ReplicaDir, ...]


def replica_lag(commit_index: int, last_applied: int) -> int:
    return max(0, commit_index - last_applied)


def log_dir(path: str, volume: tuple[int, int] | None, replicas: Iterable[ReplicaDir]) -> LogDir:
    """``volume``: (total, free) bytes of the volume holding ``path``; None when it could not be read."""
    total, usable = volume if volume is not None else (-1, -1)
    ordered = tuple(sorted(replicas, key=lambda r: (r.topic, r.partition)))
    return LogDir(path, total, usable, ordered)


class DirMove(Enum):
    """What a move of a replica to a log directory of this node comes to."""

    IN_PLACE = "in place"  # the replica is in that directory already: nothing to move, done
    NO_SUCH_DIR = "no such log directory"  # not this node's log directory
    NOT_HERE = "no replica here"  # the partition exists; this node holds no replica of it
    NO_SUCH_PARTITION = "no such partition"


def move_within(held: LogDir, topic: str, partition: int, path: str, exists: bool) -> DirMove:
    """A move of ``topic``'s ``partition`` to ``path`` asked of the node ``held`` describes (``exists``:
    the cluster has that partition). The path is compared as given, as Kafka compares it with its
    ``log.dirs`` (an absolute path, as DescribeLogDirs names it); the directory is checked first."""
    if path != held.path:
        return DirMove.NO_SUCH_DIR
    if any(r.topic == topic and r.partition == partition for r in held.replicas):
        return DirMove.IN_PLACE
    return DirMove.NOT_HERE if exists else DirMove.NO_SUCH_PARTITION
