"""The liveness bound of the attack tests, measured so that load cannot move it.

A node's ``/status/live`` is answered on its event loop, so how long it waits is how long the loop was
held. On a machine with a CPU to spare that is the CPU the node's own code spent (a callback computing, a
garbage collection, a thread holding the GIL); on a loaded one the wait stretches with the CPUs' queue (a
0.2 s hold was 1.9 s of wall time at load 20), which is the machine's, not the node's. The node exports
that CPU per lateness of its loop as ``raftlog_event_loop_held_cpu_seconds`` (``raftlog.loop_lag``):
``never_held`` reads it around an attack and fails when any lateness held ``bound_s`` or more."""

from __future__ import annotations

import contextlib
import ssl
import time
import urllib.request
from collections.abc import Iterator

FAMILY = "raftlog_event_loop_held_cpu_seconds"


def observations(
    url: str, bound_s: float, token: str | None = None, context: ssl.SSLContext | None = None
) -> tuple[float, float]:
    """The node's loop observations in all, and those that held ``bound_s`` (a bucket bound) or more."""
    request = urllib.request.Request(url + "/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30, context=context) as answer:
        text = answer.read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith(f'{FAMILY}_bucket{{le="{bound_s}"}}') or line.startswith(f"{FAMILY}_count"):
            name, value = line.rsplit(" ", 1)
            values["within" if "_bucket" in name else "all"] = float(value)
    assert len(values) == 2, f"no {FAMILY} bucket of {bound_s} s in the node's /metrics: {values}"
    return values["all"], values["all"] - values["within"]


@contextlib.contextmanager
def never_held(
    url: str, bound_s: float, token: str | None = None, context: ssl.SSLContext | None = None
) -> Iterator[None]:
    """Fails, once the block is done and the node's loop watcher woke after it (a stall left over is
    counted), when the node's loop was held ``bound_s`` of CPU or more meanwhile."""
    before_all, before_over = observations(url, bound_s, token, context)
    yield
    done_all, _ = observations(url, bound_s, token, context)
    deadline = time.monotonic() + 30
    while (after := observations(url, bound_s, token, context))[0] <= done_all:
        assert time.monotonic() < deadline, "the node's loop watcher observed nothing for 30 s"
        time.sleep(0.05)
    held = after[1] - before_over
    assert after[0] > before_all, "the node's loop watcher observed nothing"
    assert held == 0, f"the node's loop was held {bound_s} s of CPU or more {held:.0f} time(s)"
