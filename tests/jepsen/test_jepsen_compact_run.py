"""A short fault run of the compaction workload end to end: keys overwritten and deleted on a compacted
topic through HTTP and Kafka clients in turn, under a node's power loss with a partition, then a kill
with a pause (the seed's schedule); the cleaners compact during the run, both final reads are
complete, each key ends with its last acknowledged write, and nothing is left behind."""

from __future__ import annotations

import json
import pathlib

import pytest
import verdicts
from available import assert_available
from test_jepsen_runner import _processes_mentioning

from jepsen import control, lazyfs, run_config, runner
from jepsen.history import read_history

# the schedule of this seed over 27 s: node-power-loss + partition at 2.8-10.8 s, kill + pause at
# 15.7-23.2 s (a whole-cluster power loss, which leaves the other faults nothing to do, does not fit as well)
SEED = 20261383
FAULTS = ("kill", "pause", "partition", "node-power-loss")


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.needs("netns", "lazyfs")
def test_compacted_keys_end_with_their_last_acknowledged_write_under_faults(tmp_path: pathlib.Path) -> None:
    config = run_config.RunConfig(
        nodes=3,
        faults=FAULTS,
        time_limit_s=27.0,
        rate=25.0,
        concurrency=4,
        directory=str(tmp_path / "runs"),
        netns=True,
        seed=SEED,
        clients=("http", "kafka"),
        fs="lazy",
        workload="compact",
        report=False,
    )
    result = runner.run(config)
    run_dir = pathlib.Path(result.run_dir)
    info = json.loads((run_dir / "run.json").read_text())

    assert _processes_mentioning(str(run_dir)) == []
    assert control.leftover_namespaces(info["prefix"]) == []
    assert lazyfs.mounted_under(lazyfs.FSNAME_PREFIX + info["prefix"]) == []

    assert "harness_error" not in info, info.get("harness_error")
    assert set(info["faults_started"]) == set(FAULTS), (info["faults_started"], info["notes"])
    assert all(v["complete"] for v in info["final_read"].values()), info["final_read"]
    cleaner = info["cleaner"]
    assert all(v["complete"] for v in cleaner["final_read_after_cleaning"].values()), cleaner
    assert cleaner["after_heal"]["cleaned"], cleaner["after_heal"]
    # a node's counter starts again at 0 when a fault restarts it, and its log may be cleaned already
    # (on a loaded machine, the node killed last removed nothing after its restart): the cluster's sum
    removed = [m["raftlog_cleaner_records_removed_total"] for m in cleaner["after_read"].values()]
    assert sum(removed) > 0, f"the cleaners removed no record during the run: {removed}"
    assert all(m.get("raftlog_cleaner_failures_total") == 0 for m in cleaner["after_read"].values())

    history = read_history(run_dir / "history.jsonl")
    acked = [op for op in history.operations if op.f == "send" and op.type == "ok"]
    assert any(op.invoke.get("tombstone") for op in acked), "no key was deleted"
    doors = {op.invoke.raw.get("client", "http") for op in acked}
    assert doors == {"http", "kafka"}
    results = json.loads((run_dir / "results.json").read_text())
    assert results["workload"] == "compact"
    assert result.verdict == "valid", verdicts.account(run_dir)
    # availability, in place of 30 acknowledged sends (50 before a loaded run was fitted): each heal's first
    # acknowledged write within twice its nodes' ready time and an election, and the writes of the spans
    # without faults (tests/jepsen/available.py); a recovery past its bound breaks them
    assert_available(run_dir, results, config.planned_writes_per_s)
