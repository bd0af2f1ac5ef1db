"""``scripts/franz_go_verdict.py``: the franz-go comparison's verdict is absolute. raftlog is held to the
recorded expectation (what the suite does against Kafka on a quiet machine), never to what Kafka did in the
same run; a run that ended fewer tests than the suite lists, or whose kills did not land, fails; Kafka
falling short of its own expectation makes the run inconclusive, not a pass."""

from __future__ import annotations

import datetime
import json
import pathlib
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import franz_go_verdict as verdict
    from franz_go_verdict import Expectation, Kill, NotRecordable, SuiteRun
finally:
    sys.path.remove(str(ROOT / "scripts"))

SHARE = (
    "share_test.go:37: broker does not support share groups (requires ShareFetch v2 and ShareAcknowledge v2, "
    "Kafka 4.2+)"
)
SKIPPED = [
    "TestShareGroupETL",
    "TestShareGroupAckOnClose",
    "TestShareGroupOffsetsAdmin",
    "TestShareGroupSimple",
]
# 107 top-level tests, as franz-go v1.21.5's pkg/kgo lists them; two with subtests
LISTED = sorted(["TestGroupETL", "TestTxnEtl", *SKIPPED, *(f"TestCase{i:03d}" for i in range(101))])
Outcome = verdict.TestResult  # (not named Test*: pytest would collect it)
SUBTESTS = [
    f"{test}/{sub}" for test in ("TestGroupETL", "TestTxnEtl") for sub in ("range", "range/848", "sticky")
]
VERSIONS = ("v1.21.5", "4.1.1")
T0 = 1_800_000_000.0


def expectation(fails: dict[str, list[str]] | None = None) -> Expectation:
    fails = fails or {}
    passes = sorted(n for n in [*LISTED, *SUBTESTS] if n not in SKIPPED and n not in fails)
    skips = {name: SHARE for name in SKIPPED}
    return Expectation(*VERSIONS, LISTED, passes, skips, fails, [{"command": "test"}])


def result(
    status: str, lines: list[str] | None = None, span: tuple[float, float] = (T0, T0 + 100)
) -> verdict.TestResult:
    ended = span[1] if status in verdict.FINAL else None
    return Outcome(status, 1.0, lines or [], [[span[0], ended]])


def run_of(system: str, changed: dict[str, str] | None = None, kills: list[Kill] | None = None) -> SuiteRun:
    """A run where every test does as on quiet Kafka, but for ``changed`` (name -> status; an absent
    name: ``not run``)."""
    results = {name: result("pass") for name in [*LISTED, *SUBTESTS]}
    results.update({name: result("skip", [SHARE]) for name in SKIPPED})
    for name, status in (changed or {}).items():
        if status == "not run":
            results.pop(name, None)
        else:
            results[name] = result(status, [f"x_test.go:1: {name} {status}"] if status == "fail" else [])
    return SuiteRun(system, results, 0, 600.0, (0.5, 2.0), kills or [], [], T0, 0.2)


def judged(runs: list[SuiteRun], kill: bool = False, exp: Expectation | None = None) -> verdict.Verdict:
    plan = verdict.KILLED_DURING if kill else None
    return verdict.judge(exp or expectation(), LISTED, {r.system: r for r in runs}, plan, VERSIONS)


def landed_kills() -> list[Kill]:
    return [Kill("TestGroupETL", 2, T0 + 10, T0 + 30), Kill("TestTxnEtl", 3, T0 + 40, T0 + 60)]


def test_both_doing_as_on_a_quiet_kafka_passes() -> None:
    found = judged([run_of("raftlog"), run_of("kafka")])
    assert found.outcome == "PASS" and found.passed, found
    assert found.failures == [] and found.unhealthy == []


def test_kafka_timed_out_after_3_tests_and_raftlog_failed_7_fails() -> None:
    # the run: Kafka's binary hit its time bound after 3 tests, raftlog failed 7 others
    kafka = run_of("kafka", {name: "died" if i < 5 else "not run" for i, name in enumerate(LISTED[3:])})
    raftlog = run_of("raftlog", {name: "fail" for name in LISTED[10:17]})
    found = judged([raftlog, kafka])
    assert found.outcome == "FAIL" and not found.passed
    assert found.worse == LISTED[10:17]
    assert any("Kafka ran 3 of 107" in line for line in found.unhealthy), found.unhealthy


def test_a_run_of_2_of_107_tests_fails() -> None:
    # the last PASS: --run 'TestGroupETL|TestTxnEtl', both systems passing what they ran
    part = {name: "not run" for name in LISTED if name not in ("TestGroupETL", "TestTxnEtl")}
    found = judged([run_of("raftlog", part), run_of("kafka", part)])
    assert found.outcome == "FAIL"
    assert "raftlog ran 2 of 107 top-level tests to an end" in found.failures


def test_a_test_raftlog_fails_is_not_excused_by_kafka_failing_it_too() -> None:
    both = {"TestCase007": "fail", "TestGroupETL/range/848": "fail"}
    found = judged([run_of("raftlog", both), run_of("kafka", both)])
    assert found.outcome == "FAIL"
    assert found.worse == ["TestCase007", "TestGroupETL/range/848"]


def test_kafka_failing_what_it_passes_quietly_makes_the_run_inconclusive_not_a_pass() -> None:
    found = judged([run_of("raftlog"), run_of("kafka", {"TestTxnEtl/sticky": "fail"})])
    assert found.outcome == "INCONCLUSIVE" and not found.passed
    assert found.failures == [] and found.kafka_worse == ["TestTxnEtl/sticky"]


@pytest.mark.parametrize("status", ["fail", "skip", "died", "not run"])
def test_a_test_kafka_passes_quietly_must_pass_on_raftlog(status: str) -> None:
    found = judged([run_of("raftlog", {"TestCase042": status}), run_of("kafka")])
    assert found.outcome == "FAIL" and found.worse == ["TestCase042"]


def test_a_skip_counts_only_for_franz_gos_recorded_reason() -> None:
    raftlog = run_of("raftlog")
    raftlog.results["TestShareGroupSimple"] = result("skip", ["client_test.go:289: KGO_TEST_SCRAM not set"])
    raftlog.results["TestShareGroupETL"] = result("pass")  # doing more than Kafka is fine
    found = judged([raftlog, run_of("kafka")])
    assert found.outcome == "FAIL" and found.worse == ["TestShareGroupSimple"]


def test_a_test_kafka_fails_quietly_is_named_and_not_held() -> None:
    exp = expectation({"TestTxnEtl/range/848": ["txn_test.go:9: UNRELEASED_INSTANCE_ID"]})
    found = judged([run_of("raftlog", {"TestTxnEtl/range/848": "fail"}), run_of("kafka")], exp=exp)
    assert found.outcome == "PASS"
    assert any("TestTxnEtl/range/848" in note for note in found.notes), found.notes


def test_a_raftlog_run_alone_is_held_to_the_expectation() -> None:
    assert judged([run_of("raftlog")]).outcome == "PASS"
    assert judged([run_of("raftlog", {"TestCase001": "fail"})]).outcome == "FAIL"
    assert judged([run_of("kafka")]).failures == ["raftlog was not run"]


def test_a_panic_outside_any_test_fails() -> None:
    raftlog = run_of("raftlog")
    raftlog.package_lines.append("panic: invalid: consumed too much")
    assert judged([raftlog, run_of("kafka")]).outcome == "FAIL"


def test_another_suite_than_the_recorded_one_fails() -> None:
    found = verdict.judge(expectation(), [*LISTED, "TestNew"], {"raftlog": run_of("raftlog")}, None, VERSIONS)
    assert found.outcome == "FAIL" and "new: TestNew" in found.failures[0]
    found = verdict.judge(expectation(), LISTED, {"raftlog": run_of("raftlog")}, None, ("v1.22.0", "4.1.1"))
    assert found.outcome == "FAIL"


def test_kills_that_landed_pass() -> None:
    found = judged(
        [run_of("raftlog", kills=landed_kills()), run_of("kafka", kills=landed_kills())], kill=True
    )
    assert found.outcome == "PASS", found


@pytest.mark.parametrize(
    ("kill", "why"),
    [
        (None, "no kill was made"),
        (Kill("TestGroupETL", 2, None, None, "pid 5 still alive"), "not seen dead (pid 5 still alive)"),
        (Kill("TestGroupETL", 2, T0 + 10, None), "not seen back"),
        (Kill("TestGroupETL", 2, T0 - 5, T0 + 30), "not running when the node died"),
        (Kill("TestGroupETL", 2, T0 + 90, T0 + 130), "back 30.0 s after the test ended"),
        (Kill("TestGroupETL", 3, T0 + 10, T0 + 30), "no kill was made"),  # another broker than the plan's
    ],
)
def test_a_kill_that_did_not_land_on_raftlog_fails(kill: Kill | None, why: str) -> None:
    kills = [k for k in [kill, landed_kills()[1]] if k is not None]
    found = judged([run_of("raftlog", kills=kills), run_of("kafka", kills=landed_kills())], kill=True)
    assert found.outcome == "FAIL"
    assert any(why in line and "TestGroupETL" in line for line in found.failures), found.failures


def test_a_kill_that_did_not_land_on_kafka_makes_the_run_inconclusive() -> None:
    found = judged(
        [run_of("raftlog", kills=landed_kills()), run_of("kafka", kills=landed_kills()[:1])], kill=True
    )
    assert found.outcome == "INCONCLUSIVE"
    assert found.unhealthy == ["Kafka's kill did not land: TestTxnEtl (broker 3): no kill was made"]


def test_a_kill_while_the_test_waited_for_a_parallel_slot_did_not_land() -> None:
    raftlog = run_of("raftlog", kills=landed_kills())
    # ran 0-1 s, paused for a slot until 20 s, then ran to 100 s: the kill at 10 s fell in the pause
    raftlog.results["TestGroupETL"].spans = [[T0, T0 + 1], [T0 + 20, T0 + 100]]
    found = judged([raftlog, run_of("kafka", kills=landed_kills())], kill=True)
    assert found.outcome == "FAIL"


EVENTS: list[dict[str, Any]] = [
    {"Action": "run", "Test": "TestA"},
    {"Action": "pause", "Test": "TestA"},
    {"Action": "cont", "Test": "TestA"},
    {"Action": "output", "Test": "TestA", "Output": "    a_test.go:12: unable to dial\n"},
    {"Action": "output", "Test": "TestA", "Output": "    a_test.go:13: deleting topic x\n"},
    {"Action": "fail", "Test": "TestA", "Elapsed": 2.5},
    {"Action": "run", "Test": "TestB"},
    {"Action": "output", "Test": "TestB", "Output": "    b_test.go:3: broker does not support it\n"},
    {"Action": "skip", "Test": "TestB"},
    {"Action": "run", "Test": "TestC"},
    {"Action": "output", "Output": "panic: invalid: consumed too much\n"},
]


def test_test2json_events_read_into_outcomes_spans_and_key_lines() -> None:
    lines = [json.dumps({"Time": f"2027-01-15T08:00:{i:02d}.123456789Z", **e}) for i, e in enumerate(EVENTS)]
    results: dict[str, verdict.TestResult] = {}
    package_lines: list[str] = []
    seen: list[tuple[str, str]] = []
    verdict.read_events([*lines, "not json"], results, package_lines, lambda a, t, _: seen.append((a, t)))
    verdict.settle(results)
    start = datetime.datetime(2027, 1, 15, 8, 0, 0, 123456, datetime.UTC).timestamp()
    assert results["TestA"].status == "fail" and results["TestA"].lines == ["a_test.go:12: unable to dial"]
    assert results["TestA"].spans == [[start, start + 1], [start + 2, start + 5]]
    assert verdict.skip_reason(results["TestB"]) == "b_test.go:3: broker does not support it"
    assert results["TestC"].status == "died" and results["TestC"].spans[0][1] is None
    assert package_lines == ["panic: invalid: consumed too much"]
    assert seen[:3] == [("run", "TestA"), ("pause", "TestA"), ("cont", "TestA")]


QUIET = {"burners": 0, "kill": False, "run": ".*", "cpus": 2}


def test_the_expectation_is_recorded_only_from_a_whole_quiet_kafka_run() -> None:
    exp = verdict.expectation_from(run_of("kafka", {"TestCase005": "fail"}), LISTED, *VERSIONS, QUIET)
    assert "TestCase005" in exp.fails and "TestCase005" not in exp.passes and exp.recorded[0]["quiet"]
    assert exp.skips == {name: SHARE for name in SKIPPED} and exp.listed == LISTED
    assert Expectation.from_json(json.loads(json.dumps(exp.to_json()))) == exp
    refused = [
        (run_of("raftlog"), QUIET),
        (run_of("kafka"), {**QUIET, "burners": 4}),
        (run_of("kafka"), {**QUIET, "kill": True}),
        (run_of("kafka"), {**QUIET, "run": "TestGroupETL"}),
        (run_of("kafka", {"TestCase100": "died"}), QUIET),
        (run_of("kafka", {"TestCase100": "not run"}), QUIET),
    ]
    for run, conditions in refused:
        with pytest.raises(NotRecordable):
            verdict.expectation_from(run, LISTED, *VERSIONS, conditions)


@pytest.mark.parametrize("others_cpus", [1.5, None])  # busy, unmeasured
def test_a_busy_machine_records_only_a_run_whose_load_excused_nothing(others_cpus: float | None) -> None:
    def busy(changed: dict[str, str]) -> SuiteRun:
        run = run_of("kafka", changed)
        run.others_cpus = others_cpus
        return run

    exp = verdict.expectation_from(busy({}), LISTED, *VERSIONS, QUIET)  # all passed, capability skips
    assert exp.recorded[0]["quiet"] is False and len(exp.passes) == len(LISTED) + len(SUBTESTS) - 4
    with pytest.raises(NotRecordable, match="TestCase005"):
        verdict.expectation_from(busy({"TestCase005": "fail"}), LISTED, *VERSIONS, QUIET)
    scram = busy({})
    scram.results["TestCase006"] = result("skip", ["client_test.go:289: KGO_TEST_SCRAM not set, skipping"])
    with pytest.raises(NotRecordable, match="TestCase006"):
        verdict.expectation_from(scram, LISTED, *VERSIONS, QUIET)


def test_a_new_recording_never_shrinks_what_raftlog_is_held_to() -> None:
    first = verdict.expectation_from(run_of("kafka", {"TestCase005": "fail"}), LISTED, *VERSIONS, QUIET)
    second = verdict.expectation_from(run_of("kafka", {"TestCase009": "fail"}), LISTED, *VERSIONS, QUIET)
    both = verdict.merged(first, second)
    assert {"TestCase005", "TestCase009"} <= set(both.passes) and both.fails == {}
    assert len(both.recorded) == 2
    other = Expectation("v1.22.0", "4.1.1", LISTED, [], {}, {}, [])
    assert verdict.merged(other, second) == second  # another suite: recorded anew


def test_the_committed_expectation_is_whole_and_of_the_pinned_versions() -> None:
    saved = Expectation.from_json(json.loads((ROOT / "scripts" / "franz_go" / "expected.json").read_text()))
    go_mod = (ROOT / "scripts" / "franz_go" / "go.mod").read_text()
    assert f"github.com/twmb/franz-go {saved.franz_go}\n" in go_mod
    from raftlog_bench.kafka_peer import KAFKA_VERSION

    assert saved.kafka == KAFKA_VERSION
    assert len(saved.listed) >= 100 and all(name.startswith("Test") for name in saved.listed)
    named = [*saved.passes, *saved.skips, *saved.fails]
    assert len(named) == len(set(named)), "a test in two of pass, skip and fail"
    assert set(saved.listed) <= set(named), "a listed test Kafka never ended"
    assert all(reason for reason in saved.skips.values()), "a skip without franz-go's reason"
    recorded = saved.recorded[0]
    assert recorded["burners"] == 0 and not recorded["kill"] and recorded["run"] == ".*"
