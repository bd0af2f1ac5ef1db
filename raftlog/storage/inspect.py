"""Read-only inspection of a log directory: verify every batch, or dump records. Never modifies files
(unlike ``Log.open``, which repairs a torn tail)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from raftlog.storage.batch import BatchFormatError, Record, decode_records
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.segment import ScanStop, walk


@dataclass(slots=True)
class SegmentCheck:
    path: str
    base_offset: int
    end_offset: int
    size_bytes: int
    batches: int
    problem: str = ""


@dataclass(slots=True)
class VerifyReport:
    directory: str
    segments: list[SegmentCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(not s.problem for s in self.segments)

    @property
    def records(self) -> int:
        return sum(s.end_offset - s.base_offset for s in self.segments)


def _data_files(directory: str) -> list[tuple[int, str]]:
    found = []
    for name in os.listdir(directory):
        stem, _, suffix = name.partition(".")
        if suffix == "log" and stem.isdigit():
            found.append((int(stem), os.path.join(directory, name)))
    return sorted(found)


def verify_directory(directory: str) -> VerifyReport:
    """CRC-check and decode every batch, check offsets are dense within and across segments."""
    report = VerifyReport(directory)
    files = _data_files(directory)
    for position, (base, path) in enumerate(files):
        check = SegmentCheck(path, base, base, os.path.getsize(path), 0)
        report.segments.append(check)
        fd = os.open(path, os.O_RDONLY)
        try:
            for at, header, view in walk(fd, 0, check.size_bytes, verify=True):
                if header.base_offset != check.end_offset:
                    check.problem = (
                        f"byte {at}: batch offset {header.base_offset}, expected {check.end_offset}"
                    )
                    break
                decode_records(view, header)
                check.end_offset = header.end_offset
                check.batches += 1
        except ScanStop as stop:
            check.problem = f"byte {stop.position}: {stop.reason}"
        except BatchFormatError as exc:
            check.problem = f"offset {check.end_offset}: {exc}"
        finally:
            os.close(fd)
        if not check.problem and position + 1 < len(files) and check.end_offset != files[position + 1][0]:
            check.problem = (
                f"ends at offset {check.end_offset}, next segment starts at {files[position + 1][0]}"
            )
    return report


def dump_records(directory: str, from_offset: int = 0) -> Iterator[Record]:
    """Yield CRC-checked records from ``from_offset`` on, in offset order. At the first damaged batch
    raises ``CorruptRecord`` naming its data file and byte position, once every record before it has
    been yielded."""
    for _, path in _data_files(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            for position, header, view in walk(fd, 0, os.fstat(fd).st_size, verify=True):
                if header.end_offset <= from_offset:
                    continue
                try:
                    records = decode_records(view, header)
                except BatchFormatError as exc:
                    raise CorruptRecord(path, position, str(exc)) from None
                for record in records:
                    if record.offset >= from_offset:
                        yield record
        except ScanStop as stop:
            raise CorruptRecord(path, stop.position, stop.reason) from None
        finally:
            os.close(fd)
