"""Other authors' schema-registry test suites, run unchanged against a raftlog node: the judges of the
registry's REST API (issue 73). Each comes from a package registry a CI machine reaches, pinned by our
lock files in ``suites/``, installed once into ``.peers/`` (as Kafka's jars and the Go toolchain are) and
run as its authors run it, its registry URL given through the suite's own mechanism from outside its files:

- ``confluent-kafka-go``: Confluent's Go client v2.11.1 from the Go module proxy (``suites/go``: go.mod and
  go.sum pin it; the module's zip carries its tests). ``TestClient`` of package ``schemaregistry``, the one
  test there that takes a live registry (the others run on its ``mock://`` client), reads the URL from
  ``../kafka/testconf.json`` (``SchemaRegistryURL``) and its schemas from ``./test/avro``: the test binary
  runs in a folder laid out so, ``test`` being the module cache's own folder.
- ``confluent-kafka-javascript``: Confluent's JavaScript registry client ``@confluentinc/schemaregistry``
  1.10.1 from npm (``suites/node``: package.json and package-lock.json), whose package ships its
  end-to-end specs (``dist/e2e``), run by Jest 29. Its client spec takes a registry only; the URL it names
  (``test-constants.js``: localhost:8081) is replaced by ours before each spec file loads
  (``suites/node/registry_url.js``). Its Avro and JSON specs are not run: they also need the native
  ``@confluentinc/kafka-javascript``, whose prebuilt binary comes from GitHub (npm has only its sources),
  and a broker at the fixed localhost:9092; ``test_clients.py`` covers that path with confluent-kafka.

No Python suite can be had so: the sdists of confluent-kafka (every 2.x release) carry no tests, and those of
python-schema-registry-client that carry tests (up to 2.4.3) lack the ``conftest.py`` and ``data_gen.py``
they import; the npm package @kafkajs/confluent-schema-registry ships no tests, franz-go's ``pkg/sr`` tests
its own fake registry, and Confluent's Java client is not on Maven Central.

The verdict (``judge``) is absolute: at least ``Suite.minimum`` tests ran; each test that failed is listed in
``expected_failures.json`` with its reason and words its failure message holds, and each listed test ran and
failed so (one that passes is to be taken off the list, which is empty once the issue is resolved); and the
node answered at least one request per test run (the suite reached raftlog, not a default or mock registry).

    .venv/bin/python tests/registry/judges.py install       # fetch and build both (make test's set-up)
    .venv/bin/python tests/registry/judges.py run URL       # run both against a node: table and verdict
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SUITES = HERE / "suites"
PEERS = ROOT / ".peers"
EXPECTED_FAILURES = HERE / "expected_failures.json"

INSTALL_TIMEOUT_S = 900.0
RUN_TIMEOUT_S = 300.0  # a whole suite's run; each of its requests is bounded by the suite itself

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


class JudgeUnavailable(RuntimeError):
    """A suite could not be fetched, built or started: a failure of the run, never a skip."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    status: str  # PASSED, FAILED or SKIPPED
    message: str = ""  # a failure's words, as the suite printed them


@dataclasses.dataclass(frozen=True)
class SuiteRun:
    suite: str
    results: dict[str, Outcome]  # test name -> outcome
    log: pathlib.Path  # the suite's own output

    def named(self, status: str) -> list[str]:
        return sorted(name for name, outcome in self.results.items() if outcome.status == status)

    @property
    def ran(self) -> int:
        return sum(outcome.status in (PASSED, FAILED) for outcome in self.results.values())

    def counts(self) -> str:
        passed, failed, skipped = (len(self.named(status)) for status in (PASSED, FAILED, SKIPPED))
        return f"{passed} passed, {failed} failed, {skipped} skipped"


def _digest(paths: Iterable[pathlib.Path]) -> str:
    sha = hashlib.sha256()
    for path in sorted(paths):
        sha.update(path.name.encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()[:16]


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """A set-up command; JudgeUnavailable naming it and its output when it fails or is missing."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    except (OSError, subprocess.TimeoutExpired) as error:
        raise JudgeUnavailable(f"{' '.join(argv)}: {error}") from error
    if done.returncode != 0:
        raise JudgeUnavailable(
            f"{' '.join(argv)} exited with {done.returncode}: {done.stderr or done.stdout}"
        )
    return done  # type: ignore[no-any-return]


class GoSuite:
    """confluent-kafka-go's ``schemaregistry`` package tests, compiled once (``go test -c``) from the module
    proxy's copy pinned by ``suites/go``; ``TestClient`` run against the URL."""

    name = "confluent-kafka-go"
    module = "github.com/confluentinc/confluent-kafka-go/v2"
    package = module + "/schemaregistry"
    selection = "^TestClient$"  # the package's one test against a live registry (the rest use mock://)
    minimum = 1
    source = SUITES / "go"

    def _go(self) -> str:
        return _run([str(ROOT / "scripts" / "go_toolchain.sh")], timeout=INSTALL_TIMEOUT_S).stdout.strip()

    def _env(self) -> dict[str, str]:
        return {**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"}

    def install(self) -> tuple[str, pathlib.Path, pathlib.Path]:
        """The Go binary, the compiled test binary and the module's folder in the module cache."""
        go = self._go()
        home = PEERS / f"registry-judges-go-{_digest(self.source.iterdir())}"
        binary = home / "schemaregistry.test"
        _run(
            [go, "mod", "download", self.module], cwd=self.source, env=self._env(), timeout=INSTALL_TIMEOUT_S
        )
        listed = _run([go, "list", "-m", "-f", "{{.Dir}}", self.module], cwd=self.source, env=self._env())
        module_dir = pathlib.Path(listed.stdout.strip())
        if not binary.exists():
            home.mkdir(parents=True, exist_ok=True)
            building = home / "schemaregistry.test.part"
            _run(
                [go, "test", "-c", "-o", str(building), self.package],
                cwd=self.source,
                env=self._env(),
                timeout=INSTALL_TIMEOUT_S,
            )
            building.rename(binary)
        return go, binary, module_dir

    def run(self, url: str, directory: pathlib.Path) -> SuiteRun:
        go, binary, module_dir = self.install()
        # the layout TestClient reads: ../kafka/testconf.json and ./test/avro/*.avsc beside its working folder
        work = directory / "schemaregistry"
        work.mkdir(parents=True)
        (work / "test").symlink_to(module_dir / "schemaregistry" / "test")
        (directory / "kafka").mkdir()
        (directory / "kafka" / "testconf.json").write_text(json.dumps({"SchemaRegistryURL": url}))
        log = directory / "go-test.jsonl"
        argv = [go, "tool", "test2json", "-t", str(binary), "-test.v=test2json", "-test.count=1"]
        argv += [f"-test.run={self.selection}", f"-test.timeout={RUN_TIMEOUT_S - 30:g}s"]
        with open(log, "w") as out:
            try:
                subprocess.run(
                    argv, cwd=work, stdout=out, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S, check=False
                )
            except (OSError, subprocess.TimeoutExpired) as error:
                raise JudgeUnavailable(f"{self.name}: {error}; see {log}") from error
        return SuiteRun(self.name, parse_test2json(log.read_text(errors="replace").splitlines()), log)


def parse_test2json(lines: Iterable[str]) -> dict[str, Outcome]:
    """Each top-level test's outcome from ``go tool test2json``'s events; a failure's message is the
    test's output. A line that is not an event (the binary's own panic, say) joins the message of the test
    running then."""
    output: dict[str, list[str]] = {}
    results: dict[str, Outcome] = {}
    current = ""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            output.setdefault(current, []).append(line + "\n")
            continue
        test = str(event.get("Test") or "")
        if not test or "/" in test:
            continue
        current = test
        action = event.get("Action")
        if action == "output":
            output.setdefault(test, []).append(str(event.get("Output", "")))
        elif action in ("pass", "fail", "skip"):
            status = {"pass": PASSED, "fail": FAILED, "skip": SKIPPED}[action]
            results[test] = Outcome(status, "".join(output.get(test, [])) if status != PASSED else "")
    for test, lines_of in output.items():  # started and never ended: the binary died or timed out
        if test and test not in results:
            results[test] = Outcome(FAILED, "did not end: " + "".join(lines_of))
    return results


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        raise JudgeUnavailable("node is missing (Debian's nodejs; `make bootstrap` installs npm and it)")
    return node


class NodeSuite:
    """@confluentinc/schemaregistry's end-to-end client spec under Jest, installed with ``npm ci`` from
    ``suites/node``."""

    name = "confluent-kafka-javascript"
    minimum = 8  # the client spec's tests (dist/e2e/schemaregistry-client.spec.js of 1.10.1)
    source = SUITES / "node"

    def install(self) -> pathlib.Path:
        """The folder holding node_modules and the suite's Jest configuration."""
        home = PEERS / f"registry-judges-node-{_digest(self.source.iterdir())}"
        stamp = home / ".complete"
        if not stamp.exists():
            npm = shutil.which("npm")
            if npm is None:
                raise JudgeUnavailable("npm is missing (Debian's npm; `make bootstrap` installs it)")
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(self.source, home)
            _run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=home,
                timeout=INSTALL_TIMEOUT_S,
            )
            stamp.touch()
        return home

    def run(self, url: str, directory: pathlib.Path) -> SuiteRun:
        home = self.install()
        node = node_binary()
        report = directory / "jest-report.json"
        log = directory / "jest.log"
        env = {**os.environ, "RAFTLOG_REGISTRY_URL": url, "RAFTLOG_JUDGES_REPORT": str(report)}
        argv = [node, str(home / "node_modules" / "jest" / "bin" / "jest.js"), "--config", "jest.config.js"]
        argv += ["--ci", "--runInBand"]
        with open(log, "w") as out:
            try:
                subprocess.run(
                    argv,
                    cwd=home,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=RUN_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as error:
                raise JudgeUnavailable(f"{self.name}: {error}; see {log}") from error
        if not report.exists():
            raise JudgeUnavailable(f"{self.name}: Jest wrote no report; see {log}")
        tests = json.loads(report.read_text())["tests"]
        results = {str(t["name"]): Outcome(str(t["status"]), str(t.get("message") or "")) for t in tests}
        return SuiteRun(self.name, results, log)


SUITES_RUN = (GoSuite(), NodeSuite())


@dataclasses.dataclass(frozen=True)
class ExpectedFailure:
    reason: str  # why the test fails today
    fails_with: str  # words its failure message holds: a failure of another kind is no expected one


def expected_failures() -> dict[str, dict[str, ExpectedFailure]]:
    """suite -> test -> how and why it fails today (``expected_failures.json``)."""
    table = json.loads(EXPECTED_FAILURES.read_text(encoding="utf-8"))
    return {
        suite: {test: ExpectedFailure(f["reason"], f["fails_with"]) for test, f in listed.items()}
        for suite, listed in table.items()
    }


def judge(
    run: SuiteRun, minimum: int, expected: Mapping[str, ExpectedFailure], requests_seen: int
) -> list[str]:
    """Why the run fails the verdict (empty: it passes). ``expected``: this suite's listed failures;
    ``requests_seen``: the requests the node answered during the run."""
    problems: list[str] = []
    if run.ran < minimum:
        problems.append(
            f"{run.suite}: {run.ran} tests ran ({run.counts()}), fewer than the {minimum} it must run"
        )
    if requests_seen < max(run.ran, 1):
        problems.append(
            f"{run.suite}: the node answered {requests_seen} requests for {run.ran} tests: "
            "the suite did not reach it"
        )
    for name in run.named(FAILED):
        message = run.results[name].message.strip()
        if name not in expected:
            problems.append(f"{run.suite}: {name} failed:\n{message}")
        elif expected[name].fails_with not in message:
            problems.append(
                f"{run.suite}: {name} failed, but not as listed (no {expected[name].fails_with!r} in its "
                f"message):\n{message}"
            )
    for name, failure in sorted(expected.items()):
        outcome = run.results.get(name)
        if outcome is None:
            problems.append(f"{run.suite}: {name} is listed as failing ({failure.reason}) but did not run")
        elif outcome.status == PASSED:
            problems.append(
                f"{run.suite}: {name} passes now: take it off {EXPECTED_FAILURES.name} ({failure.reason})"
            )
        elif outcome.status == SKIPPED:
            problems.append(f"{run.suite}: {name} is listed as failing ({failure.reason}) but was skipped")
    return problems


def report(run: SuiteRun, expected: Mapping[str, ExpectedFailure]) -> str:
    lines = [f"{run.suite}: {run.counts()} (log: {run.log})"]
    for name in sorted(run.results):
        outcome = run.results[name]
        listed = name in expected and outcome.status == FAILED
        note = f"  (expected: {expected[name].reason})" if listed else ""
        lines.append(f"  {outcome.status:7} {name}{note}")
    return "\n".join(lines)


def requests_answered(url: str) -> int:
    """The client requests the node at ``url`` answered so far (its ``raftlog_http_requests`` counter over
    every route but the scrape, the probes and the nodes' own ``/internal`` calls)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as answer:
        text = answer.read().decode()
    total = 0
    for line in text.splitlines():
        if not line.startswith("raftlog_http_requests_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        route = labels.split('route="', 1)[1].split('"', 1)[0]
        if not route.startswith(("/metrics", "/status", "/internal")):
            total += int(float(value))
    return total


CLEAR_PASSES = 4  # a subject referenced by another goes once the other has gone: one pass per level


def _registry_call(url: str, method: str, path: str) -> tuple[int, Any]:
    request = urllib.request.Request(url + path, method=method, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read() or b"null")


def clear_registry(url: str) -> None:
    """Every subject of the registry deleted for good (soft, then permanently; one that another still
    references at the next pass): a suite is run against a registry of its own, as its authors run it
    (confluent-kafka-go's TestClient compares ``GET /subjects`` with the subjects it registered)."""
    for _ in range(CLEAR_PASSES):
        status, subjects = _registry_call(url, "GET", "/subjects?deleted=true")
        if status != 200:
            raise RuntimeError(f"GET /subjects?deleted=true answered {status}: {subjects}")
        if not subjects:
            return
        for subject in subjects:
            path = "/subjects/" + urllib.parse.quote(subject, safe="")
            _registry_call(url, "DELETE", path)  # 40404 when it was soft-deleted already
            _registry_call(url, "DELETE", path + "?permanent=true")  # 42206 while another references it
    raise RuntimeError(f"subjects left after {CLEAR_PASSES} passes of deletes: {subjects}")


def run_judged(suite: GoSuite | NodeSuite, url: str, directory: pathlib.Path) -> tuple[SuiteRun, list[str]]:
    clear_registry(url)
    before = requests_answered(url)
    run = suite.run(url, directory)
    seen = requests_answered(url) - before
    return run, judge(run, suite.minimum, expected_failures().get(suite.name, {}), seen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    installing = commands.add_parser("install", help="fetch and build every suite (or those named) in .peers")
    installing.add_argument("--suite", choices=[s.name for s in SUITES_RUN], action="append")
    running = commands.add_parser("run", help="run every suite against a node and judge it")
    running.add_argument("url", help="a node's HTTP URL, e.g. http://127.0.0.1:8080")
    running.add_argument("--suite", choices=[s.name for s in SUITES_RUN], action="append")
    args = parser.parse_args(argv)
    chosen = [suite for suite in SUITES_RUN if not args.suite or suite.name in args.suite]
    if args.command == "install":
        for suite in chosen:
            suite.install()
            print(f"{suite.name}: installed", file=sys.stderr)
        return 0
    failed = False
    for suite in chosen:
        directory = pathlib.Path(tempfile.mkdtemp(prefix=f"{suite.name}-"))
        run, problems = run_judged(suite, args.url.rstrip("/"), directory)
        print(report(run, expected_failures().get(suite.name, {})))
        print("\n".join(problems) if problems else f"{suite.name}: PASS")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
