"""franz-go's own integration suite (github.com/twmb/franz-go v1.21.5, ``pkg/kgo``, unchanged) against a
3-node raftlog cluster and then against a 3-node Apache Kafka (KRaft) on the same machine, one after the
other; a table of every top-level test's result on each, and a verdict that fails when a test that passes
on Kafka fails, is skipped or never ends on raftlog.

    .venv/bin/python scripts/franz_go_suite.py [--burners 4] [--kill] [--timeout-min 25] [--dir DIR]
    make franz-go FRANZ_GO_ARGS="--burners 4 --kill"

The suite's source is the Go module proxy's, as a dependency of ``scripts/franz_go`` (go.mod pins
franz-go v1.21.5 and go.sum its hashes); the Go toolchain is ``scripts/go_toolchain.sh``'s, and Kafka is
the repo's reference (``scripts/kafka/install.sh``). Each system runs ``go test -count=1 -v`` of the
package (compiled once, run under ``go tool test2json``) with ``KGO_SEEDS`` naming its three Kafka
listeners, ``KGO_TEST_RF=3``, ``KGO_TEST_RECORDS=20000`` and a SCRAM-SHA-256 user made with the admin
client for the two SCRAM tests (``KGO_TEST_SCRAM``, ``KGO_TEST_SCRAM_SEEDS``). raftlog is a default
``raftlog dev`` cluster (``--serve-arg`` adds node options); Kafka is ``raftlog_bench.kafka_peer``'s.

``--burners N``: N CPU-bound processes run during both suites (each ends by itself at its run's time
bound). ``--kill``: while TestGroupETL and then TestTxnEtl run, one node (broker 2, then broker 3) is
killed with SIGKILL, kept down a few seconds and started again, on either system. Each run is bounded by
go test's ``-timeout`` (``--timeout-min``), every wait here by its own bound. The logs (test2json events,
each node's logs) stay in ``--dir``; the table and verdict go to stdout, also as ``results.json``.
Exit status 1 when the verdict fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from suite_cpu import burners  # noqa: E402  (this script's folder)

from raftlog_bench.kafka_peer import KafkaCluster  # noqa: E402
from raftlog_client.local_cluster import LocalCluster  # noqa: E402

MODULE = ROOT / "scripts" / "franz_go"  # go.mod: github.com/twmb/franz-go v1.21.5
PACKAGE = "github.com/twmb/franz-go/pkg/kgo"
SYSTEMS = ("raftlog", "kafka")  # run in this order, one cluster at a time
SUITE_ENV = {"KGO_TEST_RF": "3", "KGO_TEST_RECORDS": "20000"}
KILLED_DURING = {"TestGroupETL": 2, "TestTxnEtl": 3}  # test -> broker id killed while it runs
BUILD_TIMEOUT_S = 900.0
SCRAM_TIMEOUT_S = 60.0
START_TIMEOUT_S = 300.0  # the 3 nodes ready (raftlog dev's own start bound): minutes on a machine at load 40
RESTART_TIMEOUT_S = 330.0  # a restart's own bounds: raftlog dev's control 300 s, Kafka's start 120 s
GRACE_S = 120.0  # past go test's own -timeout (which panics with every goroutine's stack) before a kill
KEY_LINE = re.compile(r"^\s*(?:\w+_test\.go:\d+: |panic: |fatal error: )")
NOT_KEY = re.compile(r"deleting topic|deleting group|completed in|NOT DELETING")  # the suite's own chatter
FINAL = ("pass", "fail", "skip")


@dataclasses.dataclass
class TestResult:
    """One test's (or subtest's) outcome on one system: pass, fail, skip, ``died`` (started but the run
    ended first: a panic of the binary or the time bound) or ``not run``."""

    status: str = "not run"
    elapsed_s: float = 0.0
    lines: list[str] = dataclasses.field(default_factory=list)  # its output's key lines (errors, skip reason)


@dataclasses.dataclass
class SuiteRun:
    system: str
    results: dict[str, TestResult]  # top-level tests and subtests ("TestA/sub")
    exit_code: int | None
    seconds: float
    load: tuple[float, float]  # 1-minute load average at the start and at the end
    events: list[str]  # what the killer did, with the seconds since the run began
    package_lines: list[str]  # key lines printed outside any test (a panic of a goroutine)

    def top(self) -> dict[str, TestResult]:
        return {name: result for name, result in self.results.items() if "/" not in name}


def go_binary() -> str:
    done = subprocess.run(
        [str(ROOT / "scripts" / "go_toolchain.sh")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=True,
    )
    return done.stdout.strip()


def go_env() -> dict[str, str]:
    """The Go commands' environment: modules as go.sum pins them, no toolchain fetched behind our back."""
    return {**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"}


def build_suite(go: str, directory: pathlib.Path, run: str) -> tuple[pathlib.Path, list[str]]:
    """``go test -c`` of franz-go's pkg/kgo from the module cache (the proxy's copy, checked against
    go.sum); the test binary, and its top-level tests that ``run`` selects (``-test.list``)."""
    binary = directory / "kgo.test"
    print(f"franz-go: building {PACKAGE} tests (franz-go v1.21.5, {go})", file=sys.stderr, flush=True)
    subprocess.run([go, "mod", "download"], cwd=MODULE, env=go_env(), check=True, timeout=BUILD_TIMEOUT_S)
    subprocess.run(
        [go, "test", "-c", "-o", str(binary), PACKAGE],
        cwd=MODULE,
        env=go_env(),
        check=True,
        timeout=BUILD_TIMEOUT_S,
    )
    listed = subprocess.run(
        [str(binary), "-test.list", run], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    return binary, [name for name in listed if name.startswith("Test")]


def package_dir(go: str) -> str:
    """pkg/kgo's folder in the module cache: where ``go test`` runs the binary."""
    return subprocess.run(
        [go, "list", "-f", "{{.Dir}}", PACKAGE], cwd=MODULE, env=go_env(), capture_output=True, text=True,
        timeout=120, check=True,
    ).stdout.strip()  # fmt: skip


class Cluster:
    """One system's 3-node cluster, the servers the suite is given, and a node killed and restarted."""

    def __init__(self, system: str, directory: pathlib.Path, serve_args: list[str]) -> None:
        self.system = system
        self._raftlog: LocalCluster | None = None
        self._kafka: KafkaCluster | None = None
        if system == "raftlog":
            self._raftlog = LocalCluster(str(directory), nodes=3, serve_args=serve_args)
        else:
            self._kafka = KafkaCluster(str(directory))

    def start(self) -> None:
        print(f"franz-go: starting {self.system} (3 nodes)", file=sys.stderr, flush=True)
        if self._raftlog is not None:
            self._raftlog.start(START_TIMEOUT_S)
        elif self._kafka is not None:
            self._kafka.start()

    def stop(self) -> None:
        if self._raftlog is not None:
            self._raftlog.stop()
        elif self._kafka is not None:
            self._kafka.stop()

    @property
    def bootstrap(self) -> str:
        if self._raftlog is not None:
            return self._raftlog.bootstrap_servers
        assert self._kafka is not None
        return self._kafka.bootstrap_servers

    @property
    def sasl_bootstrap(self) -> str:
        """Where a SCRAM login goes: raftlog's Kafka listeners offer SASL; Kafka has SASL_PLAINTEXT ones."""
        if self._kafka is not None:
            return self._kafka.sasl_bootstrap_servers
        return self.bootstrap

    def kill(self, broker: int) -> None:
        """SIGKILL broker ``broker`` (raftlog's node ``n<broker>``)."""
        if (
            self._raftlog is not None
        ):  # at once: `raftlog dev stop --kill` takes seconds to start on a busy machine
            os.kill(self._raftlog.pids[f"n{broker}"], signal.SIGKILL)
        elif self._kafka is not None:
            self._kafka.kill(broker - 1)

    def restart(self, broker: int) -> None:
        """Start it again on its data; returns once it (Kafka: every broker) is up."""
        if self._raftlog is not None:
            self._raftlog.control("start", f"n{broker}")
        elif self._kafka is not None:
            self._kafka.restart(broker - 1)


def scram_user(bootstrap: str) -> tuple[str, str] | None:
    """A SCRAM-SHA-256 user made with AlterUserScramCredentials, once it can be described (Kafka's brokers
    learn it from the metadata log a moment later); None, saying why, when the cluster refuses."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    user, password = "franzgo", secrets.token_hex(8)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode()
    )
    deadline = time.monotonic() + SCRAM_TIMEOUT_S
    try:
        made = admin.alter_user_scram_credentials([upsert])
        assert isinstance(made, dict)
        made[user].result(SCRAM_TIMEOUT_S)
        while True:
            try:
                # held: a dropped dict cancels its futures
                asked = admin.describe_user_scram_credentials([user])
                assert isinstance(asked, dict)
                asked[user].result(10)
                return user, password
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    except Exception as exc:  # KafkaException, a timeout: the SCRAM tests then skip
        print(f"franz-go: no SCRAM user ({exc}); the SCRAM tests will skip", file=sys.stderr, flush=True)
        return None


class Killer:
    """``--kill``: ``after_s`` after a test of ``KILLED_DURING`` starts or continues (or once the kill
    before it is done, whichever is later), while it runs, its broker is killed with SIGKILL, kept down
    ``down_s`` and started again; one kill at a time, each test's once. ``events`` says what was done, in
    seconds since ``began``."""

    def __init__(self, cluster: Cluster, began: float, after_s: float, down_s: float) -> None:
        self.cluster = cluster
        self.began = began
        self.after_s = after_s
        self.down_s = down_s
        self.events: list[str] = []
        self._running: set[str] = set()
        self._lock = threading.Lock()
        self._pending: list[tuple[str, float]] = []  # (test, when its kill is due)
        self._killed: set[str] = set()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="killer", daemon=True)
        self._thread.start()

    def saw(self, action: str, test: str) -> None:
        """A test2json event of a top-level test: a parallel test runs, pauses at once, and continues
        when a slot frees (go test's -parallel, GOMAXPROCS), so each run or cont schedules its kill anew."""
        with self._lock:
            if action in ("run", "cont"):
                self._running.add(test)
                queued = any(name == test for name, _ in self._pending)
                if test in KILLED_DURING and test not in self._killed and not queued:
                    self._pending.append((test, time.monotonic() + self.after_s))
            elif action in ("pause", *FINAL):
                self._running.discard(test)

    def _note(self, text: str) -> None:
        line = f"{time.monotonic() - self.began:7.1f}s {text}"
        print(f"franz-go: {self.cluster.system}: {line}", file=sys.stderr, flush=True)
        self.events.append(line)

    def _next(self) -> str | None:
        """The test whose kill is due while it runs; None once stopped."""
        while True:
            with self._lock:
                if self._stopped:
                    return None
                if self._pending and self._pending[0][1] <= time.monotonic():
                    test, _ = self._pending.pop(0)
                    if test in self._running:
                        self._killed.add(test)
                        return test
                    continue  # paused: its next cont schedules it again
            time.sleep(0.2)

    def _loop(self) -> None:
        while (test := self._next()) is not None:
            broker = KILLED_DURING[test]
            try:
                self.cluster.kill(broker)
                self._note(f"{test}: broker {broker} killed (SIGKILL)")
                back = time.monotonic() + self.down_s
                while time.monotonic() < back and not self._stopped:
                    time.sleep(0.2)
                self.cluster.restart(broker)  # also when the run ended meanwhile: the cluster stops whole
                self._note(f"{test}: broker {broker} started again")
            except Exception as exc:  # a node that did not come back is the run's to report
                self._note(f"{test}: broker {broker} kill or restart failed: {exc}")

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._thread.join(RESTART_TIMEOUT_S + 30)


def run_suite(
    go: str,
    binary: pathlib.Path,
    tests: list[str],
    cluster: Cluster,
    directory: pathlib.Path,
    timeout_min: float,
    run: str,
    kill: Callable[[float], Killer] | None,
) -> SuiteRun:
    """The suite against ``cluster`` (started and stopped by the caller): test2json's events into
    ``directory/<system>.jsonl``, each test's outcome and key lines."""
    env = {**go_env(), **SUITE_ENV, "KGO_SEEDS": cluster.bootstrap}
    scram = scram_user(cluster.bootstrap)
    if scram is not None:
        env["KGO_TEST_SCRAM"] = f"{scram[0]}:{scram[1]}"
        env["KGO_TEST_SCRAM_SEEDS"] = cluster.sasl_bootstrap
    argv = [go, "tool", "test2json", "-t", "-p", PACKAGE, str(binary), "-test.v=test2json", "-test.count=1"]
    argv += [f"-test.timeout={timeout_min:g}m", f"-test.run={run}"]
    results: dict[str, TestResult] = {name: TestResult() for name in tests}
    package_lines: list[str] = []
    load_start = os.getloadavg()[0]
    began = time.monotonic()
    killer = kill(began) if kill is not None else None
    print(f"franz-go: {cluster.system}: go test {PACKAGE} -count=1 -v (KGO_SEEDS={cluster.bootstrap})",
          file=sys.stderr, flush=True)  # fmt: skip
    events_path = directory / f"{cluster.system}.jsonl"
    with open(events_path, "w", encoding="utf-8") as events:
        process = subprocess.Popen(
            argv, cwd=package_dir(go), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        watchdog = threading.Timer(
            timeout_min * 60 + GRACE_S, process.kill
        )  # test2json, and its child with it
        watchdog.start()
        try:
            _read_events(process.stdout, events, results, package_lines, killer, cluster.system)
            exit_code = process.wait(60)
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
                process.wait(30)
            if killer is not None:
                killer.stop()
    for result in results.values():
        if result.status == "running":
            result.status = "died"
    return SuiteRun(
        cluster.system,
        results,
        exit_code,
        time.monotonic() - began,
        (load_start, os.getloadavg()[0]),
        killer.events if killer is not None else [],
        package_lines,
    )


def _read_events(
    stream: IO[str] | None,
    events: IO[str] | None,
    results: dict[str, TestResult],
    package_lines: list[str],
    killer: Killer | None,
    system: str,
) -> None:
    assert stream is not None
    for raw in stream:
        if events is not None:
            events.write(raw)
        try:
            event: dict[str, Any] = json.loads(raw)
        except ValueError:  # a line test2json did not frame
            continue
        action, test = str(event.get("Action", "")), str(event.get("Test", ""))
        if not test:
            output = str(event.get("Output", ""))
            if action == "output" and is_key(output) and len(package_lines) < 40:
                package_lines.append(output.rstrip())
            continue
        result = results.setdefault(test, TestResult())
        if action == "run":
            result.status = "running"
        elif action in FINAL:
            result.status = action
            result.elapsed_s = float(event.get("Elapsed", 0.0))
            if "/" not in test and events is not None:  # progress, while it runs
                print(
                    f"franz-go: {system}: {test} {action} ({result.elapsed_s:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        elif action == "output":
            output = str(event.get("Output", ""))
            if is_key(output) and len(result.lines) < 8:
                result.lines.append(output.strip())
        if killer is not None and "/" not in test:
            killer.saw(action, test)


def is_key(output: str) -> bool:
    """Whether a line of a test's output says why it failed or skipped (an error, a panic)."""
    return bool(KEY_LINE.match(output)) and not NOT_KEY.search(output)


def compare(runs: dict[str, SuiteRun], tests: list[str]) -> tuple[list[list[str]], list[str]]:
    """The table's rows (test, Kafka, raftlog: every top-level test, and each subtest whose results
    differ) and the tests and subtests that pass on Kafka and not on raftlog."""
    rows, worse = [], []
    names = sorted(set(tests).union(*(run.results for run in runs.values())))
    for name in names:
        found = {system: run.results.get(name, TestResult()).status for system, run in runs.items()}
        if found.get("kafka") == "pass" and found.get("raftlog", "pass") != "pass":
            worse.append(name)
        if "/" not in name or len(set(found.values())) > 1:
            rows.append([name, found.get("kafka", "-"), found.get("raftlog", "-")])
    return rows, worse


def counts(run: SuiteRun) -> dict[str, int]:
    tally: dict[str, int] = {}
    for result in run.top().values():
        tally[result.status] = tally.get(result.status, 0) + 1
    return tally


def report(runs: dict[str, SuiteRun], tests: list[str], title: str) -> bool:
    """Prints the table, each run's counts, raftlog's failures and the verdict; whether it passes."""
    rows, worse = compare(runs, tests)
    width = max(len(row[0]) for row in rows)
    print(f"\n{title}\n")
    print(f"{'test':<{width}}  {'kafka':<8} {'raftlog':<8}")
    for name, on_kafka, on_raftlog in rows:
        mark = "  <-- worse on raftlog" if name in worse else ""
        print(f"{name:<{width}}  {on_kafka:<8} {on_raftlog:<8}{mark}")
    print()
    for system, run in runs.items():
        tally = ", ".join(f"{count} {status}" for status, count in sorted(counts(run).items()))
        print(
            f"{system}: {tally}; {run.seconds:.0f} s, exit {run.exit_code}, "
            f"load {run.load[0]:.1f} -> {run.load[1]:.1f}"
        )
        for event in run.events:
            print(f"  {event}")
    raftlog = runs.get("raftlog")
    if raftlog is not None:
        failing = [
            (n, r)
            for n, r in sorted(raftlog.results.items())
            if r.status in ("fail", "skip", "died") and r.lines
        ]
        if failing or raftlog.package_lines:
            print("\nraftlog's failures and skips (key lines):")
        for name, result in failing:
            print(f"  {name} ({result.status}):")
            for line in dict.fromkeys(result.lines):
                print(f"      {line[:300]}")
        for line in dict.fromkeys(raftlog.package_lines):
            print(f"  (outside a test) {line[:300]}")
    verdict = not worse and len(runs) == len(SYSTEMS)
    print(f"\nverdict: {'PASS' if verdict else 'FAIL'}: {len(worse)} tests and subtests pass on Kafka and "
          f"fail, skip or never end on raftlog{': ' + ', '.join(worse) if worse else ''}")  # fmt: skip
    return verdict


def title(options: argparse.Namespace) -> str:
    when = datetime.datetime.now(datetime.UTC)
    kill = (
        f"a node SIGKILLed {options.kill_after:g} s into TestGroupETL and TestTxnEtl"
        if options.kill
        else "no kill"
    )
    return (
        f"franz-go v1.21.5 pkg/kgo, KGO_TEST_RF=3 KGO_TEST_RECORDS=20000; {options.burners} burners, {kill}; "
        f"{when:%Y-%m-%d %H:%M} UTC"
    )


def reported(directory: pathlib.Path) -> int:
    """``--from DIR``: the report of an earlier run again, each test's outcome read anew from its
    test2json events (``<system>.jsonl``), the rest from its results.json."""
    with open(directory / "results.json", encoding="utf-8") as f:
        saved = json.load(f)
    runs = {}
    for system in SYSTEMS:
        if system not in saved:
            continue
        run = saved[system]
        results: dict[str, TestResult] = {}
        package_lines: list[str] = []
        with open(directory / f"{system}.jsonl", encoding="utf-8") as events:
            _read_events(events, None, results, package_lines, None, system)
        for result in results.values():
            result.status = "died" if result.status == "running" else result.status
        run.update(results=results, load=tuple(run["load"]), package_lines=package_lines)
        runs[system] = SuiteRun(**run)
    tests = sorted({name for run in runs.values() for name in run.top()})
    return 0 if report(runs, tests, str(saved.get("title", f"the run in {directory}"))) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--burners", type=int, default=0, help="CPU-bound processes during both runs")
    parser.add_argument(
        "--kill", action="store_true", help="SIGKILL a node during TestGroupETL and TestTxnEtl"
    )
    parser.add_argument(
        "--kill-after", type=float, default=10.0, help="seconds into the test before its kill"
    )
    parser.add_argument("--down", type=float, default=5.0, help="seconds a killed node stays down")
    parser.add_argument(
        "--timeout-min", type=float, default=25.0, help="go test -timeout of each run, minutes"
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="which to run (default: raftlog,kafka)")
    parser.add_argument("--serve-arg", action="append", default=[], help="an option for every raftlog node")
    parser.add_argument("--run", default=".*", help="go test -run: which tests (default: all)")
    parser.add_argument("--dir", help="where logs and results stay (default: a new temporary folder)")
    parser.add_argument("--from", dest="source", help="print the report of an earlier run's --dir again")
    options = parser.parse_args(argv)
    if options.source:
        return reported(pathlib.Path(options.source))
    systems = [s for s in SYSTEMS if s in options.systems.split(",")]
    directory = pathlib.Path(options.dir or tempfile.mkdtemp(prefix="franz-go-suite-")).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    go = go_binary()
    binary, tests = build_suite(go, directory, options.run)
    runs: dict[str, SuiteRun] = {}
    bound_s = options.timeout_min * 60 + GRACE_S
    for system in systems:
        cluster = Cluster(system, directory / system, options.serve_arg)

        def killer(began: float, cluster: Cluster = cluster) -> Killer:
            return Killer(cluster, began, options.kill_after, options.down)

        with burners(options.burners, bound_s + 300):
            cluster.start()
            try:
                runs[system] = run_suite(
                    go,
                    binary,
                    tests,
                    cluster,
                    directory,
                    options.timeout_min,
                    options.run,
                    killer if options.kill else None,
                )
            finally:
                cluster.stop()
    heading = title(options)
    with open(directory / "results.json", "w", encoding="utf-8") as f:
        json.dump({"title": heading, **{s: dataclasses.asdict(r) for s, r in runs.items()}}, f, indent=1)
    verdict = report(runs, tests, heading)
    print(f"logs: {directory}")
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
