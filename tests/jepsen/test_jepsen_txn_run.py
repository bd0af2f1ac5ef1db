"""Short fault runs of the transactional workload end to end: transactions through confluent-kafka under a
node's power loss with a partition, then a kill with a pause, are all-or-nothing as read_committed readers
see them, through Kafka consumers and the HTTP API (valid), and nothing is left behind; and with the
negative control (every node applies abort markers as commits) the same workload is invalid, naming
aborted transactions whose records were read."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from available import assert_available
from test_jepsen_runner import _processes_mentioning

from jepsen import control, lazyfs, run_config, runner
from jepsen.history import read_history

# a seed whose schedule starts each of FAULTS at least once (the test checks that it did): a node's power
# loss with a partition at 2.8-10.8 s, a kill with a pause at 15.7-23.2 s
SEED = 20261383
FAULTS = ("kill", "pause", "partition", "node-power-loss")
TIME_LIMIT_S = 27.0  # the two windows above, and the recovery after the first
# transactions ended in all (three of them sending offsets): the faulted window ends 13-20 on a quiet
# machine, as few as 5 on a loaded one,
# so the healed cluster goes on until this many (run_config.RunConfig.min_ends); one in ABORT_ONE_IN aborts
# deliberately, so about 22 commit and 8 abort
MIN_ENDS = 30


def _run(tmp_path: pathlib.Path, **settings: Any) -> tuple[runner.RunResult, dict[str, Any], dict[str, Any]]:
    config = run_config.RunConfig(
        nodes=3,
        rate=20.0,
        concurrency=4,
        directory=str(tmp_path / "runs"),
        netns=True,
        workload="txn",
        report=False,
        **settings,
    )
    result = runner.run(config)
    run_dir = pathlib.Path(result.run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    assert _processes_mentioning(str(run_dir)) == []
    assert control.leftover_namespaces(info["prefix"]) == []
    assert "harness_error" not in info, info.get("harness_error")
    results = json.loads((run_dir / "results.json").read_text())
    assert results["workload"] == "txn"
    return result, info, results


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.needs("netns", "lazyfs")
def test_transactions_are_all_or_nothing_under_faults(tmp_path: pathlib.Path) -> None:
    result, info, results = _run(
        tmp_path,
        faults=FAULTS,
        time_limit_s=TIME_LIMIT_S,
        seed=SEED,
        fs="lazy",
        clients=("http", "kafka"),  # polls through both doors in turn
        min_ends=MIN_ENDS,
    )
    assert lazyfs.mounted_under(lazyfs.FSNAME_PREFIX + info["prefix"]) == []
    assert set(info["faults_started"]) == set(FAULTS), (info["faults_started"], info["notes"])
    assert set(info["init"].values()) == {"ok"}, info["init"]  # every open transaction was ended
    assert all(v["read_committed"]["complete"] for v in info["final_read"].values()), info["final_read"]
    stats = results["stats"]
    committed = stats["transactions"].get("committed", 0)
    assert committed >= 15, stats["transactions"]
    assert stats["transactions"].get("aborted, deliberately", 0) >= 3, stats["transactions"]
    assert stats["aborted_values_seen_by_read_uncommitted"] >= 3, "aborted transactions wrote records"
    assert stats["transactions_sending_offsets"] >= 2
    history = read_history(pathlib.Path(result.run_dir) / "history.jsonl")
    doors = {
        (op.invoke.raw.get("client", "http"), op.invoke.raw.get("isolation"))
        for op in history.operations
        if op.f == "poll" and op.type == "ok" and op.result("records")
    }
    assert doors >= {(door, "read_committed") for door in ("http", "kafka")}, doors
    assert result.verdict == "valid", (result.run_dir, results["reasons"], results["anomaly_counts"])
    # availability: each heal's first transaction whose records were acknowledged within twice its nodes'
    # ready time and an election, and the transactions of the spans without faults (the healed cluster's
    # --min-ends among them: tests/jepsen/available.py); a recovery past its bound breaks them
    assert_available(pathlib.Path(result.run_dir), results, info["planned_writes_per_s"])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_broken_marker_path_is_caught(tmp_path: pathlib.Path) -> None:
    result, _, results = _run(
        tmp_path, faults=(), time_limit_s=8.0, seed=7, clients=("kafka",), break_markers="flip-abort"
    )
    log = (pathlib.Path(result.run_dir) / "logs" / "n1.log").read_text(errors="replace")
    assert "marker path broken on purpose" in log
    assert result.verdict == "invalid", (results["reasons"], results["stats"]["transactions"])
    aborted_reads = results["anomalies"]["aborted-read"]
    assert aborted_reads and aborted_reads[0]["outcome"].startswith("abort requested")
    assert any(f"txn {aborted_reads[0]['txn']}" in reason for reason in results["reasons"])
