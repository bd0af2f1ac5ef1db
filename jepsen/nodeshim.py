"""Run one raftlog node with two process-level fault hooks, then hand over to the server (``api``).

    python -m jepsen.nodeshim FSYNC_TRACE CLOCK_FILE [--break-markers=MODE] --node-id n1 ...

This is the harness's stand-in for an LD_PRELOAD layer; it patches Python, not libc:

- fsync trace (for the power-loss nemesis): every ``os.fsync``/``os.fdatasync`` of a regular file appends
  ``sync<TAB>path<TAB>size`` to FSYNC_TRACE before it returns to the caller, and ``os.replace``/``os.rename``
  append ``rename<TAB>src<TAB>dst``. Nothing can be acknowledged by the node before the trace line of the
  fsync that made it durable is written (same thread, before the call returns), so "size at the last fsync"
  read from the trace is never below what the node relied on.
- clock skew (for the clock nemesis): ``time.time``/``time.time_ns`` return the real wall clock plus the
  offset (seconds, a float) written in CLOCK_FILE, re-read every 100 ms by a daemon thread. The monotonic
  clock (Raft timers, asyncio) is not touched: a process-level wall-clock skew, not a kernel one.

- ``--break-markers=flip-abort`` (the transactional workload's negative control, ``jepsen.marker_fault``):
  the state machine applies every transaction abort marker as a commit. Only a run that asks for it gets
  it; the option is taken off the arguments before the server sees them.

The shim imports no project package (but ``jepsen.marker_fault`` when asked to break markers); it runs
``raftlog_node`` by name, exactly as ``python -m raftlog_node`` would.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

CLOCK_POLL_S = 0.1


class _Trace:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def write(self, *fields: str) -> None:
        line = ("\t".join(fields) + "\n").encode("utf-8", errors="surrogateescape")
        with self._lock:
            os.write(self._fd, line)


def _install_fsync_trace(trace: _Trace) -> None:
    real_fsync = os.fsync
    real_fdatasync = os.fdatasync
    real_replace = os.replace
    real_rename = os.rename

    def traced(real: Callable[[Any], None]) -> Callable[[Any], None]:
        def call(fd: Any) -> None:
            real(fd)
            number = fd if isinstance(fd, int) else fd.fileno()
            try:
                path = os.readlink(f"/proc/self/fd/{number}")
                size = os.fstat(number).st_size
            except OSError:
                return
            if os.path.isfile(path):
                trace.write("sync", path, str(size))

        return call

    def renamed(real: Callable[..., None]) -> Callable[..., None]:
        def call(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            real(src, dst, *args, **kwargs)
            trace.write("rename", os.path.abspath(os.fsdecode(src)), os.path.abspath(os.fsdecode(dst)))

        return call

    os.fsync = traced(real_fsync)  # type: ignore[assignment]
    os.fdatasync = traced(real_fdatasync)  # type: ignore[assignment]
    os.replace = renamed(real_replace)
    os.rename = renamed(real_rename)


def _install_clock(path: str) -> None:
    real_time = time.time
    real_time_ns = time.time_ns
    offset = [0.0]

    def poll() -> None:
        while True:
            try:
                with open(path, encoding="ascii") as f:
                    offset[0] = float(f.read().strip() or 0.0)
            except (OSError, ValueError):
                offset[0] = 0.0
            time.sleep(CLOCK_POLL_S)

    def skewed_time() -> float:
        return real_time() + offset[0]

    def skewed_time_ns() -> int:
        return real_time_ns() + int(offset[0] * 1e9)

    threading.Thread(target=poll, name="jepsen-clock", daemon=True).start()
    time.time = skewed_time
    time.time_ns = skewed_time_ns


BREAK_MARKERS = "--break-markers="


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        raise SystemExit("usage: python -m jepsen.nodeshim FSYNC_TRACE CLOCK_FILE [--break-markers=MODE] ...")
    trace_path, clock_path, rest = argv[0], argv[1], argv[2:]
    _install_fsync_trace(_Trace(trace_path))
    _install_clock(clock_path)
    if rest and rest[0].startswith(BREAK_MARKERS):
        from jepsen import marker_fault

        try:
            broken = marker_fault.install(rest[0].removeprefix(BREAK_MARKERS))
        except marker_fault.MarkerFaultError as exc:
            raise SystemExit(f"jepsen.nodeshim: {exc}") from exc
        print(f"jepsen.nodeshim: marker path broken on purpose ({broken})", file=sys.stderr, flush=True)
        rest = rest[1:]
    sys.argv = ["raftlog serve", *rest]
    runpy.run_module("raftlog_node", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
