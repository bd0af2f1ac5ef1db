"""Other authors' schema-registry suites, unchanged, against a raftlog node (``judges.py`` says which, where
they come from and how each is given the node's URL). The verdict is absolute: each runs at least its
minimum of tests, every failure is one ``expected_failures.json`` lists with its reason, every listed
test ran and failed, and the node answered the suite's requests. A suite that cannot be fetched, built or
started fails the test (``JudgeUnavailable``), never skips it."""

from __future__ import annotations

import json
import pathlib

import judges
import pytest

from raftlog_client.local_cluster import LocalCluster


@pytest.mark.usefixtures("global_compatibility_restored")
@pytest.mark.parametrize("suite", judges.SUITES_RUN, ids=lambda suite: suite.name)
def test_suite_passes_against_raftlog(
    suite: judges.GoSuite | judges.NodeSuite, running_cluster: LocalCluster, tmp_path: pathlib.Path
) -> None:
    url = running_cluster.servers[1]  # any node serves the registry: not the first, the one tests favour
    run, problems = judges.run_judged(suite, url, tmp_path)
    print(judges.report(run, judges.expected_failures().get(suite.name, {})))
    assert not problems, "\n".join(problems)


def test_expected_failures_name_the_suites_and_say_why() -> None:
    """The list names only suites that run, and gives each listed test a reason and words of its failure."""
    table = judges.expected_failures()
    assert set(table) <= {suite.name for suite in judges.SUITES_RUN}, table.keys()
    for suite, tests in table.items():
        for test, failure in tests.items():
            assert failure.reason.strip(), f"{suite}: {test} is listed without a reason"
            assert failure.fails_with.strip(), f"{suite}: {test} is listed without words of its failure"


def _run(**statuses: str) -> judges.SuiteRun:
    results = {name: judges.Outcome(status, f"{name} said why") for name, status in statuses.items()}
    return judges.SuiteRun("suite", results, pathlib.Path("log"))


def _listed(reason: str, fails_with: str = "said why") -> judges.ExpectedFailure:
    return judges.ExpectedFailure(reason, fails_with)


def test_a_run_passes_when_every_failure_is_listed_and_every_listed_test_failed_so() -> None:
    run = _run(a="passed", b="failed", c="passed")
    assert judges.judge(run, 3, {"b": _listed("no /mode yet")}, requests_seen=40) == []


def test_a_listed_test_failing_otherwise_than_listed_fails_the_verdict() -> None:
    listed = {"b": _listed("no /mode yet", "GET /mode")}
    (problem,) = judges.judge(_run(b="failed"), 1, listed, requests_seen=9)
    assert problem == "suite: b failed, but not as listed (no 'GET /mode' in its message):\nb said why"


def test_fewer_tests_than_the_minimum_fail_the_verdict() -> None:
    (problem,) = judges.judge(_run(a="passed", b="skipped"), 2, {}, requests_seen=10)
    assert "1 tests ran (1 passed, 0 failed, 1 skipped), fewer than the 2" in problem


def test_an_unlisted_failure_fails_the_verdict_with_its_message() -> None:
    (problem,) = judges.judge(_run(a="passed", b="failed"), 2, {}, requests_seen=10)
    assert problem == "suite: b failed:\nb said why"


def test_a_listed_test_that_passes_skips_or_is_gone_fails_the_verdict() -> None:
    expected = {"a": _listed("one"), "b": _listed("two"), "c": _listed("three")}
    problems = judges.judge(_run(a="passed", b="skipped", d="passed"), 1, expected, requests_seen=10)
    assert problems == [
        "suite: a passes now: take it off expected_failures.json (one)",
        "suite: b is listed as failing (two) but was skipped",
        "suite: c is listed as failing (three) but did not run",
    ]


def test_a_suite_that_did_not_reach_the_node_fails_the_verdict() -> None:
    (problem,) = judges.judge(_run(a="passed", b="passed"), 2, {}, requests_seen=1)
    assert "the node answered 1 requests for 2 tests" in problem


def test_go_events_give_each_top_level_tests_outcome_and_a_failures_output() -> None:
    events = [
        {"Action": "run", "Test": "TestClient"},
        {"Action": "output", "Test": "TestClient", "Output": "=== RUN   TestClient\n"},
        {"Action": "output", "Test": "TestClient", "Output": "    x.go:9: schema0-key: 404\n"},
        {"Action": "run", "Test": "TestClient/sub"},
        {"Action": "pass", "Test": "TestClient/sub"},
        {"Action": "fail", "Test": "TestClient"},
        {"Action": "run", "Test": "TestOther"},
        {"Action": "pass", "Test": "TestOther"},
        {"Action": "run", "Test": "TestHung"},
        {"Action": "output", "Test": "TestHung", "Output": "=== RUN   TestHung\n"},
    ]
    lines = [json.dumps(event) for event in events] + ["panic: test timed out after 4m30s", "2"]
    results = judges.parse_test2json(lines)
    failure = "=== RUN   TestClient\n    x.go:9: schema0-key: 404\n"
    assert results["TestClient"] == judges.Outcome("failed", failure)
    assert results["TestOther"] == judges.Outcome("passed")
    assert results["TestHung"].status == "failed"
    assert results["TestHung"].message.endswith("panic: test timed out after 4m30s\n2\n")
    assert set(results) == {"TestClient", "TestOther", "TestHung"}
