"""What a test's event loops were waiting on, printed shortly before pytest-timeout fails it.

pytest-timeout dumps every thread's stack, and a test that hangs in an ``await`` shows only its event loop
idle in ``select``. This prints each unfinished asyncio task with the chain of awaits it is suspended in
(coroutine by coroutine, down to the future it waits for), so a hang names its ``await``. Armed per test at
``REPORT_AT`` of the test's timeout, from a timer thread: the loop is idle then, and the report only reads.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from typing import Any, TextIO

import pytest

REPORT_AT = 0.95  # of the test's timeout


def timeout_of(item: pytest.Item) -> float:
    """The test's timeout as pytest-timeout takes it: its marker's, else the ini's (0: none)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    if marker is not None and "timeout" in marker.kwargs:
        return float(marker.kwargs["timeout"])
    try:
        return float(item.config.getini("timeout") or 0)
    except ValueError:
        return 0.0


def await_chain(awaitable: Any) -> list[str]:
    """Each frame of a suspended coroutine chain, outermost first, then what the innermost awaits."""
    lines: list[str] = []
    seen = 0
    while awaitable is not None and seen < 64:
        seen += 1
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is None:
            lines.append(f"    awaiting {awaitable!r}"[:400])
            break
        code = frame.f_code
        lines.append(f'    File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}')
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom", None)
    return lines


def report(out: TextIO | None = None) -> None:
    out = sys.stderr if out is None else out  # the test's captured stream when the report is made
    tasks = [o for o in gc.get_objects() if isinstance(o, asyncio.Task) and not o.done()]
    out.write(f"\n+++ {len(tasks)} unfinished asyncio task(s) at {REPORT_AT:.0%} of the test's timeout +++\n")
    for task in tasks:
        out.write(f"--- {task.get_name()}\n")
        out.write("\n".join(await_chain(task.get_coro())) + "\n")
    out.flush()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    timeout_s = timeout_of(item)
    timer = None
    if timeout_s > 0:
        timer = threading.Timer(timeout_s * REPORT_AT, report)
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
