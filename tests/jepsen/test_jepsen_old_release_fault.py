"""The old-release fault (issue 71): a cluster formed by release 0.1.0, rolled to this checkout, the level
raised by the operator's command, then a node started again on 0.1.0 on its data and command line under
an idempotent producer, and back. A short real run: the window holds its proof (the other nodes' health
names the node kept out, it leads nothing, a leadership transfer to it is refused), every acknowledged
record is read back once, the replicas are byte for byte the same once the nodes stopped; and the same
run's history with the proof or the comparison planted away checks invalid, never valid. The checker's
rules each on a built window, without a cluster."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest
import verdicts
from available import assert_available
from planted import one_acknowledged_record_lost

from jepsen import cli, nemesis, old_release_checker, old_release_fault, run_config, runner, workload
from jepsen.checking import check
from jepsen.history import History, build, parse_lines, read_history

PREVIOUS = "0.1.0"
FAULT = old_release_fault.NAME
REASON = (
    "its code announces no feature levels (release 0.1.0); the cluster's raftlog.version is finalized at 2"
)


def test_old_release_is_declared_with_the_version_faults_outside_all() -> None:
    assert FAULT == old_release_checker.FAULT == "old-release"
    assert FAULT in nemesis.VERSION_FAULTS and FAULT in nemesis.PROCESS_FAULTS
    assert nemesis.parse_faults("old-release,kill") == ("old-release", "kill")
    assert FAULT not in nemesis.parse_faults("all")


def test_each_node_in_turn_the_next_free_one_when_it_is_busy() -> None:
    nodes = ["n1", "n2", "n3"]
    assert [old_release_fault.in_turn(nodes, nodes, turn) for turn in range(4)] == ["n1", "n2", "n3", "n1"]
    assert old_release_fault.in_turn(nodes, ["n1", "n3"], 1) == "n3"
    assert old_release_fault.in_turn(nodes, [], 0) is None


def test_the_answers_the_fault_reads_are_the_ones_the_http_door_gives() -> None:
    from api.errors import TABLE
    from partitions.errors import FeatureUpdateRefused, NodeKeptOut

    answer = {error: http for error, http in TABLE}
    assert (answer[NodeKeptOut].status, answer[NodeKeptOut].error_code) == (
        old_release_checker.KEPT_OUT_STATUS,
        old_release_checker.KEPT_OUT_ERROR_CODE,
    )
    assert answer[FeatureUpdateRefused].error_code == old_release_fault.FEATURE_REFUSED


# -- the checker's rules on a built window ----------------------------------------------------------------


def proven() -> dict[str, Any]:
    return {
        "node": "n1",
        "kept_out": {"n2": REASON, "n3": REASON},
        "leader_of": {"n2": 0, "n3": 0},
        "kept_out_after_s": 3.1,
        "transfer": {
            "topic": "t0",
            "partition": 0,
            "target": "n1",
            "status": 409,
            "error_code": 40934,
            "message": f"node n1 is kept out of the cluster: {REASON}",
        },
    }


IDENTICAL = {"exit": 0, "partitions": {"identical": 9}, "not_identical": [], "summary": "9 identical"}


def window(proof: dict[str, Any] | None, *, to: str = PREVIOUS, stopped: bool = True) -> History:
    """A history of one acknowledged send read back, and one window of the fault."""
    start = {"nodes": ["n1"], "from": "checkout", "to": to, "pid": 1}
    events: list[dict[str, Any]] = [
        {"process": "nemesis", "type": "info", "f": "start", "fault": FAULT, "value": start},
        {"process": 0, "type": "invoke", "f": "send", "key": "t0-0", "value": 1},
        {"process": 0, "type": "ok", "f": "send", "key": "t0-0", "offset": 0},
    ]
    if stopped:
        stop = {"nodes": ["n1"], "from": to, "to": "checkout", "pid": 2}
        events.append({"process": "nemesis", "type": "info", "f": "stop", "fault": FAULT,
                       "value": {**stop, **({"proof": proof} if proof is not None else {})}})  # fmt: skip
    events += [
        {"process": 1, "type": "invoke", "f": "poll", "key": "t0-0", "offset": 0, "final": True},
        {"process": 1, "type": "ok", "f": "poll", "key": "t0-0", "records": [[0, 1]], "final": True},
        {"process": 1, "type": "invoke", "f": "poll", "key": "t0-0", "offset": 1, "final": True},
        {"process": 1, "type": "ok", "f": "poll", "key": "t0-0", "records": [], "final": True},
    ]
    return build([{"index": i, "time": float(i), **e} for i, e in enumerate(events)])


def test_a_window_with_its_proof_and_identical_replicas_is_valid() -> None:
    results = check(window(proven()), replicas=IDENTICAL)
    assert results["verdict"] == "valid", results["reasons"]
    assert results["old_release"]["windows"][0]["proven"] is True
    assert results["anomaly_counts"][old_release_checker.UNPROVEN] == 0


def without(name: str) -> dict[str, Any]:
    return {k: v for k, v in proven().items() if k != name}


@pytest.mark.parametrize(
    ("history", "named"),
    [
        (window(None), "no proof recorded"),
        (window(proven(), stopped=False), "the window never ended"),
        (window(without("kept_out")), "no other node's health named it kept out"),
        (window({**proven(), "kept_out": {"n2": REASON, "n3": ""}}), "no other node's health named it"),
        (window({**proven(), "leader_of": {"n2": 0, "n3": 2}}), "not shown leading nothing"),
        (window(without("leader_of")), "not shown leading nothing"),
        (window(without("transfer")), "a leadership transfer to it was not refused as kept out"),
        (window({**proven(), "transfer": {"status": 200, "answer": {"leader": "n1"}}}), "was not refused"),
        (window({**proven(), "transfer": {"error": "Unavailable"}}), "was not refused"),
        (window({**proven(), "ready": True}), "it reported ready"),
        (window({**proven(), "exited": "Traceback"}), "it exited"),
        (window(proven(), to="checkout"), "started it on this checkout's code"),
    ],
)
def test_a_window_without_its_proof_makes_the_run_invalid(history: History, named: str) -> None:
    results = check(history, replicas=IDENTICAL)
    assert results["verdict"] == "invalid"
    assert results["anomaly_counts"][old_release_checker.UNPROVEN] == 1
    assert any(named in reason for reason in results["reasons"]), results["reasons"]


@pytest.mark.parametrize(
    ("replicas", "named"),
    [
        (None, "the replicas were not compared after the run"),
        ({"exit": 1, "not_identical": [{"partition": "t0-0.6"}], "summary": "1 differs"}, "exit 1: ['t0-0."),
        ({"exit": 2, "not_identical": [], "summary": "nothing to compare"}, "exit 2: nothing to compare"),
    ],
)
def test_replicas_not_compared_or_not_identical_make_the_run_invalid(
    replicas: dict[str, Any] | None, named: str
) -> None:
    results = check(window(proven()), replicas=replicas)
    assert results["verdict"] == "invalid"
    assert results["anomaly_counts"][old_release_checker.REPLICAS_DIFFER] == 1
    assert any(named in reason for reason in results["reasons"]), results["reasons"]


def test_a_run_that_compared_its_replicas_but_had_no_window_of_the_fault_is_invalid() -> None:
    history = build([{"index": 0, "time": 0.0, "process": 0, "type": "invoke", "f": "send", "key": "k",
                      "value": 1}])  # fmt: skip
    results = check(history, replicas=IDENTICAL)
    assert results["verdict"] == "invalid" and "no window started" in results["reasons"][-1]


def test_a_run_without_the_fault_is_judged_as_before() -> None:
    kept = [e.raw for e in window(proven()).events if not e.is_nemesis]
    history = build([{**raw, "index": index} for index, raw in enumerate(kept)])
    results = check(history)
    assert results["verdict"] == "valid" and "old_release" not in results
    assert old_release_checker.UNPROVEN not in results["anomaly_counts"]


# -- a real run ---------------------------------------------------------------------------------------------


def planted(run_dir: pathlib.Path, change: Any, replicas: Any = "as run") -> dict[str, Any]:
    """The checker's results on the run's history with ``change(events)`` applied to its events."""
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    change(events)
    compared = runner.compared_replicas(str(run_dir)) if replicas == "as run" else replicas
    return check(parse_lines([json.dumps(event) + "\n" for event in events]), replicas=compared)


def stop_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e.get("fault") == FAULT and e["f"] == "stop")


def on_this_checkout(events: list[dict[str, Any]]) -> None:
    """The window as the harness records it when the node was started on this checkout instead: it
    reports ready, nobody names it kept out, the transfer to it is done."""
    start = next(e for e in events if e.get("fault") == FAULT and e["f"] == "start")
    start["value"]["to"] = "checkout"
    proof = stop_of(events)["value"]["proof"]
    target = proof["transfer"]
    proof.update(ready=True, kept_out={}, leader_of={}, waited_s=None)
    proof["transfer"] = {k: target[k] for k in ("topic", "partition", "target")} | {"status": 200}
    proof.pop("kept_out_after_s", None)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_node_started_again_on_0_1_0_after_the_level_rose_is_kept_out_and_loses_nothing(
    tmp_path: pathlib.Path,
) -> None:
    config = run_config.RunConfig(
        nodes=3,
        faults=(FAULT,),
        time_limit_s=12.0,  # one window: n1 to the previous release at 1.9 s, back at 8.9 s or once proven
        rate=20.0,
        concurrency=4,  # worker 1 a Kafka idempotent producer, worker 0 an HTTP one (producer id, sequence)
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
    assert info["levels_raised"]["finalized"]["raftlog.version"] == 2, info["levels_raised"]
    results = json.loads((run_dir / "results.json").read_text())
    assert result.verdict == "valid", verdicts.account(run_dir)

    [shown] = results["old_release"]["windows"]
    node = shown["node"]
    assert shown["proven"] and shown["problems"] == [], shown
    assert set(shown["kept_out"]) == {"n1", "n2", "n3"} - {node}, shown
    assert all("release 0.1.0" in r and "finalized at 2" in r for r in shown["kept_out"].values()), shown
    assert (shown["transfer"]["status"], shown["transfer"]["error_code"]) == (409, 40934), shown
    history = read_history(run_dir / "history.jsonl")
    [stop] = [e for e in history.nemesis if e.get("fault") == FAULT and e.f == "stop"]
    assert (stop.get("value")["from"], stop.get("value")["to"]) == (PREVIOUS, "checkout"), stop.raw
    ready = [e for e in history.nemesis if e.f == "ready" and e.get("value")["node"] == node]
    assert ready and ready[0].time > stop.time, "the heal's node never reported ready on this checkout"
    log = (run_dir / "logs" / f"{node}.log").read_text(errors="replace")
    assert f".releases/{PREVIOUS}/.venv/bin/python in " in log  # its second life ran the release's code

    assert_available(run_dir, results, config.planned_writes_per_s)
    idempotent_kafka = [
        op for op in history.operations
        if op.f == "send" and op.type == "ok" and op.invoke.get("client") == "kafka"
        and workload.idempotent_worker(int(op.process), len(config.clients))
        and shown["start"] <= op.invoke.time < shown["stop"]
    ]  # fmt: skip
    assert idempotent_kafka, "no send of the idempotent Kafka producer acknowledged while the node was out"
    replicas = results["old_release"]["replicas"]
    assert replicas["exit"] == 0 and replicas["not_identical"] == [], replicas
    assert replicas["partitions"]["identical"] >= sum(config.topics.values()), replicas
    # the re-check of the directory reads the comparison too
    assert cli.main(["check", str(run_dir)]) == cli.EXIT_VALID

    # the same run with the proof, or the comparison, planted away: invalid, never valid
    for change, replicas_planted in [
        (lambda events: stop_of(events)["value"].pop("proof"), "as run"),
        (on_this_checkout, "as run"),
        (lambda events: None, None),
        (lambda events: None, {**replicas, "exit": 1, "not_identical": [{"partition": "t0-0.6"}]}),
    ]:
        assert planted(run_dir, change, copy.deepcopy(replicas_planted))["verdict"] == "invalid"
    assert one_acknowledged_record_lost(run_dir / "history.jsonl")["verdict"] == "invalid"
