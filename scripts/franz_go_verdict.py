"""What a run of franz-go's suite found, and its verdict, as plain functions (no process, socket or clock):
``scripts/franz_go_suite.py`` runs the suite and hands its test2json events and its kills in.

The verdict is absolute. raftlog is held to a recorded expectation, ``scripts/franz_go/expected.json``: the
tests and subtests franz-go v1.21.5's ``pkg/kgo`` passes against Apache Kafka on a quiet machine, those it
skips there (each with franz-go's own reason), those Kafka fails there, and the top-level tests the
compiled suite lists (``-test.list``), recorded from a real run by ``franz_go_suite.py --record`` (a busier
machine's run only when its load excused nothing: ``expectation_from``). A run

- FAILS when raftlog did not end every listed top-level test (a ``--run`` part, a panic, the time bound),
  when a test or subtest of the expectation's ``pass`` did not pass on raftlog, when one it says both
  skip did not pass or skip on raftlog for franz-go's recorded reason, when a ``--kill`` kill did not land
  on raftlog (the node seen dead, and back, within the named test's run), or when the compiled suite is
  not the one recorded;
- is INCONCLUSIVE (also exit 1) when raftlog met all that but the Kafka run beside it did not: Kafka did
  not end every test, failed one it passes on a quiet machine, or its kill did not land;
- PASSES otherwise. What Kafka does in the same run never excuses raftlog.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

FINAL = ("pass", "fail", "skip")
KEY_LINE = re.compile(r"^\s*(?:\w+_test\.go:\d+: |panic: |fatal error: )")
NOT_KEY = re.compile(r"deleting topic|deleting group|completed in|NOT DELETING")  # the suite's own chatter
CAPABILITY = "broker does not support"  # franz-go's words when it skips for what the broker lacks
PANIC = re.compile(r"^\s*(?:panic: |fatal error: )")
KILLED_DURING = {"TestGroupETL": 2, "TestTxnEtl": 3}  # --kill: test -> broker id killed while it runs


@dataclasses.dataclass
class TestResult:
    """One test's (or subtest's) outcome on one system: pass, fail, skip, ``died`` (started but the run
    ended first: a panic of the binary or the time bound) or ``not run``."""

    status: str = "not run"
    elapsed_s: float = 0.0
    lines: list[str] = dataclasses.field(default_factory=list)  # its output's key lines (errors, skip reason)
    # [from, to] in seconds since the epoch (test2json's times) while it ran: from a run or a cont to a
    # pause or its end; an open span's end is None
    spans: list[list[float | None]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Kill:
    """A ``--kill`` of ``broker`` during ``test``: when its process was seen gone after SIGKILL, and when
    its new process was seen back (ready), in seconds since the epoch; None where that never happened."""

    test: str
    broker: int
    killed_at: float | None = None
    back_at: float | None = None
    error: str = ""


@dataclasses.dataclass
class SuiteRun:
    system: str
    results: dict[str, TestResult]  # top-level tests and subtests ("TestA/sub")
    exit_code: int | None
    seconds: float
    load: tuple[float, float]  # 1-minute load average before the cluster started, and at the end
    kills: list[Kill]
    package_lines: list[str]  # key lines printed outside any test (a panic of a goroutine)
    began_at: float = 0.0  # seconds since the epoch when go test started
    # CPUs the machine's other work kept busy on average from the cluster's start to its stop (all CPU
    # time spent, less this runner's and its children's, over the time): None when not measured
    others_cpus: float | None = None

    def top(self) -> dict[str, TestResult]:
        return {name: result for name, result in self.results.items() if "/" not in name}


def is_key(output: str) -> bool:
    """Whether a line of a test's output says why it failed or skipped (an error, a panic)."""
    return bool(KEY_LINE.match(output)) and not NOT_KEY.search(output)


def event_time(event: dict[str, Any]) -> float | None:
    """test2json's ``Time`` (RFC 3339, nanoseconds) in seconds since the epoch; None without one."""
    text = event.get("Time")
    if not isinstance(text, str):
        return None
    whole, _, rest = text.partition(".")
    if rest:  # Python reads at most microseconds: cut the fraction to 6 digits, keep the zone
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{whole}.{rest[: min(digits, 6)]}{rest[digits:]}"
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def read_events(
    lines: Iterable[str],
    results: dict[str, TestResult],
    package_lines: list[str],
    on_event: Callable[[str, str, dict[str, Any]], None] | None = None,
) -> None:
    """test2json's events (one JSON object a line) into ``results`` and ``package_lines``; ``on_event``
    (action, test, event) sees each event of a test. A test still running when the lines end is left
    ``running``: the caller's ``settle`` makes it ``died``."""
    for raw in lines:
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
        when = event_time(event)
        if action in ("run", "cont") and when is not None:
            result.spans.append([when, None])
        elif action in ("pause", *FINAL) and result.spans and result.spans[-1][1] is None:
            result.spans[-1][1] = when
        if action == "run":
            result.status = "running"
        elif action in FINAL:
            result.status = action
            result.elapsed_s = float(event.get("Elapsed", 0.0))
        elif action == "output":
            output = str(event.get("Output", ""))
            if is_key(output) and len(result.lines) < 8:
                result.lines.append(output.strip())
        if on_event is not None:
            on_event(action, test, event)


def settle(results: dict[str, TestResult]) -> None:
    """After the run: a test that started and never ended died with the binary."""
    for result in results.values():
        if result.status == "running":
            result.status = "died"


@dataclasses.dataclass
class Expectation:
    """What franz-go's suite does against Apache Kafka on a quiet machine (``expected.json``)."""

    franz_go: str
    kafka: str
    listed: list[str]  # the compiled suite's top-level tests (-test.list .*)
    passes: list[str]  # tests and subtests Kafka passes
    skips: dict[str, str]  # tests and subtests Kafka skips -> franz-go's reason (the skip's key line)
    fails: dict[str, list[str]]  # tests and subtests Kafka fails -> their key lines
    recorded: list[dict[str, Any]]  # each recording's command, when, load average, seconds, counts

    def to_json(self) -> dict[str, Any]:
        return {
            "franz_go": self.franz_go,
            "kafka": self.kafka,
            "recorded": self.recorded,
            "listed": self.listed,
            "pass": self.passes,
            "skip": self.skips,
            "fail": self.fails,
        }

    @classmethod
    def from_json(cls, saved: dict[str, Any]) -> Expectation:
        return cls(
            saved["franz_go"], saved["kafka"], list(saved["listed"]), list(saved["pass"]),
            dict(saved["skip"]), {k: list(v) for k, v in saved["fail"].items()}, list(saved["recorded"]),
        )  # fmt: skip

    def expected(self, name: str) -> str:
        """pass, skip or fail: what Kafka does on a quiet machine; ``-`` for a name it never ran."""
        if name in self.skips:
            return "skip"
        if name in self.fails:
            return "fail"
        return "pass" if name in self.passes else "-"


class NotRecordable(Exception):
    """A run that cannot stand as the expectation, and why."""


def expectation_from(
    run: SuiteRun, listed: list[str], franz_go: str, kafka: str, conditions: dict[str, Any]
) -> Expectation:
    """The expectation a whole Kafka run gives. ``conditions``: the run's ``burners``, ``kill``, ``run``
    (go test -run), and ``cpus``. Refused (NotRecordable) when the run was loaded on purpose, partial or
    cut short; and, when other work kept more than half the machine's CPUs busy meanwhile (or was not
    measured), unless Kafka failed nothing and skipped only for a broker capability it lacks: then the
    load excused nothing, and the expectation is what a quiet run gives, or stricter."""
    if run.system != "kafka":
        raise NotRecordable(f"the expectation is Kafka's, not {run.system}'s")
    if conditions.get("burners") or conditions.get("kill") or conditions.get("run", ".*") != ".*":
        raise NotRecordable(
            f"a quiet run of the whole suite only (no burners, no kill, no --run): {conditions}"
        )
    quiet = run.others_cpus is not None and run.others_cpus <= conditions["cpus"] / 2
    excused = [
        name
        for name, result in sorted(run.results.items())
        if result.status != "pass" and not (result.status == "skip" and CAPABILITY in skip_reason(result))
    ]
    if not quiet and excused:
        busy = "unmeasured" if run.others_cpus is None else f"{run.others_cpus:.2f}"
        raise NotRecordable(
            f"the machine was not quiet (other work kept {busy} of its {conditions['cpus']} CPUs busy; at "
            f"most half, measured, is quiet) and Kafka did not pass {', '.join(excused)}: only a quiet run "
            "may record a failure, or a skip other than for a broker capability"
        )
    unended = [name for name in listed if run.results.get(name, TestResult()).status not in FINAL]
    if unended:
        raise NotRecordable(
            f"{len(unended)} of {len(listed)} tests never ended on Kafka: {', '.join(unended)}"
        )
    panics = [line for line in run.package_lines if PANIC.match(line)]
    if panics:
        raise NotRecordable(f"the test binary panicked outside a test: {panics[0]}")
    by_status: dict[str, dict[str, TestResult]] = {status: {} for status in FINAL}
    for name, result in sorted(run.results.items()):
        if result.status in FINAL:
            by_status[result.status][name] = result
    tally = {status: len(found) for status, found in by_status.items()}
    return Expectation(
        franz_go,
        kafka,
        sorted(listed),
        sorted(by_status["pass"]),
        {name: skip_reason(result) for name, result in by_status["skip"].items()},
        {name: list(dict.fromkeys(result.lines)) for name, result in by_status["fail"].items()},
        [
            {
                **conditions,
                "quiet": quiet,
                "others_cpus": None if run.others_cpus is None else round(run.others_cpus, 2),
                "load": list(run.load),
                "seconds": round(run.seconds),
                "tests and subtests": tally,
            }
        ],
    )


def merged(earlier: Expectation | None, fresh: Expectation) -> Expectation:
    """``fresh`` added to ``earlier`` (of the same franz-go, Kafka and list; else ``fresh`` alone): a
    recording never shrinks what raftlog is held to. A test or subtest Kafka passed in any recording is
    expected to pass; one it skipped and never passed, to skip; one it only failed stays unheld."""
    if earlier is None or (earlier.franz_go, earlier.kafka, earlier.listed) != (
        fresh.franz_go,
        fresh.kafka,
        fresh.listed,
    ):
        return fresh
    passes = sorted(set(earlier.passes) | set(fresh.passes))
    skips = {n: r for n, r in {**earlier.skips, **fresh.skips}.items() if n not in passes}
    fails = {n: k for n, k in {**earlier.fails, **fresh.fails}.items() if n not in passes and n not in skips}
    return Expectation(
        fresh.franz_go, fresh.kafka, fresh.listed, passes, dict(sorted(skips.items())),
        dict(sorted(fails.items())), [*earlier.recorded, *fresh.recorded],
    )  # fmt: skip


def skip_reason(result: TestResult) -> str:
    """franz-go's reason for a skip: its first key line (``file_test.go:N: why``)."""
    return result.lines[0] if result.lines else ""


def unended(run: SuiteRun, listed: list[str]) -> list[str]:
    """The listed top-level tests that did not end (pass, fail or skip) in ``run``."""
    return [name for name in listed if run.results.get(name, TestResult()).status not in FINAL]


def missed(expectation: Expectation, run: SuiteRun) -> list[str]:
    """The tests and subtests ``run`` did not do as Kafka does on a quiet machine: one the expectation
    passes that did not pass, one it skips that neither passed nor skipped for franz-go's same reason."""
    found = []
    for name in expectation.passes:
        if run.results.get(name, TestResult()).status != "pass":
            found.append(name)
    for name, reason in expectation.skips.items():
        result = run.results.get(name, TestResult())
        if result.status != "pass" and not (result.status == "skip" and skip_reason(result) == reason):
            found.append(name)
    return sorted(found)


def landed(kill: Kill | None, result: TestResult) -> str:
    """Why ``kill`` did not land during the test ``result`` is of: the node seen dead while the test ran
    and seen back before it ended; empty when it did."""
    if kill is None:
        return "no kill was made"
    if kill.killed_at is None:
        return f"the node was not seen dead ({kill.error or 'never killed'})"
    if kill.back_at is None:
        return f"the node was not seen back ({kill.error or 'never restarted'})"
    running = [span for span in result.spans if span[0] is not None and span[0] <= kill.killed_at]
    if not any(end is None or kill.killed_at <= end for _, end in running):
        return "the test was not running when the node died"
    end = result.spans[-1][1] if result.spans else None
    if result.status not in FINAL or end is None:
        return f"the test did not end ({result.status})"
    if kill.back_at > end:
        return f"the node was back {kill.back_at - end:.1f} s after the test ended"
    return ""


def _unended_note(system: str, run: SuiteRun, listed: list[str]) -> list[str]:
    """How many of the ``listed`` top-level tests ``system``'s run did not run to an end, when some: a
    failure of raftlog's run, an unhealthy peer's in Kafka's."""
    short = unended(run, listed)
    if not short:
        return []
    return [f"{system} ran {len(listed) - len(short)} of {len(listed)} top-level tests to an end"]


def unlanded(run: SuiteRun, plan: dict[str, int]) -> list[str]:
    """Each kill of ``plan`` (test -> broker) that did not land in ``run``, with why."""
    found = []
    for test, broker in plan.items():
        kill = next((k for k in run.kills if k.test == test and k.broker == broker), None)
        why = landed(kill, run.results.get(test, TestResult()))
        if why:
            found.append(f"{test} (broker {broker}): {why}")
    return found


@dataclasses.dataclass
class Verdict:
    outcome: str  # PASS, FAIL or INCONCLUSIVE
    failures: list[str]  # raftlog's or the run's own: each one fails it
    unhealthy: list[str]  # the Kafka run's: each one makes it inconclusive
    notes: list[str]
    worse: list[str]  # tests and subtests raftlog did not do as the expectation says
    kafka_worse: list[str]  # those Kafka did not do so in this run

    @property
    def passed(self) -> bool:
        return self.outcome == "PASS"


def judge(
    expectation: Expectation,
    listed: list[str],
    runs: dict[str, SuiteRun],
    kill_plan: dict[str, int] | None,
    versions: tuple[str, str],
) -> Verdict:
    """The run's verdict against ``expectation``: ``listed`` is what the compiled suite holds (-test.list
    .*), whatever part a run selected; ``kill_plan`` the kills ``--kill`` asked for (None without it);
    ``versions`` the franz-go and Kafka this run used."""
    failures: list[str] = []
    unhealthy: list[str] = []
    notes: list[str] = []
    worse: list[str] = []
    kafka_worse: list[str] = []
    if versions != (expectation.franz_go, expectation.kafka):
        failures.append(
            f"this run used franz-go {versions[0]} and Kafka {versions[1]}; the expectation is of franz-go "
            f"{expectation.franz_go} against Kafka {expectation.kafka}: record it again (--record)"
        )
    if sorted(listed) != sorted(expectation.listed):
        new, gone = (
            sorted(set(listed) - set(expectation.listed)),
            sorted(set(expectation.listed) - set(listed)),
        )
        failures.append(
            f"the compiled suite lists {len(listed)} top-level tests, the expectation "
            f"{len(expectation.listed)} (new: {', '.join(new) or '-'}; gone: {', '.join(gone) or '-'}): "
            "record it again (--record)"
        )
    if not listed:
        failures.append("the compiled suite lists no test")
    raftlog, kafka = runs.get("raftlog"), runs.get("kafka")
    if raftlog is None:
        failures.append("raftlog was not run")
    else:
        failures += _unended_note("raftlog", raftlog, listed)
        worse = missed(expectation, raftlog)
        if worse:
            failures.append(
                f"{len(worse)} tests and subtests pass (or skip) on Kafka on a quiet machine and did not on "
                f"raftlog: {', '.join(worse)}"
            )
        panics = [line for line in raftlog.package_lines if PANIC.match(line)]
        if panics:
            failures.append(f"the test binary panicked outside a test on raftlog: {panics[0]}")
        if kill_plan is not None:
            failures += [f"raftlog's kill did not land: {why}" for why in unlanded(raftlog, kill_plan)]
        spared = sorted(
            name for name in expectation.fails if raftlog.results.get(name, TestResult()).status != "pass"
        )
        if spared:
            notes.append(
                f"not held to raftlog: {len(spared)} tests and subtests Kafka fails on a quiet machine "
                f"(recorded) did not pass on raftlog either: {', '.join(spared)}"
            )
    if kafka is None:
        notes.append("Kafka was not run beside it: raftlog judged against the recorded expectation alone")
    else:
        unhealthy += _unended_note("Kafka", kafka, listed)
        kafka_worse = missed(expectation, kafka)
        if kafka_worse:
            unhealthy.append(
                f"Kafka did not pass (or skip) {len(kafka_worse)} tests and subtests it passes (or skips) "
                f"on a quiet machine: {', '.join(kafka_worse)}"
            )
        if kill_plan is not None:
            unhealthy += [f"Kafka's kill did not land: {why}" for why in unlanded(kafka, kill_plan)]
    outcome = "FAIL" if failures else "INCONCLUSIVE" if unhealthy else "PASS"
    return Verdict(outcome, failures, unhealthy, notes, worse, kafka_worse)


def counts(run: SuiteRun) -> dict[str, int]:
    tally: dict[str, int] = {}
    for result in run.top().values():
        tally[result.status] = tally.get(result.status, 0) + 1
    return tally


def _at(run: SuiteRun, when: float | None) -> str:
    return "never" if when is None else f"{when - run.began_at:.1f} s"


def report_lines(
    runs: dict[str, SuiteRun], expectation: Expectation, verdict: Verdict, title: str
) -> list[str]:
    """The table (every top-level test, and each subtest whose results differ: as Kafka does on a quiet
    machine, as recorded; on Kafka and on raftlog in this run), each run's counts, kills and failing key
    lines, and the verdict with every reason."""
    every = set(expectation.listed).union(expectation.passes, expectation.skips, expectation.fails)
    names = sorted(every.union(*(run.results for run in runs.values())))
    rows = []
    for name in names:
        found = [expectation.expected(name)]
        found += [run.results[name].status if name in run.results else "not run" for run in runs.values()]
        if "/" not in name or len(set(found)) > 1:
            mark = "  <-- raftlog" if name in verdict.worse else ""
            mark += "  <-- Kafka" if name in verdict.kafka_worse else ""
            rows.append((name, found, mark))
    width = max([len("test"), *(len(name) for name, _, _ in rows)])
    out = [f"\n{title}\n", f"{'test':<{width}}  {'quiet Kafka':<12}" + "".join(f"{s:<9}" for s in runs)]
    out += [
        f"{name:<{width}}  {found[0]:<12}" + "".join(f"{s:<9}" for s in found[1:]) + mark
        for name, found, mark in rows
    ]
    out.append("")
    for system, run in runs.items():
        tally = ", ".join(f"{count} {status}" for status, count in sorted(counts(run).items()))
        out.append(
            f"{system}: {tally} (of {len(expectation.listed)} listed); {run.seconds:.0f} s, "
            f"exit {run.exit_code}, load {run.load[0]:.1f} -> {run.load[1]:.1f}, other work "
            + ("not measured" if run.others_cpus is None else f"{run.others_cpus:.2f} CPUs busy")
        )
        for kill in run.kills:
            error = f" ({kill.error})" if kill.error else ""
            out.append(
                f"  {kill.test}: broker {kill.broker} seen dead at {_at(run, kill.killed_at)}, back at "
                f"{_at(run, kill.back_at)}{error}"
            )
        if system == "raftlog":
            shown = [
                name
                for name in names
                if run.results.get(name, TestResult()).status in ("fail", "skip", "died")
            ]
        else:
            shown = [name for name in names if name in verdict.kafka_worse]
        shown = [name for name in shown if run.results.get(name, TestResult()).lines]
        if shown or run.package_lines:
            out.append(f"\n{system}'s failures and skips (key lines):")
        for name in shown:
            result = run.results[name]
            out.append(f"  {name} ({result.status}):")
            out += [f"      {line[:300]}" for line in dict.fromkeys(result.lines)]
        out += [f"  (outside a test) {line[:300]}" for line in dict.fromkeys(run.package_lines)]
        out.append("")
    out.append(f"verdict: {verdict.outcome}")
    out += [f"  - {line}" for line in verdict.failures]
    out += [f"  - inconclusive, the Kafka side unhealthy: {line}" for line in verdict.unhealthy]
    out += [f"  - note: {line}" for line in verdict.notes]
    return out
