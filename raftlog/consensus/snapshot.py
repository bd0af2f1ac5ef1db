"""The snapshot file of a Raft group: the state machine's snapshot, the last and previous entries it
covers and the configuration at its index, as CRC-checked msgpack (never pickle). Written with fsync and
read back by :class:`~raftlog.consensus.core.RaftCore`, which ships it to followers that fell behind."""

from __future__ import annotations

import struct
from collections.abc import Collection
from typing import Any

import crc32c
import msgpack

from raftlog.consensus.errors import CorruptSnapshot
from raftlog.consensus.membership import Membership

SNAPSHOT_MAGIC = b"RLSNAP01"
_SNAPSHOT_HEADER = struct.Struct("<8sII")  # magic, crc32c(body), len(body)


def encode_snapshot(
    state: bytes,
    last: tuple[bytes, int, int],
    prev: tuple[bytes, int, int],
    cluster: Collection[str],
    learners: Collection[str] = (),
) -> bytes:
    """``cluster``: the voters (the key older snapshots also use: each of them held only voters);
    ``learners``: the learners, a key older snapshots lack (read as none)."""
    body: bytes = msgpack.packb(
        {
            "state": state,
            "last": list(last),
            "prev": list(prev),
            "cluster": sorted(cluster),
            "learners": sorted(learners),
        },
        use_bin_type=True,
    )
    return _SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, crc32c.crc32c(body), len(body)) + body


def decode_snapshot(path: str, data: bytes) -> dict[str, Any]:
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshot(path, f"{len(data)} bytes is shorter than the header")
    magic, crc, length = _SNAPSHOT_HEADER.unpack_from(data)
    body = data[_SNAPSHOT_HEADER.size :]
    if magic != SNAPSHOT_MAGIC:
        raise CorruptSnapshot(path, f"bad magic {magic!r}")
    if length != len(body) or crc32c.crc32c(body) != crc:
        raise CorruptSnapshot(path, f"length {len(body)}/{length} or crc mismatch")
    decoded: dict[str, Any] = msgpack.unpackb(body, raw=False)
    return decoded


def snapshot_membership(snapshot: dict[str, Any]) -> Membership:
    """The configuration a decoded snapshot records (one written before learners has no ``learners``)."""
    learners = frozenset(str(node) for node in snapshot.get("learners", ()))
    return Membership(frozenset(str(node) for node in snapshot["cluster"]) - learners, learners)
