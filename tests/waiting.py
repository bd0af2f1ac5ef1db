"""Waiting for a condition in tests that drive real processes: never for a fixed time, always bounded."""

from __future__ import annotations

import asyncio
import inspect
import re
import time
import urllib.request
from collections.abc import Callable
from typing import Any


def wait_for(
    condition: Callable[[], Any],
    what: str,
    timeout_s: float = 60.0,
    every_s: float = 0.2,
    retrying: tuple[type[Exception], ...] = (),
) -> Any:
    """``condition()``'s first true value, asked every ``every_s``; an exception of ``retrying`` counts as
    not yet. AssertionError naming ``what`` and the last value or exception when none comes within
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except retrying as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every_s)
    raise AssertionError(f"not within {timeout_s} s: {what} (last: {last!r})")


async def wait_until(
    check: Callable[[], Any],
    what: str,
    timeout_s: float = 60.0,
    every_s: float = 0.2,
    retrying: tuple[type[Exception], ...] = (),
) -> Any:
    """``wait_for`` on an event loop: ``check()``'s first true value, awaited when ``check`` is a coroutine
    function (a plain one tests state the loop's own tasks change); an exception of ``retrying`` counts as
    not yet. The AssertionError names the last value or exception."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if inspect.isawaitable(last):
                last = await last
        except retrying as exc:
            last = exc
        else:
            if last:
                return last
        await asyncio.sleep(every_s)
    raise AssertionError(f"not within {timeout_s} s: {what} (last: {last!r})")


def node_metric(url: str, name: str) -> float:
    """A node's unlabelled metric from its ``/metrics`` (0 when it does not export it yet)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0
