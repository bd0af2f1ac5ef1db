"""Opening a log whose sealed segment is damaged: refused as ever without ``damaged_to``; with it, the
damaged segment and every later one are moved aside unchanged, the log ends where the damaged segment
began with every record before it intact, takes appends from there, and opens cleanly afterwards."""

from __future__ import annotations

import os
import pathlib

import pytest

from raftlog.storage import Log
from raftlog.storage.errors import CorruptRecord

from .helpers import (
    FakeClock,
    batch_positions,
    corrupt_byte,
    make_records,
    read_all,
    segment_paths,
    small_config,
)


def filled(directory: pathlib.Path, batches: int = 40) -> list[str]:
    log = Log.open(str(directory), small_config(), clock=FakeClock())
    for i in range(batches):
        log.append(make_records(1 + i % 3, f"b{i}", size=20 + i))
    log.close()
    paths = segment_paths(str(directory))
    assert len(paths) >= 4, "the test needs several sealed segments"
    return paths


def contents(paths: list[str]) -> dict[str, bytes]:
    return {os.path.basename(p): pathlib.Path(p).read_bytes() for p in paths}


@pytest.mark.parametrize("damaged", [1, 0], ids=["a middle segment", "the first segment"])
@pytest.mark.parametrize("damage", ["a flipped byte", "a cut file"])
def test_a_damaged_sealed_segment_is_set_aside_whole_and_the_log_ends_where_it_began(
    tmp_path: pathlib.Path, damaged: int, damage: str
) -> None:
    logs = tmp_path / "log"
    paths = filled(logs)
    whole = Log.open(str(logs), small_config(), clock=FakeClock())
    before = read_all(whole)
    whole.close()
    target = paths[damaged]
    if damage == "a flipped byte":
        position, size = batch_positions(target)[-1]  # the tail, which open checks
        corrupt_byte(target, position + size - 2)
    else:
        os.truncate(target, os.path.getsize(target) - 5)
    later = [p for p in segment_paths(str(logs)) if p >= target]
    logs_before = contents(later)

    with pytest.raises(CorruptRecord) as refused:
        Log.open(str(logs), small_config(), clock=FakeClock())
    assert refused.value.path == target
    assert contents(later) == logs_before, "a refused open changes no data file (indexes are rebuilt)"
    indexes = [p.replace(".log", suffix) for p in later for suffix in (".index", ".timeindex")]
    set_aside = contents(later + [p for p in indexes if os.path.exists(p)])

    aside = tmp_path / "damaged"
    log = Log.open(str(logs), small_config(), clock=FakeClock(), damaged_to=str(aside))
    base = int(os.path.basename(target).split(".")[0])
    salvage = log.open_report.salvage
    assert salvage is not None and salvage.end_offset == base and target in salvage.damage
    assert contents([str(p) for p in aside.iterdir()]) == set_aside, "moved whole and unchanged"
    assert sorted(salvage.moved) == sorted(str(p) for p in aside.iterdir())
    assert log.end_offset == base
    assert read_all(log) == [r for r in before if r.offset < base]
    appended = log.append(make_records(2, "again"))
    assert appended.base_offset == base
    log.close()

    reopened = Log.open(str(logs), small_config(), clock=FakeClock())
    assert reopened.open_report.salvage is None and reopened.end_offset == base + 2
    assert [r.offset for r in read_all(reopened)] == [r.offset for r in before if r.offset < base] + [
        base,
        base + 1,
    ]
    reopened.close()


def test_an_undamaged_log_opens_as_ever_with_damaged_to_given(tmp_path: pathlib.Path) -> None:
    logs = tmp_path / "log"
    paths = filled(logs)
    before = contents(paths)
    log = Log.open(str(logs), small_config(), clock=FakeClock(), damaged_to=str(tmp_path / "damaged"))
    assert log.open_report.salvage is None and not (tmp_path / "damaged").exists()
    log.close()
    assert contents(paths) == before
