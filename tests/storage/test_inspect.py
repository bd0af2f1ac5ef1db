"""Inspecting a damaged log: ``dump_records`` and ``raftlog log dump`` say where the damage is."""

from __future__ import annotations

import json
import pathlib

import pytest

from raftlog.storage import Log
from raftlog.storage.errors import CorruptRecord
from raftlog.storage.inspect import dump_records
from raftlog_cli.cli import main

from .helpers import batch_positions, corrupt_byte, make_records, segment_paths, small_config


def _damaged_log(directory: pathlib.Path) -> tuple[str, int]:
    """Three batches of two records; the second batch's body corrupted. Returns (data file, its byte)."""
    log = Log.open(str(directory), small_config())
    for i in range(3):
        log.append(make_records(2, f"b{i}"))
    log.close()
    path = segment_paths(str(directory))[0]
    position, size = batch_positions(path)[1]
    corrupt_byte(path, position + size - 2)
    return path, position


def test_dump_yields_the_records_before_the_damage_then_names_file_and_position(tmp_path) -> None:
    path, position = _damaged_log(tmp_path)
    seen = []
    with pytest.raises(CorruptRecord) as raised:
        for record in dump_records(str(tmp_path)):
            seen.append(record.offset)
    assert seen == [0, 1]
    assert (raised.value.path, raised.value.position) == (path, position)
    assert "crc32c" in raised.value.reason


def test_log_dump_command_prints_records_then_the_damage_and_exits_non_zero(tmp_path, capsys) -> None:
    path, position = _damaged_log(tmp_path)
    code = main(["log", "dump", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 1
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [0, 1]
    assert err.splitlines() == [
        f"raftlog log dump: corrupt record batch in {path} at byte {position}: "
        f"crc32c mismatch in batch at offset 2"
    ]


def test_log_dump_of_a_sound_log_exits_zero(tmp_path, capsys) -> None:
    log = Log.open(str(tmp_path), small_config())
    log.append(make_records(3, "ok"))
    log.close()
    assert main(["log", "dump", str(tmp_path), "--offset", "1"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [1, 2]
    assert err == ""
