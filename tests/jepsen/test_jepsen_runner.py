"""A short fault run end to end (real node processes, kill + pause, + partition when namespaces work;
workers on HTTP and on Kafka clients in turn): the history is valid, the verdict is valid (reads
included: a paused leader asked reads as it runs again answers none older than what its successor
acknowledged), and nothing is left behind: no namespace, link or process."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import verdicts
from available import assert_available
from planted import one_acknowledged_record_lost

from jepsen import control, lazyfs, run_config, runner
from jepsen.history import read_history
from raftlog.consensus.config import CoreConfig

SHORT_TIME_LIMIT_S = 27.0  # the seed's pause at 1.8-13.4 s, then kill and partition at 17.1-22.4 s
SHORT_SEED = 20261633
SHORT_FAULTS = ("kill", "pause", "partition")


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().decode("utf-8", errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry))
    return found


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.needs("netns")
def test_short_fault_run_keeps_every_acknowledged_record_and_cleans_up(tmp_path: pathlib.Path) -> None:
    config = run_config.RunConfig(
        nodes=3,
        faults=SHORT_FAULTS,
        time_limit_s=SHORT_TIME_LIMIT_S,
        rate=25.0,
        concurrency=5,
        directory=str(tmp_path / "runs"),
        netns=True,
        seed=SHORT_SEED,
        clients=("http", "kafka"),  # workers take turns: HTTP requests, confluent-kafka clients
    )
    result = runner.run(config)
    run_dir = pathlib.Path(result.run_dir)
    info = json.loads((run_dir / "run.json").read_text())

    # nothing left behind, whatever the verdict
    assert _processes_mentioning(str(run_dir)) == []
    assert control.leftover_namespaces(info["prefix"]) == []
    assert control.leftover_links(info["prefix"]) == []

    assert "harness_error" not in info, info.get("harness_error")
    assert info["network"] == "netns"
    history = read_history(run_dir / "history.jsonl")  # raises on a malformed history
    assert not history.truncated
    started = {e.get("fault") for e in history.nemesis if e.f == "start"}
    assert started, "the nemesis did nothing"
    assert started <= set(SHORT_FAULTS)
    starts = sum(1 for e in history.nemesis if e.f == "start")
    assert starts == sum(1 for e in history.nemesis if e.f == "stop"), "every fault was healed"
    doors = {(op.invoke.raw.get("client", "http"), op.f) for op in history.operations if op.type == "ok"}
    assert {("kafka", f) for f in ("send", "poll", "commit")} <= doors
    assert {("http", f) for f in ("send", "poll", "commit")} <= doors
    assert all(v["complete"] for v in info["final_read"].values()), info["final_read"]
    for node in ("n1", "n2", "n3"):
        assert (run_dir / "logs" / f"{node}.log").stat().st_size > 0
    results = json.loads((run_dir / "results.json").read_text())
    assert result.verdict == "valid", verdicts.account(run_dir)
    assert result.exit_code == runner.EXIT_VALID
    # the pause met a leader (jepsen/read_checker.py, paused_leaders): paused past the election timeout
    # while it led, its keys taken over by other nodes in a higher term meanwhile, and asked reads just as it
    # ran again, answered or refused; like every read, held to what was acknowledged before (stale-read)
    [paused] = [window for window in results["stats"]["paused_leaders"] if window["replaced"]]
    assert paused["paused_s"] > CoreConfig.for_node().election_timeout_max_ms / 1000, paused
    assert paused["reads"]["ok"] + paused["reads"]["fail"] >= 1, paused
    # availability measured against the run's own machine, in place of a count of acknowledged sends: each
    # heal's first acknowledged write within its bound, the spans without faults written and acknowledged
    # (tests/jepsen/available.py says each bound and why); a recovery past its bound breaks them
    assert_available(run_dir, results, config.planned_writes_per_s)
    # the run, short as it is, holds what the checker needs to catch a loss
    assert one_acknowledged_record_lost(run_dir / "history.jsonl")["verdict"] == "invalid"
    assert (run_dir / "index.html").stat().st_size > 0  # the report (the other runs in tests leave it out)


@pytest.mark.needs("netns")
def test_network_setup_and_teardown_leave_nothing_even_after_a_failure() -> None:
    prefix = control.new_prefix()
    claim = control.claim_subnet()
    network = control.Network(prefix, claim, control.plan_netns(3, prefix, claim.third_octet))
    try:
        network.setup()
        assert len(control.leftover_namespaces(prefix)) == 3
        assert f"{prefix}-br" in control.leftover_links(prefix)
        nodes = network.nodes
        network.cut(nodes[0], nodes[1])
        network.heal_all()
        ghost = control.NodeSpec(
            "n9", 1, 2, 3, 4, host="10.241.0.9", namespace=f"{prefix}-n9", link=f"{prefix}-n9"
        )
        with pytest.raises(control.ControlError):
            network.cut(ghost, nodes[0])  # no such namespace: a loud error, and teardown still cleans up
    finally:
        assert network.teardown() == []
    assert control.leftover_namespaces(prefix) == []
    assert control.leftover_links(prefix) == []
    assert claim.fd is None  # the subnet is released with the rest


@pytest.mark.needs("netns")
def test_runs_started_at_once_never_claim_the_same_subnet() -> None:
    """Two claims before either run adds an address (two workers starting their runs together): each gets
    its own /24, which the other sees as taken until it is released."""
    first = control.claim_subnet()
    try:
        second = control.claim_subnet()
        second.release()
        assert second.fd is None and second.third_octet != first.third_octet
    finally:
        first.release()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _kill_what_a_killed_run_left(run_dir: pathlib.Path) -> None:
    """The runner's own cleanup did not run (it was killed): its nodes live in their own sessions, and its
    namespaces and links stay, and both would load every later test. Remove them, as an operator would."""
    prefixes = set()
    for pid in _processes_mentioning(str(run_dir)):
        with contextlib.suppress(OSError):
            argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            if "--admin-token-file" in argv:  # the runner gives its nodes the token jepsen-<prefix>
                token = pathlib.Path(argv[argv.index("--admin-token-file") + 1]).read_text().strip()
                prefixes.add(token.removeprefix("jepsen-"))
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
    for prefix in prefixes:
        control.sweep(prefix)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_ctrl_c_in_the_middle_of_a_run_leaves_nothing_behind(tmp_path: pathlib.Path) -> None:
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "jepsen", "run", "--nodes", "3", "--nemesis", "kill,pause,partition",
            "--time-limit", "60", "--dir", str(runs), "--seed", "7"]  # fmt: skip
    # Ctrl-C as at a terminal: a test run started in the background (``cmd &`` in a script) inherits
    # SIGINT ignored, and Python then never turns it into KeyboardInterrupt, so the run went on to its end
    process = subprocess.Popen(
        argv,
        cwd=control.REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_default_sigint,
    )
    history: list[pathlib.Path] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            history = list(runs.glob("*/history.jsonl"))
            if history and len(history[0].read_text().splitlines()) > 100:
                break
            time.sleep(0.5)
        assert history, "the run never started its workload"
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            process.terminate()  # the runner cleans up on SIGTERM too; say what it printed meanwhile
            output, _ = process.communicate(timeout=60)
            pytest.fail("the run did not stop within 90 s of Ctrl-C:\n" + output.decode(errors="replace"))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
            if history:
                _kill_what_a_killed_run_left(history[0].parent)
    run_dir = history[0].parent
    info = json.loads((run_dir / "run.json").read_text())
    assert any("interrupted" in note for note in info["notes"]), output.decode(errors="replace")
    assert _processes_mentioning(str(run_dir)) == []
    assert control.leftover_namespaces(info["prefix"]) == []
    assert control.leftover_links(info["prefix"]) == []


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.needs("lazyfs")
def test_power_losses_on_lazy_file_systems_keep_every_acknowledged_record(tmp_path: pathlib.Path) -> None:
    """Every node's data directory on a lazy file system; the seed's schedule has a whole-cluster power
    loss (2-11 s) then a single node's (16-22 s): unsynced writes are dropped, nothing acknowledged is
    lost, and no mount or file system server is left behind."""
    netns, _ = control.netns_available()
    config = run_config.RunConfig(
        nodes=3,
        faults=("node-power-loss", "cluster-power-loss", "kill"),
        time_limit_s=25.0,
        rate=25.0,
        concurrency=4,
        directory=str(tmp_path / "runs"),
        netns=netns,
        seed=20261125,
        fs="lazy",
        report=False,
    )
    result = runner.run(config)
    run_dir = pathlib.Path(result.run_dir)
    info = json.loads((run_dir / "run.json").read_text())

    assert _processes_mentioning(str(run_dir)) == []  # nodes and file system servers
    assert lazyfs.mounted_under(lazyfs.FSNAME_PREFIX + info["prefix"]) == []
    assert control.leftover_namespaces(info["prefix"]) == []

    assert "harness_error" not in info, info.get("harness_error")
    assert info["fs"]["kind"] == "lazy"
    assert info["fs"]["direct_io"].startswith("O_DIRECT accepted"), info["fs"]
    assert info["faults_started"] == {"cluster-power-loss": 1, "node-power-loss": 1}, info["notes"]
    clears = sum(len(cleared) for cleared in info["fs"]["cleared"].values())
    assert clears == 3 + 1, info["fs"]["cleared"]  # every node's at the cluster's, one more at the node's
    assert info["restart_failures"] == []
    assert all(v["complete"] for v in info["final_read"].values()), info["final_read"]
    results = json.loads((run_dir / "results.json").read_text())
    assert result.verdict == "valid", verdicts.account(run_dir)
    # the run, short as it is, holds what the checker needs to catch a loss
    assert one_acknowledged_record_lost(run_dir / "history.jsonl")["verdict"] == "invalid"
    # availability, in place of 20 acknowledged sends of the ~375 planned: the whole cluster's recovery
    # from its power loss within twice its nodes' ready time and an election, and the writes of the spans
    # without faults (tests/jepsen/available.py); a recovery past its bound breaks them
    assert_available(run_dir, results, config.planned_writes_per_s)
