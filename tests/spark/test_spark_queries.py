"""The Spark tests start a query again only when Spark's Python worker did not connect back in time."""

from __future__ import annotations

import pytest
from spark_queries import RUNS_MAX, WORKER_NOT_CONNECTED, again_if_a_worker_did_not_connect


def test_a_run_whose_worker_did_not_connect_runs_again_and_any_other_failure_fails_at_once() -> None:
    runs: list[int] = []

    def flaky() -> str:
        runs.append(1)
        if len(runs) < RUNS_MAX:
            raise RuntimeError(f"[STREAM_FAILED] terminated with exception: {WORKER_NOT_CONNECTED}.")
        return "done"

    assert again_if_a_worker_did_not_connect(flaky) == "done" and len(runs) == RUNS_MAX

    def broken() -> None:
        runs.append(1)
        raise AssertionError("a record read twice")

    runs.clear()
    with pytest.raises(AssertionError, match="read twice"):
        again_if_a_worker_did_not_connect(broken)
    assert len(runs) == 1

    def never() -> None:
        raise RuntimeError(WORKER_NOT_CONNECTED)

    with pytest.raises(RuntimeError, match=WORKER_NOT_CONNECTED):
        again_if_a_worker_did_not_connect(never)
