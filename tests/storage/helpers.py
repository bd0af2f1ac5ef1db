"""Shared helpers for the storage tests: a fake clock, record strategies, whole-log reads."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from raftlog.storage import Log, LogConfig, ProducerRecord, Record
from raftlog.storage.batch import decode_header

START_MS = 1_700_000_000_000
# Memory (tmpfs) on Linux: an fsync there returns at once, where the disk of a loaded 2-core machine takes
# about 3 ms for each. Used only with this much free: a container's /dev/shm may hold 64 MiB in all (the
# tests that use it took 11 MiB at their peak).
MEMORY_ROOT = "/dev/shm"
MEMORY_FREE_MIN_BYTES = 256 * 1024 * 1024


def memory_backed_dir(prefix: str) -> str:
    """A new folder in memory, for a test whose property is what a log holds and reads back, or what is
    left after a cut or a power loss the test makes itself (``test_crash.py`` cuts copies to the sizes it
    saw fsynced): its logs still write real files and make every fsync call, which returns at once. The
    system's temporary folder where ``/dev/shm`` is missing or short of room."""
    root = MEMORY_ROOT if _roomy(MEMORY_ROOT) else None
    return os.path.realpath(tempfile.mkdtemp(prefix=prefix, dir=root))  # as /proc/self/fd names its files


def _roomy(path: str) -> bool:
    try:
        free = os.statvfs(path)
    except OSError:  # no such folder
        return False
    return os.access(path, os.W_OK) and free.f_bavail * free.f_frsize >= MEMORY_FREE_MIN_BYTES


class FakeClock:
    """A clock the test moves by hand (milliseconds)."""

    def __init__(self, now_ms: int = START_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, delta_ms: int) -> int:
        self.now_ms += delta_ms
        return self.now_ms


def small_config(**overrides: object) -> LogConfig:
    """Tiny segments and a dense index, so few records exercise rolls and index lookups."""
    values: dict[str, object] = {"segment_bytes": 1024, "index_interval_bytes": 64, "retention_ms": -1}
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


header_strategy = st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8))

producer_records = st.builds(
    ProducerRecord,
    value=st.none() | st.binary(max_size=40),
    key=st.none() | st.binary(max_size=10),
    headers=st.lists(header_strategy, max_size=2).map(tuple),
    timestamp_ms=st.none() | st.integers(min_value=0, max_value=2**42),
)

record_lists = st.lists(producer_records, min_size=1, max_size=6)


def make_records(
    count: int, tag: str, size: int = 20, timestamp_ms: int | None = None
) -> list[ProducerRecord]:
    """``count`` distinguishable records whose values are ``size`` bytes."""
    return [
        ProducerRecord(
            value=f"{tag}-{i}-".encode().ljust(size, b"."), key=f"k{i}".encode(), timestamp_ms=timestamp_ms
        )
        for i in range(count)
    ]


def read_all(log: Log, offset: int | None = None, max_offset: int | None = None) -> list[Record]:
    """Every record from ``offset`` (default: log start) to the end, paging with a small byte budget."""
    offset = log.log_start_offset if offset is None else offset
    limit = log.end_offset if max_offset is None else max_offset
    out: list[Record] = []
    for _ in range(100_000):
        if offset >= limit:
            return out
        page = log.read(offset, 700, max_offset=limit)
        assert page, f"read at {offset} returned nothing below {limit}"
        out.extend(page)
        offset = page[-1].offset + 1
    raise AssertionError("read_all did not finish")


def as_stored(record: ProducerRecord, offset: int, now_ms: int) -> Record:
    """The record the log must return for ``record`` appended at ``offset`` with the clock at ``now_ms``."""
    return Record(
        offset=offset,
        timestamp_ms=now_ms if record.timestamp_ms is None else record.timestamp_ms,
        key=record.key,
        value=record.value,
        headers=tuple(record.headers),
    )


def file_sizes(directory: str) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))}


def file_contents(directory: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = f.read()
    return out


def copy_dir(source: str, target: str) -> str:
    shutil.copytree(source, target)
    return target


@dataclass(frozen=True)
class Snapshot:
    """Everything a user can observe about a log's contents."""

    log_start_offset: int
    end_offset: int
    records: tuple[Record, ...]


def snapshot(log: Log) -> Snapshot:
    return Snapshot(log.log_start_offset, log.end_offset, tuple(read_all(log)))


def brute_offset_for_timestamp(records: list[Record], timestamp_ms: int) -> int | None:
    """The first record in offset order with timestamp >= ``timestamp_ms``."""
    for record in records:
        if record.timestamp_ms >= timestamp_ms:
            return record.offset
    return None


def segment_paths(directory: str, suffix: str = ".log") -> list[str]:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(suffix))


def abandon(log: Log) -> None:
    """Simulate the process dying: drop the handle's descriptors without sealing or flushing anything."""
    for segment in log._segments:
        segment.close()
    log._closed = True


def corrupt_byte(path: str, position: int, mutate: Callable[[int], int] = lambda b: b ^ 0x40) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        original = f.read(1)[0]
        f.seek(position)
        f.write(bytes([mutate(original)]))


def batch_positions(path: str) -> list[tuple[int, int]]:
    """(position, size) of every whole batch in a data file, walking the length prefixes."""
    with open(path, "rb") as f:
        data = f.read()
    out, position = [], 0
    while position < len(data):
        size = decode_header(data, position).size_bytes
        if position + size > len(data):
            break
        out.append((position, size))
        position += size
    return out


def open_descriptors_under(directory: str | os.PathLike[str]) -> int:
    """How many of this process's open descriptors point at files under ``directory``."""
    prefix = os.fspath(directory)
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        count += target.startswith(prefix)
    return count
