"""The upgrade fault for real: a short run whose nemesis restarts a node on the previous release's code
(``raftlog_dev.releases``, built under ``.releases/``) on the same data and back on this checkout's,
with workers on both doors: the verdict is valid, and the node did run the other code: on the previous
release it describes itself without a version (release 0.1.0 gossips none), back on this checkout with
this checkout's."""

from __future__ import annotations

import json
import pathlib

import pytest
import verdicts
from planted import one_acknowledged_record_lost

import raftlog
from jepsen import control, nemesis, run_config, runner
from jepsen.history import read_history

PREVIOUS = "0.1.0"


def test_upgrade_is_a_fault_of_its_own_outside_all() -> None:
    assert nemesis.parse_faults("upgrade,kill") == ("upgrade", "kill")
    assert "upgrade" not in nemesis.parse_faults("all")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_node_restarted_on_the_previous_release_and_back_loses_nothing(tmp_path: pathlib.Path) -> None:
    config = run_config.RunConfig(
        nodes=3,
        faults=("upgrade",),
        time_limit_s=12.0,  # one window: to the previous release at 1.9 s, back at 8.9 s
        rate=20.0,
        concurrency=4,
        directory=str(tmp_path / "runs"),
        netns=False,
        seed=20261126,
        clients=("http", "kafka"),
        upgrade_from=PREVIOUS,
        report=False,
    )
    result = runner.run(config)
    run_dir = pathlib.Path(result.run_dir)
    info = json.loads((run_dir / "run.json").read_text())
    assert "harness_error" not in info, info.get("harness_error")
    assert info["upgrade_from"]["version"] == PREVIOUS, info["notes"]

    history = read_history(run_dir / "history.jsonl")
    events = [e for e in history.nemesis if e.get("fault") == "upgrade"]
    starts = [e.get("value") for e in events if e.f == "start"]
    stops = [e.get("value") for e in events if e.f == "stop"]
    assert starts and len(starts) == len(stops), events
    for window, came in zip(starts, stops, strict=True):
        node, went = window["nodes"][0], came["started"]  # what the start did, in the stop's value
        assert (window["from"], window["to"], came["to"]) == ("checkout", PREVIOUS, "checkout"), came
        assert (went["from"], went["to"], came["from"]) == ("checkout", PREVIOUS, PREVIOUS), came
        assert went["ready"] and came["ready"], came
        assert went["reports"] == {"has_version": False, "version": None}, went  # the release's own code
        assert came["reports"] == {"has_version": True, "version": raftlog.version()}, came
        log = (run_dir / "logs" / f"{node}.log").read_text(errors="replace")
        assert f".releases/{PREVIOUS}/.venv/bin/python in " in log

    for node in ("n1", "n2", "n3"):  # every replica the previous release opened replayed what it found
        log = (run_dir / "logs" / f"{node}.log").read_text(errors="replace")
        assert "InvariantViolation" not in log and "cannot open or replay" not in log, node

    sends = [op for op in history.operations if op.f == "send"]
    assert sum(1 for op in sends if op.type == "ok") >= 50, "too few acknowledged sends to mean anything"
    assert all(v["complete"] for v in info["final_read"].values()), info["final_read"]
    assert result.verdict == "valid", verdicts.account(run_dir)
    assert control.REPO_ROOT in info["upgrade_from"]["tree"]
    # the run, short as it is, holds what the checker needs to catch a loss
    assert one_acknowledged_record_lost(run_dir / "history.jsonl")["verdict"] == "invalid"
