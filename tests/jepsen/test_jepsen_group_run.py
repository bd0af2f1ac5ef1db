"""Short fault runs of the consumer-group workload end to end: producers, three members of one group (the
classic protocol's, then KIP-848's consumer group protocol's) and a monitor (confluent-kafka) against
three real nodes while the group's coordinator is killed (kill -9, found with FindCoordinator) and
restarted, with kills, pauses and partitions besides: no record
is consumed by two members at once, no committed offset goes backwards or is lost, every acknowledged
record is consumed, and nothing is left behind.

On main before the group's members were replicated (issue 53, item 1) this run is invalid: the new
coordinator knows no member, the first to rejoin is given every partition while the others still consume
theirs (overlapping-ownership; jepsen/README.md, "Consumer groups", records the run)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from available import assert_available
from planted import one_acknowledged_record_lost, one_record_consumed_twice
from required_tools import require
from test_jepsen_runner import _processes_mentioning

from jepsen import control, run_config, runner

SEED = 5353  # kill-coordinator at 3.9-12.9 s, then again with a pause at 18.3-24.0 s and at 27.9-38.2 s
TIME_LIMIT_S = 45.0


def group_run(tmp_path: pathlib.Path, faults: tuple[str, ...], group_protocol: str) -> dict[str, Any]:
    """One short run of the group workload under ``faults``: VALID, drained, nothing left behind, and
    the history holds enough to catch a loss. Returns its results."""
    require("netns")
    config = run_config.RunConfig(
        nodes=3,
        faults=(*faults, "partition"),
        time_limit_s=TIME_LIMIT_S,
        rate=30.0,
        concurrency=6,
        directory=str(tmp_path / "runs"),
        netns=True,
        seed=SEED,
        workload="group",
        group_protocol=group_protocol,
        clients=("kafka",),
        report=False,
    )
    result = runner.run(config)
    run_dir = pathlib.Path(result.run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    assert _processes_mentioning(str(run_dir)) == []
    assert control.leftover_namespaces(info["prefix"]) == []
    assert "harness_error" not in info, info.get("harness_error")
    assert info["faults_started"].get("kill-coordinator", 0) >= 1, (info["faults_started"], info["notes"])
    assert info["group"]["drained"], info["group"]
    results: dict[str, Any] = json.loads((run_dir / "results.json").read_text())
    assert results["workload"] == "group"
    assert result.verdict == "valid", (result.run_dir, results["reasons"], results["anomaly_counts"])
    # availability, in place of 120 acknowledged sends (200 before the third window was cut): each heal's
    # first acknowledged write within twice its nodes' ready time and an election, and the writes of the
    # spans without faults (tests/jepsen/available.py); a recovery past its bound breaks them
    assert_available(run_dir, results, config.planned_writes_per_s)
    # the committed-offset checks need commits to judge: 20, as this run (45 s, three windows) asked before
    # its third window was cut and the floor scaled down to 12
    assert results["stats"]["commits"].get("ok", 0) >= 20, results["stats"]["commits"]
    # the run, short as it is, holds what the checker needs to catch a loss and a double consumption
    assert one_acknowledged_record_lost(run_dir / "history.jsonl")["verdict"] == "invalid"
    doubled = one_record_consumed_twice(run_dir / "history.jsonl")
    assert doubled["anomaly_counts"]["same-generation-overlap"] >= 1, doubled["anomaly_counts"]
    return {**results, "run_info": info}


@pytest.mark.slow
@pytest.mark.timeout(720)  # 1.5 min on a quiet machine; over 6 beside the whole suite and more
def test_a_consumer_group_keeps_its_members_through_coordinator_kills(tmp_path: pathlib.Path) -> None:
    results = group_run(tmp_path, ("kill-coordinator", "kill", "pause"), "classic")
    assert results["stats"]["protocol"] == "classic"
    assert results["run_info"]["group"]["group_type"] == "classic", results["run_info"]["group"]


@pytest.mark.slow
@pytest.mark.timeout(720)
def test_a_kip848_consumer_group_keeps_its_members_and_epochs_through_coordinator_kills(
    tmp_path: pathlib.Path,
) -> None:
    """The same run with every member of the consumer group protocol (``group.protocol=consumer``): the
    coordinator assigns incrementally, each member in its member epoch; killing the coordinator leaves
    the group, its epochs and assignments with the next (replicated), and no partition is consumed by
    two members at once (``jepsen/group_checker.py``, the consumer protocol's rules)."""
    results = group_run(tmp_path, ("kill-coordinator", "kill", "pause"), "consumer")
    stats = results["stats"]
    assert stats["protocol"] == "consumer" and len(stats["generations"]) >= 2, stats
    assert results["run_info"]["group"]["group_type"] == "consumer", results["run_info"]["group"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_share_group_of_http_members_loses_and_doubles_no_record_through_kills(
    tmp_path: pathlib.Path,
) -> None:
    """The share group workload (``--workload share``): producers and three HTTP members of one share
    group accepting, releasing, rejecting and holding records while nodes are killed and paused; after
    the heal the members drain the topic. No record is accepted twice, delivered after its acceptance or
    lost, and delivery counts only rise (``jepsen/share_checker.py``)."""
    config = run_config.RunConfig(
        nodes=3,
        faults=("kill", "pause"),
        time_limit_s=25.0,
        rate=20.0,
        concurrency=4,
        directory=str(tmp_path / "runs"),
        netns=False,
        seed=SEED,
        workload="share",
        clients=("http",),
    )
    result = runner.run(config)
    run_dir = pathlib.Path(result.run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    assert _processes_mentioning(str(run_dir)) == []
    assert "harness_error" not in info, info.get("harness_error")
    assert info["share"]["drained"], (info["share"], info["notes"])
    results = json.loads((run_dir / "results.json").read_text())
    assert results["workload"] == "share"
    stats = results["stats"]
    assert stats["sent"] >= 100 and stats["accepted"] >= 50 and stats["redeliveries"] >= 1, stats
    assert result.verdict == "valid", (result.run_dir, results["reasons"], results["anomaly_counts"])
