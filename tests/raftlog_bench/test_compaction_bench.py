"""``raftlog bench compaction``: both appends and both passes measured, what the passes keep checked
against each key's last value, bad options refused (numbers only: nothing here asserts a speed)."""

from __future__ import annotations

import json

from raftlog_bench import compaction


def test_both_appends_and_both_passes_are_measured(tmp_path, capsys) -> None:
    out = tmp_path / "compaction.json"
    argv = ["--mib", "1", "--keys", "500", "--dir", str(tmp_path), "--json", str(out)]
    assert compaction.main(argv) == 0
    results = json.loads(out.read_text())
    assert [a["policy"] for a in results["appends"]] == ["delete", "compact"]
    first, steady = results["passes"]
    assert first["records_removed"] > 0 and first["bytes_written"] < first["bytes_read"]
    assert steady["records_removed"] > 0 and first["cpu_s_per_gb"] > 0
    assert results["records_kept"][0] == 500  # each key once below the active segment
    assert "CPU s/GB" in capsys.readouterr().out
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("raftlog-bench-compaction-")]


def test_bad_options_are_refused(capsys) -> None:
    assert compaction.main(["--keys", "0"]) == 2
    assert "--keys" in capsys.readouterr().err
