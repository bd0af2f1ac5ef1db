"""Write the run history (docs/jepsen-history.md) as it happens: one JSON line per event, flushed.

Used from one asyncio event loop only; the file is flushed after every line so a crashed harness still
leaves a readable (possibly truncated) history.
"""

from __future__ import annotations

import json
import time
from typing import IO, Any

NEMESIS = "nemesis"
NEMESIS_FS = ("start", "stop", "ready")  # a fault's start and stop; a node it took back that reports ready
REPEATED = ("key", "txn")  # what a completion repeats of its invoke (docs/jepsen-history.md)


class Recorder:
    def __init__(self, path: str) -> None:
        self._file: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._index = 0
        self._start = time.monotonic()
        self._open: dict[int, dict[str, Any]] = {}  # process -> its invoke in flight
        self._last_ok: dict[str, float] = {}  # f -> the time of its last ok completion
        self._completed: dict[str, list[float]] = {}  # f -> the invoke times of its completed operations

    def now(self) -> float:
        return round(time.monotonic() - self._start, 6)

    def _write(self, event: dict[str, Any]) -> dict[str, Any]:
        line = {"index": self._index, "time": self.now(), **event}
        self._index += 1
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._file.flush()
        return line

    def invoke(self, process: int, f: str, **fields: Any) -> dict[str, Any]:
        if process in self._open:
            raise RuntimeError(f"process {process} invokes {f} while {self._open[process]} is in flight")
        event = self._write({"process": process, "type": "invoke", "f": f, **fields})
        self._open[process] = event
        return event

    def complete(self, process: int, kind: str, **fields: Any) -> dict[str, Any]:
        """Complete the process's operation: ``kind`` is ok, fail or info; ``f``, and ``key`` or ``txn``
        when the invoke has them, are repeated."""
        if kind not in ("ok", "fail", "info"):
            raise ValueError(f"completion type {kind!r}")
        invoke = self._open.pop(process, None)
        if invoke is None:
            raise RuntimeError(f"process {process} completes ({kind}) with nothing in flight")
        repeated = {"f": invoke["f"], **{name: invoke[name] for name in REPEATED if name in invoke}}
        line = self._write({"process": process, "type": kind, **repeated, **fields})
        if kind == "ok":
            self._last_ok[invoke["f"]] = line["time"]
        self._completed.setdefault(invoke["f"], []).append(invoke["time"])
        return line

    def completed(self, fs: tuple[str, ...], since: float) -> int:
        """How many operations of ``fs`` invoked at or after ``since`` have completed."""
        return sum(1 for f in fs for invoked in self._completed.get(f, ()) if invoked >= since)

    def last_ok(self, fs: tuple[str, ...]) -> float | None:
        """The time of the last ok completion of an operation of ``fs`` (the nemesis waits for a write
        acknowledged after a heal), None before any."""
        times = [self._last_ok[f] for f in fs if f in self._last_ok]
        return max(times) if times else None

    def nemesis(self, f: str, fault: str, value: Any, **fields: Any) -> dict[str, Any]:
        if f not in NEMESIS_FS:
            raise ValueError(f"nemesis f {f!r}")
        return self._write(
            {"process": NEMESIS, "type": "info", "f": f, "fault": fault, "value": value, **fields}
        )

    @property
    def in_flight(self) -> int:
        return len(self._open)

    @property
    def count(self) -> int:
        return self._index

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
