"""franz-go's own integration suite (github.com/twmb/franz-go v1.21.5, ``pkg/kgo``, unchanged) against a
3-node raftlog cluster and then against a 3-node Apache Kafka (KRaft) on the same machine, one after the
other; a table of every top-level test's result on each, and an absolute verdict against the recorded
expectation ``scripts/franz_go/expected.json`` (what the suite does against Kafka on a quiet machine; the
rules: ``franz_go_verdict.py``): FAIL unless raftlog ended every listed test and passed every one Kafka
passes there, and every ``--kill`` kill landed; INCONCLUSIVE when raftlog did but the Kafka run beside it
did not. A raftlog failure is never excused by Kafka failing too.

    .venv/bin/python scripts/franz_go_suite.py [--burners 4] [--kill] [--timeout-min 25] [--dir DIR]
    make franz-go FRANZ_GO_ARGS="--burners 4 --kill"
    .venv/bin/python scripts/franz_go_suite.py --record      # Kafka alone, quiet: expected.json anew

The suite's source is the Go module proxy's, as a dependency of ``scripts/franz_go`` (go.mod pins
franz-go v1.21.5 and go.sum its hashes); the Go toolchain is ``scripts/go_toolchain.sh``'s, and Kafka is
the repo's reference (``scripts/kafka/install.sh``). Each system runs ``go test -count=1 -v`` of the
package (compiled once, run under ``go tool test2json``) with ``KGO_SEEDS`` naming its three Kafka
listeners, ``KGO_TEST_RF=3``, ``KGO_TEST_RECORDS=20000`` and a SCRAM-SHA-256 user made with the admin
client for the two SCRAM tests (``KGO_TEST_SCRAM``, ``KGO_TEST_SCRAM_SEEDS``). raftlog is a default
``raftlog dev`` cluster (``--serve-arg`` adds node options); Kafka is ``raftlog_bench.kafka_peer``'s.

``--burners N``: N CPU-bound processes run during both suites (each ends by itself at its run's time
bound). ``--kill``: while TestGroupETL and then TestTxnEtl run, one node (broker 2, then broker 3) is
killed with SIGKILL, seen gone, kept down a few seconds, started again and seen back (a new process,
ready, its Kafka listener answering), on either system; a kill that did not land within its test's run
fails the verdict. ``--run`` selects a part, whose verdict is FAIL (fewer tests than the suite holds). Each
run is bounded by go test's ``-timeout`` (``--timeout-min``), every wait here by its own bound. The logs
(test2json events, each node's logs) stay in ``--dir``; the table and verdict go to stdout, the run also
to ``results.json`` (``--from DIR`` judges it again). Exit status 1 unless the verdict is PASS.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from franz_go_clusters import Cluster, Killer, scram_user  # noqa: E402  (this script's folder)
from franz_go_verdict import (  # noqa: E402
    FINAL,
    KILLED_DURING,
    Expectation,
    Kill,
    NotRecordable,
    SuiteRun,
    TestResult,
    expectation_from,
    judge,
    merged,
    read_events,
    report_lines,
    settle,
)
from suite_cpu import burners  # noqa: E402

from raftlog_bench.kafka_peer import KAFKA_VERSION  # noqa: E402

MODULE = ROOT / "scripts" / "franz_go"  # go.mod: github.com/twmb/franz-go v1.21.5
EXPECTATION = MODULE / "expected.json"  # what the suite does against Kafka on a quiet machine (--record)
PACKAGE = "github.com/twmb/franz-go/pkg/kgo"
SYSTEMS = ("raftlog", "kafka")  # run in this order, one cluster at a time
SUITE_ENV = {"KGO_TEST_RF": "3", "KGO_TEST_RECORDS": "20000"}
BUILD_TIMEOUT_S = 900.0
GRACE_S = 120.0  # past go test's own -timeout (which panics with every goroutine's stack) before a kill


def franz_go_version() -> str:
    """The franz-go go.mod requires (the suite compiled)."""
    for line in (MODULE / "go.mod").read_text(encoding="utf-8").splitlines():
        words = line.split()
        if "github.com/twmb/franz-go" in words:
            return words[words.index("github.com/twmb/franz-go") + 1]
    raise RuntimeError(f"{MODULE / 'go.mod'} requires no github.com/twmb/franz-go")


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


def build_suite(go: str, directory: pathlib.Path) -> pathlib.Path:
    """``go test -c`` of franz-go's pkg/kgo from the module cache (the proxy's copy, checked against
    go.sum): the test binary."""
    binary = directory / "kgo.test"
    print(
        f"franz-go: building {PACKAGE} tests (franz-go {franz_go_version()}, {go})",
        file=sys.stderr,
        flush=True,
    )
    subprocess.run([go, "mod", "download"], cwd=MODULE, env=go_env(), check=True, timeout=BUILD_TIMEOUT_S)
    subprocess.run(
        [go, "test", "-c", "-o", str(binary), PACKAGE],
        cwd=MODULE,
        env=go_env(),
        check=True,
        timeout=BUILD_TIMEOUT_S,
    )
    return binary


def listed(binary: pathlib.Path, run: str = ".*") -> list[str]:
    """The compiled suite's top-level tests that ``run`` selects (``-test.list``; not its benchmarks,
    fuzz targets or examples)."""
    names = subprocess.run(
        [str(binary), "-test.list", run], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    return [name for name in names if name.startswith("Test")]


def package_dir(go: str) -> str:
    """pkg/kgo's folder in the module cache: where ``go test`` runs the binary."""
    return subprocess.run(
        [go, "list", "-f", "{{.Dir}}", PACKAGE], cwd=MODULE, env=go_env(), capture_output=True, text=True,
        timeout=120, check=True,
    ).stdout.strip()  # fmt: skip


def cpu_sample() -> tuple[float, float, float]:
    """(now, CPU seconds the whole machine spent since boot, CPU seconds this process and its children
    waited for spent): two apart give the CPU other work used between them."""
    with open("/proc/stat", encoding="ascii") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    spent = os.times()
    ours = spent.user + spent.system + spent.children_user + spent.children_system
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    return time.monotonic(), busy, ours


def others_cpus(before: tuple[float, float, float], after: tuple[float, float, float]) -> float:
    """The CPUs other work kept busy on average between two samples (never below 0: the clocks' ticks)."""
    return max(0.0, ((after[1] - before[1]) - (after[2] - before[2])) / (after[0] - before[0]))


def run_suite(
    go: str,
    binary: pathlib.Path,
    cluster: Cluster,
    directory: pathlib.Path,
    timeout_min: float,
    run: str,
    load_before: float,
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
    results: dict[str, TestResult] = {}
    package_lines: list[str] = []
    began_at, began = time.time(), time.monotonic()
    killer = kill(began) if kill is not None else None

    def seen(action: str, test: str, event: dict[str, Any]) -> None:
        if "/" in test:
            return
        if action in FINAL:  # progress, while it runs
            elapsed = float(event.get("Elapsed", 0.0))
            print(
                f"franz-go: {cluster.system}: {test} {action} ({elapsed:.1f} s)", file=sys.stderr, flush=True
            )
        if killer is not None:
            killer.saw(action, test)

    print(f"franz-go: {cluster.system}: go test {PACKAGE} -count=1 -v (KGO_SEEDS={cluster.bootstrap})",
          file=sys.stderr, flush=True)  # fmt: skip
    with open(directory / f"{cluster.system}.jsonl", "w", encoding="utf-8") as events:
        process = subprocess.Popen(
            argv, cwd=package_dir(go), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        watchdog = threading.Timer(
            timeout_min * 60 + GRACE_S, process.kill
        )  # test2json, and its child with it
        watchdog.start()
        try:
            assert process.stdout is not None
            read_events(_kept(process.stdout, events), results, package_lines, seen)
            exit_code = process.wait(60)
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
                process.wait(30)
            if killer is not None:
                killer.stop()
    settle(results)
    return SuiteRun(
        cluster.system,
        results,
        exit_code,
        time.monotonic() - began,
        (load_before, os.getloadavg()[0]),
        killer.kills if killer is not None else [],
        package_lines,
        began_at,
    )


def _kept(lines: Any, copy: Any) -> Any:
    """``lines``, each written to ``copy`` as it passes."""
    for line in lines:
        copy.write(line)
        yield line


def title(options: argparse.Namespace) -> str:
    when = datetime.datetime.now(datetime.UTC)
    kill = (
        f"a node SIGKILLed {options.kill_after:g} s into TestGroupETL and TestTxnEtl"
        if options.kill
        else "no kill"
    )
    part = "" if options.run == ".*" else f", -run {options.run}"
    return (
        f"franz-go {franz_go_version()} pkg/kgo, KGO_TEST_RF=3 KGO_TEST_RECORDS=20000{part}; "
        f"{options.burners} burners, {kill}; {when:%Y-%m-%d %H:%M} UTC"
    )


def save(
    directory: pathlib.Path,
    heading: str,
    options: dict[str, Any],
    names: list[str],
    runs: dict[str, SuiteRun],
) -> None:
    """The run in ``directory/results.json`` (each test's outcome is read again from the events)."""
    saved = {
        "title": heading,
        "options": options,
        "listed": names,
        "versions": [franz_go_version(), KAFKA_VERSION],
        "runs": {
            system: {k: v for k, v in dataclasses.asdict(run).items() if k != "results"}
            for system, run in runs.items()
        },
    }
    with open(directory / "results.json", "w", encoding="utf-8") as f:
        json.dump(saved, f, indent=1)


def load(directory: pathlib.Path) -> tuple[str, dict[str, Any], list[str], dict[str, SuiteRun]]:
    """``save``'s run again: title, options, the suite's list and each system's run, each test's outcome
    read anew from its test2json events (``<system>.jsonl``)."""
    with open(directory / "results.json", encoding="utf-8") as f:
        saved = json.load(f)
    if "runs" not in saved:
        raise SystemExit(
            f"{directory}/results.json is of an older runner, without the suite's list and kills"
        )
    runs = {}
    for system, run in saved["runs"].items():
        results: dict[str, TestResult] = {}
        package_lines: list[str] = []
        with open(directory / f"{system}.jsonl", encoding="utf-8") as events:
            read_events(events, results, package_lines)
        settle(results)
        run.update(results=results, load=tuple(run["load"]), package_lines=package_lines)
        run["kills"] = [Kill(**kill) for kill in run["kills"]]
        runs[system] = SuiteRun(**run)
    return saved["title"], saved["options"], saved["listed"], runs


def verdict(heading: str, options: dict[str, Any], names: list[str], runs: dict[str, SuiteRun]) -> int:
    """Prints the table and the verdict against expected.json; the exit status (0 only for PASS)."""
    expected = expectation()
    plan = KILLED_DURING if options.get("kill") else None
    judged = judge(expected, names, runs, plan, (franz_go_version(), KAFKA_VERSION))
    print("\n".join(report_lines(runs, expected, judged, heading)))
    return 0 if judged.passed else 1


def record(
    options: dict[str, Any], names: list[str], runs: dict[str, SuiteRun], command: str, heading: str
) -> int:
    """A whole, quiet Kafka run added to expected.json (``merged``: what Kafka passed in any recording stays
    expected); exit 1, saying why, when the run cannot stand as one."""
    if "kafka" not in runs:
        print("franz-go: --record needs a Kafka run", file=sys.stderr)
        return 1
    conditions = {key: options.get(key) for key in ("burners", "kill", "run", "cpus")}
    try:
        fresh = expectation_from(runs["kafka"], names, franz_go_version(), KAFKA_VERSION, conditions)
    except NotRecordable as exc:
        print(f"franz-go: not recorded: {exc}", file=sys.stderr)
        return 1
    began = datetime.datetime.fromtimestamp(runs["kafka"].began_at, datetime.UTC)
    fresh.recorded[0].update(command=command, when=f"{began:%Y-%m-%d %H:%M} UTC", title=heading)
    earlier = expectation() if EXPECTATION.exists() else None
    kept = merged(earlier, fresh)
    EXPECTATION.write_text(json.dumps(kept.to_json(), indent=1) + "\n", encoding="utf-8")
    print(
        f"franz-go: recorded {EXPECTATION.relative_to(ROOT)} ({len(kept.recorded)} recordings): of "
        f"{len(names)} listed tests, Kafka passes {len(kept.passes)} tests and subtests, skips "
        f"{len(kept.skips)}, fails {len(kept.fails)}"
    )
    return 0


def expectation() -> Expectation:
    """expected.json; exits saying so when there is none to judge by."""
    if not EXPECTATION.exists():
        raise SystemExit(
            f"franz-go: no {EXPECTATION.relative_to(ROOT)} to judge by: record one with --record"
        )
    return Expectation.from_json(json.loads(EXPECTATION.read_text(encoding="utf-8")))


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
    parser.add_argument("--run", default=".*", help="go test -run: which tests (default: all; a part FAILs)")
    parser.add_argument("--dir", help="where logs and results stay (default: a new temporary folder)")
    parser.add_argument(
        "--from", dest="source", help="judge an earlier run's --dir again (with --record: record it)"
    )
    parser.add_argument(
        "--record", action="store_true", help=f"run Kafka alone, quiet, into {EXPECTATION.name}"
    )
    options = parser.parse_args(argv)
    if options.record and not options.source and (options.burners or options.kill or options.run != ".*"):
        parser.error("--record runs the whole suite on Kafka alone, quiet: no --burners, --kill or --run")
    command = " ".join(["scripts/franz_go_suite.py", *(sys.argv[1:] if argv is None else argv)])
    if options.source:
        heading, saved, names, earlier = load(pathlib.Path(options.source))
        if options.record:
            return record(saved, names, earlier, command, heading)
        return verdict(heading, saved, names, earlier)
    systems = ["kafka"] if options.record else [s for s in SYSTEMS if s in options.systems.split(",")]
    directory = pathlib.Path(options.dir or tempfile.mkdtemp(prefix="franz-go-suite-")).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    go = go_binary()
    binary = build_suite(go, directory)
    names = listed(binary)  # the whole suite: what a run is held to, whatever part --run selects
    runs: dict[str, SuiteRun] = {}
    bound_s = options.timeout_min * 60 + GRACE_S
    for system in systems:
        cluster = Cluster(system, directory / system, options.serve_arg)

        def killer(began: float, cluster: Cluster = cluster) -> Killer:
            return Killer(cluster, began, options.kill_after, options.down)

        load_before, before = os.getloadavg()[0], cpu_sample()
        with burners(options.burners, bound_s + 300):
            cluster.start()
            try:
                runs[system] = run_suite(
                    go, binary, cluster, directory, options.timeout_min, options.run, load_before,
                    killer if options.kill else None,
                )  # fmt: skip
            finally:
                cluster.stop()
        runs[system].others_cpus = others_cpus(before, cpu_sample())  # the burners and nodes reaped: ours
    heading = title(options)
    saved = {"burners": options.burners, "kill": options.kill, "run": options.run, "cpus": os.cpu_count()}
    save(directory, heading, saved, names, runs)
    if options.record:
        status = record(saved, names, runs, command, heading)
    else:
        status = verdict(heading, saved, names, runs)
    print(f"logs: {directory}")
    return status


if __name__ == "__main__":
    sys.exit(main())
