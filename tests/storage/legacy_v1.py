"""Writing batches of format v1 (raftlog's own before Kafka's RecordBatch v2) for tests, as the older
raftlog wrote them (``raftlog/storage/legacy_batch.py`` has the layout; ``test_legacy_v1_writer``
checks these bytes against the committed fixture's). Nothing but tests writes this format any more."""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

import crc32c
import msgpack

from raftlog.storage import ProducerRecord
from raftlog.storage.segment import segment_name

_COVERED = struct.Struct(">BBQIqqQqq")  # magic .. sequence: the header after length and CRC
_PREFIX = struct.Struct(">II")


def encode_v1(
    base_offset: int,
    records: Sequence[ProducerRecord],
    term: int,
    producer_id: int | None = None,
    sequence: int | None = None,
) -> bytes:
    """One v1 batch; every record must carry its timestamp and a value (v1 had no null values)."""
    timestamps = [r.timestamp_ms for r in records]
    assert all(isinstance(t, int) for t in timestamps) and all(r.value is not None for r in records)
    first = timestamps[0]
    rows = [
        [r.timestamp_ms - first, r.key, r.value, [[k, v] for k, v in r.headers]]  # type: ignore[operator]
        for r in records
    ]
    covered = _COVERED.pack(
        1,
        1 if producer_id is not None else 0,
        base_offset,
        len(records),
        first,
        max(timestamps),  # type: ignore[type-var]
        term,
        -1 if producer_id is None else producer_id,
        -1 if sequence is None else sequence,
    )
    body = msgpack.packb(rows, use_bin_type=True)
    return _PREFIX.pack(4 + len(covered) + len(body), crc32c.crc32c(covered + body)) + covered + body


def write_v1_log(directory: str, segments: Sequence[Sequence[bytes]]) -> list[str]:
    """A log directory as an older raftlog left it: each segment's batches back to back in its data file
    (named by the first batch's base offset), empty index files, no format marker. Returns the paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for batches in segments:
        base = struct.unpack_from(">Q", batches[0], 10)[0]
        path = os.path.join(directory, segment_name(base, ".log"))
        with open(path, "wb") as f:
            f.write(b"".join(batches))
        for suffix in (".index", ".timeindex"):
            open(os.path.join(directory, segment_name(base, suffix)), "wb").close()
        paths.append(path)
    return paths
