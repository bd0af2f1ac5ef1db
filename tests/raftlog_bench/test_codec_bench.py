"""``raftlog bench codec``: every implementation and codec measured, the table names them, bad options
refused (numbers only: nothing here asserts a speed)."""

from __future__ import annotations

import json

from raftlog_bench import codec


def test_every_implementation_and_codec_is_measured(tmp_path, capsys) -> None:
    out = tmp_path / "codec.json"
    assert codec.main(["--record-size", "100", "--batch", "20", "--seconds", "0.01", "--json", str(out)]) == 0
    cells = json.loads(out.read_text())
    names = [c["implementation"] for c in cells]
    assert names == [
        "raftlog",
        "raftlog rows",
        "aiokafka (compiled)",
        "kafka-python",
        "raftlog v1 (before)",
        "none",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
    ]
    assert all(c["decode_us"] > 0 for c in cells)
    assert all(c["encode_us"] > 0 for c in cells if c["implementation"] != "raftlog rows")  # decode only
    ratios = {c["implementation"]: c["stored_ratio"] for c in cells}
    assert ratios["none"] == 1.0 and all(ratios[name] < 1.0 for name in ("gzip", "snappy", "lz4", "zstd"))
    table = capsys.readouterr().out
    assert all(name in table for name in names)


def test_bad_options_are_refused(capsys) -> None:
    assert codec.main(["--batch", "0"]) == 2
    assert "--batch" in capsys.readouterr().err


def test_json_alone_prints_json_and_leaves_the_table_to_stderr(capsys) -> None:
    """The CLI's one --json convention: the machine-readable answer on stdout, nothing else there."""
    assert codec.main(["--record-size", "100", "--batch", "20", "--seconds", "0.01", "--json"]) == 0
    printed = capsys.readouterr()
    cells = json.loads(printed.out)
    assert [c["implementation"] for c in cells][:2] == ["raftlog", "raftlog rows"]
    assert "raftlog bench codec (µs per record" in printed.err
