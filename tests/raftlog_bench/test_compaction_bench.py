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


def test_the_comparison_table_names_both_systems_and_bad_sizes_are_refused(capsys) -> None:
    from raftlog_bench import compaction_compare

    rows = [
        {"system": "raftlog", "records": 10, "produce_records_s": 5.0, "produce_servers_cpu_s": 0.1,
         "compacted_after_s": 15.5, "cleaning_servers_cpu_s": 1.0, "records_left": 2},
        {"system": "kafka", "records": 10, "produce_records_s": 4.0, "produce_servers_cpu_s": 0.2,
         "compacted_after_s": None, "cleaning_servers_cpu_s": 2.0, "records_left": 10},
    ]  # fmt: skip
    table = compaction_compare.format_table(rows, 3)
    assert "raftlog" in table and "kafka" in table and "15.5" in table
    assert compaction.main(["--compare", "kafka", "--compare-keys", "10", "--compare-records", "5"]) == 2
    assert "--compare-keys" in capsys.readouterr().err
