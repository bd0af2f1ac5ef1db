"""Streaming queries of the Spark tests, started again when Spark's own Python worker did not connect in
time. Spark gives a Python worker it starts for a Python data source (the planning, reading and commit
runners of ``format("raftlog")``) 10 s to connect back, a bound written into its PythonWorkerFactory
with no setting; on a machine loaded with other work, a worker importing pyspark takes longer and the
query fails with "Python worker failed to connect back". A query started again from its checkpoint is
what the connector must survive anyway (the tests check it reads and writes each record once across
such restarts); any other failure fails the test as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

WORKER_NOT_CONNECTED = "Python worker failed to connect back"
# A query's runs, the first one included: a run that fails so takes 12 s or more (the 10 s bound, then the
# restart); a loaded six-worker run saw three fail in a row within 25 s, a busy spell of the machine, and
# eight runs outlast one of about 90 s.
RUNS_MAX = 8
AVAILABLE_NOW_S = 120.0  # how long an availableNow query of these tests may take to end


def ended(query: Any) -> Any:
    """An availableNow query once it ended without an error (raised as Spark raises it, the query
    stopped)."""
    try:
        assert query.awaitTermination(AVAILABLE_NOW_S), f"the query did not end in {AVAILABLE_NOW_S:g} s"
    finally:
        query.stop()
    assert query.exception() is None
    return query


def again_if_a_worker_did_not_connect(run: Callable[[], T]) -> T:
    """``run()`` (a query's start and wait, stopping its query when it fails), run again from the query's
    checkpoint while it failed only because a Python worker did not connect back in time."""
    for attempt in range(1, RUNS_MAX + 1):
        try:
            return run()
        except Exception as exc:
            if WORKER_NOT_CONNECTED not in str(exc) or attempt == RUNS_MAX:
                raise
            print(f"spark: run {attempt} of the query: {WORKER_NOT_CONNECTED} in time; starting it again")
    raise AssertionError("unreachable: the last run returns or raises")
