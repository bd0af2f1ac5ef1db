"""``raftlog log migrate DATA_DIR`` on copies of the committed data directory of an older raftlog
(tests/fixtures/legacy-v1-datadir): what it prints, what it leaves, and what it refuses."""

from __future__ import annotations

import io
import json
import os
import pathlib
import shutil
import struct

import crc32c
import pytest

from raftlog.storage import Log
from raftlog.storage.dirlock import DirectoryLock
from raftlog.storage.log_format import FORMAT_FILE
from raftlog_cli import log_files
from raftlog_cli.cli import main

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "legacy-v1-datadir"
LOGS = ("audit-0.4", "orders-0.3", "orders-1.3")
_TERM_AT = 38  # a v1 batch's term (u64); its CRC (at 4) covers every byte from 8 on


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of the fixture: a folder holding node n1's data directory, as ``raftlog dev`` keeps it."""
    return pathlib.Path(shutil.copytree(FIXTURE, tmp_path / "cluster"))


def _logs(root: pathlib.Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted((root / "n1" / "logs").rglob("*"))
        if path.is_file()
    }


def _records(directory: pathlib.Path) -> list[tuple[int, int, bytes | None, bytes | None]]:
    with Log.open(str(directory)) as log:
        return [(r.offset, r.timestamp_ms, r.key, r.value) for r in log.read(0, 1 << 30)]


def test_migrate_rewrites_every_log_says_what_it_did_and_a_second_run_skips_them(root, capsys) -> None:
    assert main(["log", "migrate", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "[1/3] n1/logs/audit-0.4: converted 1 segment, 28 batches, 56 records, 3.0 KiB -> 2.9 KiB",
        "[2/3] n1/logs/orders-0.3: converted 2 segments, 37 batches, 77 records, 7.8 KiB -> 7.7 KiB",
        "[3/3] n1/logs/orders-1.3: converted 2 segments, 31 batches, 64 records, 6.5 KiB -> 6.4 KiB",
    ]
    assert lines[3].startswith(
        "3 logs in 1 data directory: converted 3 (197 records in 96 batches, 17.2 KiB), 0 already v2, "
        "0 without batches, 0 refused; "
    )
    expected = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
    end_offsets = {"audit-0.4": "audit/0", "orders-0.3": "orders/0", "orders-1.3": "orders/1"}
    for name in LOGS:
        records = _records(root / "n1" / "logs" / name)
        assert [r[0] for r in records] == list(range(expected["end_offsets"][end_offsets[name]]))
    migrated = _logs(root)

    assert main(["log", "migrate", str(root / "n1")]) == 0  # the node's own directory works as well
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"[{i}/3] logs/{name}: already Kafka RecordBatch v2: skipped" for i, name in enumerate(LOGS, 1)
    ]
    assert "converted 0 (0 records in 0 batches, 0 B), 3 already v2" in lines[3]
    assert _logs(root) == migrated


def test_a_dry_run_says_what_would_change_and_changes_no_log(root, capsys) -> None:
    before = _logs(root)
    assert main(["log", "migrate", "--dry-run", str(root)]) == 0
    out = capsys.readouterr().out
    assert "[2/3] n1/logs/orders-0.3: would convert 2 segments, 37 batches, 77 records, 7.8 KiB" in out
    assert "would convert 3 (197 records in 96 batches, 17.2 KiB)" in out
    assert _logs(root) == before


@pytest.mark.parametrize(("held", "owner"), [("n1", "node n1"), ("", "raftlog dev")])
def test_migrate_refuses_while_a_node_or_raftlog_dev_holds_the_directory(root, capsys, held, owner) -> None:
    before = _logs(root)
    with DirectoryLock.acquire(str(root / held), owner):
        assert main(["log", "migrate", str(root)]) == 1
    err = capsys.readouterr().err
    assert f"is in use by {owner} (pid {os.getpid()}" in err and "stop it first; nothing was changed" in err
    assert _logs(root) == before


def test_a_log_that_cannot_be_converted_is_refused_and_the_others_are_migrated(root, capsys) -> None:
    path = root / "n1" / "logs" / "orders-1.3" / "00000000000000000038.log"
    data = bytearray(path.read_bytes())
    struct.pack_into(">Q", data, _TERM_AT, 2**31)
    struct.pack_into(">I", data, 4, crc32c.crc32c(bytes(data[8 : 4 + struct.unpack_from(">I", data)[0]])))
    path.write_bytes(bytes(data))
    before = {k: v for k, v in _logs(root).items() if "orders-1.3" in k}
    assert main(["log", "migrate", str(root)]) == 1
    out = capsys.readouterr().out
    refused = f"[3/3] n1/logs/orders-1.3: REFUSED, nothing written: {path}: batch at byte 0: term 2147483648"
    assert refused + " at offset 38" in out
    assert (
        "converted 2 (133 records in 65 batches, 10.7 KiB), 0 already v2, 0 without batches, 1 refused" in out
    )
    assert {k: v for k, v in _logs(root).items() if "orders-1.3" in k} == before
    assert (root / "n1" / "logs" / "orders-0.3" / FORMAT_FILE).exists()


def test_a_directory_that_holds_no_node_is_a_usage_error(tmp_path, capsys) -> None:
    assert main(["log", "migrate", str(tmp_path)]) == 2
    assert "is no node data directory" in capsys.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_shows_the_bytes_converted(root) -> None:
    terminal = _Terminal()
    found = log_files.layout(str(root))
    assert found is not None
    assert log_files._migrate_nodes(str(root), found, False, terminal) == 0
    shown = terminal.getvalue()
    assert "\r\033[K[" in shown and f"[{'#' * log_files.BAR_WIDTH}] 100%  3/3 logs" in shown
    assert "[3/3] n1/logs/orders-1.3: converted 2 segments" in shown
