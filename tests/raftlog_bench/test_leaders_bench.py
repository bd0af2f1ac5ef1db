"""raftlog bench leaders: the table it prints from a result, and options refused before any cluster
starts (the measurement itself starts a cluster and burners: docs/performance.md has its numbers)."""

from __future__ import annotations

import pytest

from raftlog_bench.leaders import _table
from raftlog_cli.cli import main as cli_main


def test_the_table_ends_with_the_leader_changes_per_minute_and_says_why_and_under_what_load() -> None:
    result = {
        "burners": 4,
        "duration_s": 120.0,
        "partitions": 200,
        "rate": 5000,
        "partition_elections": 3,
        "controller_elections": 1,
        "leader_changes_per_minute": 2.0,
        "load_average": {"min": 13.3, "mean": 20.1, "max": 24.3},
        "load": {"produced": 10, "produce_errors": 0, "consumed": 9, "errors": {"produce queue full": 2}},
        "leader_changes_by_cause": {"check_quorum": 1, "election": 3},
        "failover_s": [2.1, 2.5, 3.0],
    }
    table = _table(result)
    assert "load average (1 min) during the window: min 13.3, mean 20.1, max 24.3" in table
    assert "elections: partitions 3, controller 1" in table
    assert "leader changes by cause: check_quorum 1, election 3" in table
    assert "failover after kill -9 of a leader (s, 3 trials): min 2.1, median 2.5, max 3.0" in table
    assert "client errors: produce queue full 2" in table
    assert table.splitlines()[-1] == "leader changes per minute: 2.0"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--duration", "5"], "--duration must be in"),
        (["--burners", "-1"], "--burners must be in"),
        (["--failovers", "101"], "--failovers must be in"),
    ],
)
def test_bad_options_are_refused_before_any_cluster_starts(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["bench", "leaders", *argv]) == 2
    assert said in capsys.readouterr().err
