"""A storage background thread (``Periodic``) outlives a bug in its work: logged, counted, run again at the
next interval, as Kafka's scheduler goes on after a task's error; before, the thread ended with it."""

from __future__ import annotations

import logging

import pytest

from raftlog.storage.periodic import Periodic
from tests.waiting import wait_for


def test_work_that_raises_is_logged_counted_and_run_again(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    failed: list[int] = []

    def work() -> None:
        calls.append(len(calls))
        if len(calls) == 2:
            raise KeyError("a bug in the work")

    periodic = Periodic("raftlog-test-periodic", lambda: 0.001, work, on_failure=lambda: failed.append(1))
    with caplog.at_level(logging.ERROR, logger="raftlog.storage"):
        periodic.start()
        try:
            wait_for(lambda: len(calls) >= 5, "the work run again after the one that raised", 30, 0.01)
            thread = periodic._thread
            assert thread is not None and thread.is_alive()
        finally:
            periodic.close()
    assert periodic.failures == 1 and failed == [1]
    assert not thread.is_alive()
    (record,) = [r for r in caplog.records if "raftlog-test-periodic" in r.getMessage()]
    assert record.exc_info is not None and "a bug in the work" in str(record.exc_info[1])
