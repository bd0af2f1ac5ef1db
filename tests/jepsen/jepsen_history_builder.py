"""Hand-built histories for the checker tests: a tiny writer of docs/jepsen-history.md events."""

from __future__ import annotations

from typing import Any

from jepsen.history import History, build


class HistoryBuilder:
    """Appends events with consecutive indexes and times; completions repeat f and key of their invoke."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._open: dict[int, dict[str, Any]] = {}

    def _add(self, **fields: Any) -> int:
        index = len(self.events)
        self.events.append({"index": index, "time": float(index), **fields})
        return index

    def invoke(self, process: int, f: str, **fields: Any) -> int:
        assert process not in self._open, f"process {process} already has an op in flight"
        index = self._add(process=process, type="invoke", f=f, **fields)
        self._open[process] = self.events[index]
        return index

    def complete(self, process: int, type: str, **fields: Any) -> int:
        invoke = self._open.pop(process)
        return self._add(process=process, type=type, f=invoke["f"], key=invoke["key"], **fields)

    # One-shot operations (invoke immediately followed by completion); each returns the two indexes.

    def send(
        self, process: int, key: str, value: int, offset: int | None = None, type: str = "ok", **extra: Any
    ) -> tuple[int, int]:
        first = self.invoke(process, "send", key=key, value=value, **extra)
        result = {"offset": offset} if type == "ok" else {}
        return first, self.complete(process, type, **result)

    def poll(
        self,
        process: int,
        key: str,
        offset: int,
        records: list[tuple[int, Any]] | None,
        final: bool = False,
        type: str = "ok",
    ) -> tuple[int, int]:
        extra = {"final": True} if final else {}
        first = self.invoke(process, "poll", key=key, offset=offset, **extra)
        result = {"records": [list(r) for r in records or []]} if type == "ok" else {}
        return first, self.complete(process, type, **result)

    def commit(
        self, process: int, key: str, group: str, offset: int, committed: int | None, reset: bool = False
    ) -> tuple[int, int]:
        extra = {"reset": True} if reset else {}
        first = self.invoke(process, "commit", key=key, group=group, offset=offset, **extra)
        if committed is None:
            return first, self.complete(process, "info")
        return first, self.complete(process, "ok", committed=committed)

    def committed(self, process: int, key: str, group: str, offset: int | None) -> tuple[int, int]:
        first = self.invoke(process, "committed", key=key, group=group)
        return first, self.complete(process, "ok", offset=offset)

    def nemesis(self, f: str, fault: str, value: Any = "") -> int:
        return self._add(process="nemesis", type="info", f=f, fault=fault, value=value)

    def final_read(self, process: int, key: str, log: list[Any], start: int = 0, chunk: int = 2) -> None:
        """Read `log` (values at offsets 0..) from `start` in chunks, then an empty poll at its end."""
        offset = start
        while offset < len(log):
            records = [(o, log[o]) for o in range(offset, min(offset + chunk, len(log)))]
            self.poll(process, key, offset, records, final=True)
            offset += len(records)
        self.poll(process, key, offset, [], final=True)

    def history(self) -> History:
        return build(self.events)
