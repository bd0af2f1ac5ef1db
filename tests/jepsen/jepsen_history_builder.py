"""Hand-built histories for the checker tests: a tiny writer of docs/jepsen-history.md events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jepsen.history import History, build


class HistoryBuilder:
    """Appends events with consecutive indexes and times; completions repeat f, key and txn of the invoke."""

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
        repeated = {name: invoke[name] for name in ("key", "txn") if name in invoke}
        return self._add(process=process, type=type, f=invoke["f"], **{**repeated, **fields})

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


class TxnHistory:
    """The transactional workload's operations (docs/jepsen-history.md) over a ``HistoryBuilder``."""

    def __init__(self, h: HistoryBuilder | None = None) -> None:
        self.h = h or HistoryBuilder()

    def txn(
        self,
        process: int,
        name: str,
        writes: list[tuple[str, int]],
        offsets: list[int | None] | None = None,
        *,
        intent: str = "commit",
        type: str = "ok",
        transactional_id: str | None = None,
        sent: Sequence[tuple[str, str, int]] = (),
        consumed: Sequence[tuple[str, int, int]] = (),
    ) -> None:
        """Begin ``name`` and produce ``writes`` (each [key, value]); ``offsets``: each write's delivery
        report (None: no report), all of them by default when ``type`` is ok."""
        self.h.invoke(
            process,
            "txn",
            txn=name,
            transactional_id=transactional_id or f"tid-{process}",
            intent=intent,
            writes=[[k, v] for k, v in writes],
            offsets=[list(row) for row in sent],
            consumed=[list(row) for row in consumed],
        )
        reports = offsets if offsets is not None else [None] * len(writes)
        written = [[k, v, o] for (k, v), o in zip(writes, reports, strict=True) if o is not None]
        self.h.complete(process, type, written=written)

    def end(self, process: int, name: str, commit: bool = True, type: str = "ok") -> tuple[int, int]:
        first = self.h.invoke(process, "end", txn=name, commit=commit)
        return first, self.h.complete(process, type)

    def committed_txn(
        self, process: int, name: str, writes: list[tuple[str, int]], offsets: list[int]
    ) -> None:
        self.txn(process, name, writes, offsets)
        self.end(process, name)

    def aborted_txn(self, process: int, name: str, writes: list[tuple[str, int]], offsets: list[int]) -> None:
        self.txn(process, name, writes, offsets, intent="abort")
        self.end(process, name, commit=False)

    def poll(
        self,
        process: int,
        key: str,
        offset: int,
        records: list[tuple[int, Any]],
        *,
        isolation: str = "read_committed",
        final: bool = False,
        end: int | None = None,
        type: str = "ok",
    ) -> tuple[int, int]:
        extra = {"final": True} if final else {}
        first = self.h.invoke(process, "poll", key=key, offset=offset, isolation=isolation, **extra)
        result: dict[str, Any] = {"records": [list(r) for r in records]} if type == "ok" else {}
        if end is not None:
            result["end"] = end
        return first, self.h.complete(process, type, **result)

    def final_read(self, process: int, key: str, records: list[tuple[int, Any]], end: int) -> None:
        """A complete final read: read_committed from offset 0 to the partition's end."""
        self.poll(process, key, 0, records, final=True, end=end)

    def committed(self, process: int, key: str, group: str, offset: int | None) -> tuple[int, int]:
        return self.h.committed(process, key, group, offset)

    def history(self) -> History:
        return self.h.history()


class GroupHistory:
    """The consumer-group workload's operations (docs/jepsen-history.md) over a ``HistoryBuilder``: time
    is the event's index, in seconds."""

    GROUP = "jg-test"

    def __init__(self, h: HistoryBuilder | None = None, protocol: str | None = None) -> None:
        """``protocol``: what each ``consume`` names (``consumer``: KIP-848's); None names none (classic)."""
        self.h = h or HistoryBuilder()
        self.protocol = {} if protocol is None else {"protocol": protocol}

    def send(self, process: int, key: str, value: int, offset: int | None) -> None:
        self.h.send(process, key, value, offset, type="ok" if offset is not None else "info")

    def consume(self, process: int, *items: list[Any], type: str = "ok") -> tuple[int, int]:
        """A ``consume`` whose completion lists ``items`` (``assign``, ``revoke``, ``record`` below)."""
        first = self.h.invoke(process, "consume", group=self.GROUP, **self.protocol)
        return first, self.h.complete(process, type, items=[list(i) for i in items])

    def commit(
        self,
        process: int,
        key: str,
        offset: int,
        generation: int,
        type: str = "ok",
        *,
        generation_after: int | None = None,
        session_timeout_ms: int = 30_000,
    ) -> tuple[int, int]:
        first = self.h.invoke(
            process, "commit", key=key, group=self.GROUP, offset=offset, generation=generation,
            member_id=f"m{process}", session_timeout_ms=session_timeout_ms,
        )  # fmt: skip
        after = generation if generation_after is None else generation_after
        refused = (
            "STALE_MEMBER_EPOCH" if self.protocol.get("protocol") == "consumer" else "ILLEGAL_GENERATION"
        )
        extra = {"committed": offset} if type == "ok" else {"error_code": refused}
        return first, self.h.complete(process, type, generation_after=after, **extra)

    def committed(self, process: int, key: str, offset: int | None) -> tuple[int, int]:
        return self.h.committed(process, key, self.GROUP, offset)

    def wait(self, seconds: int) -> None:
        """Let ``seconds`` pass (nemesis lines, one a second: the builder's clock is the line index)."""
        for _ in range(seconds // 2):
            self.h.nemesis("start", "clock")
            self.h.nemesis("stop", "clock")

    def history(self) -> History:
        return self.h.history()


def assign(generation: int, member: str, *keys: str) -> list[Any]:
    return ["assign", generation, member, list(keys)]


def revoke(generation: int, member: str, *keys: str, lost: bool = False) -> list[Any]:
    return ["revoke", generation, member, list(keys), lost]


def record(key: str, offset: int, value: Any, generation: int) -> list[Any]:
    return ["record", key, offset, value, generation]
