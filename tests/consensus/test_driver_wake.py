"""The driver's wake-up pipe never loses a wake-up: whenever a wake-up is marked pending, a byte waits in
the pipe, so the driver's poll returns. (A lost wake-up left proposals waiting for their group's next
timed tick, up to a heartbeat period.)"""

from __future__ import annotations

import os
import select

import pytest

from raftlog.consensus import driver as driver_module
from raftlog.consensus.driver import Driver


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def test_a_wake_during_the_drain_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = Driver(name="wake-test")
    try:
        driver.wake()
        assert driver._wake_pending and _readable(driver._wake_read)
        real_read = os.read
        calls = 0

        def read_racing_a_wake(fd: int, size: int) -> bytes:
            nonlocal calls
            calls += 1
            if calls == 1:
                driver.wake()  # another thread proposes while the driver drains the pipe
            return real_read(fd, size)

        monkeypatch.setattr(driver_module.os, "read", read_racing_a_wake)
        driver._on_wake(driver._wake_read, 0)
        monkeypatch.setattr(driver_module.os, "read", real_read)
        assert not driver._wake_pending or _readable(driver._wake_read), "wake-up marked but pipe empty"
        driver.wake()
        assert _readable(driver._wake_read), "a later wake() must reach the poll"
    finally:
        driver.stop()
