"""The hang report names the await a stuck task is suspended in, and finds each test's timeout."""

from __future__ import annotations

import asyncio
import io

import hang_report
import pytest


def test_the_report_follows_a_stuck_task_down_to_the_await_it_waits_in() -> None:
    async def inner(event: asyncio.Event) -> None:
        await event.wait()

    async def outer(event: asyncio.Event) -> None:
        await inner(event)

    async def run() -> str:
        event = asyncio.Event()
        task = asyncio.get_running_loop().create_task(outer(event), name="stuck")
        await asyncio.sleep(0)  # the task runs up to its await
        out = io.StringIO()
        hang_report.report(out)
        event.set()
        await task
        return out.getvalue()

    text = asyncio.run(run())
    stuck = text.split("--- stuck\n", 1)[1].splitlines()
    assert [line.rsplit(" in ", 1)[1] for line in stuck[:3]] == ["outer", "inner", "wait"]
    assert stuck[3].startswith("    awaiting ")


@pytest.mark.timeout(123)
def test_a_tests_timeout_is_its_timeout_markers(request: pytest.FixtureRequest) -> None:
    assert hang_report.timeout_of(request.node) == 123
