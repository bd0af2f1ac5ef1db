"""The run history: typed events, JSONL read/write, validation and invoke/completion pairing.

The format is specified in docs/jepsen-history.md. Reading is strict about what the checker relies on
(every error names the file and line) and lenient about what it does not: extra fields are kept, and
client operations with an `f` the checker does not know are carried along for the statistics.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypeGuard

EventType: TypeAlias = Literal["invoke", "ok", "fail", "info"]
Process: TypeAlias = int | str
JsonDict: TypeAlias = dict[str, Any]

EVENT_TYPES: frozenset[str] = frozenset({"invoke", "ok", "fail", "info"})
COMPLETION_TYPES: frozenset[str] = frozenset({"ok", "fail", "info"})
KEYED_FS: frozenset[str] = frozenset({"send", "poll", "commit", "committed"})
# the transactional workload's operations (jepsen/txn_workload.py): they name a transaction or a
# transactional id, not one key
TXN_FS: frozenset[str] = frozenset({"txn", "end", "init"})
# the consumer-group workload's member step (jepsen/group_workload.py): what one consume() call saw
GROUP_FS: frozenset[str] = frozenset({"consume"})
GROUP_PROTOCOLS: frozenset[str] = frozenset(
    {"classic", "consumer"}
)  # a consume's "protocol" (classic if none)
# a share group's members (jepsen/share_checker.py): records acquired, acknowledged
SHARE_FS: frozenset[str] = frozenset({"acquire", "ack"})
SHARE_ACK_TYPES: frozenset[str] = frozenset({"accept", "release", "reject"})
CLIENT_FS: frozenset[str] = KEYED_FS | TXN_FS | GROUP_FS | SHARE_FS
ISOLATION_LEVELS: frozenset[str] = frozenset({"read_committed", "read_uncommitted"})
NEMESIS_PROCESS = "nemesis"
# a fault's start and stop, and ``ready``: a node the fault took down or paused, back and ready again
NEMESIS_FS: frozenset[str] = frozenset({"start", "stop", "ready"})


class HistoryError(ValueError):
    """The history does not follow docs/jepsen-history.md; `line` is 1-based (0 when not tied to a line)."""

    def __init__(self, source: str, line: int, message: str) -> None:
        self.source = source
        self.line = line
        self.detail = message
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {message}")


@dataclasses.dataclass(frozen=True)
class Event:
    """One line of the history. `raw` is the line's dict exactly as read (what reports show)."""

    index: int
    time: float
    process: Process
    type: EventType
    f: str
    raw: JsonDict

    @property
    def is_nemesis(self) -> bool:
        return self.process == NEMESIS_PROCESS

    def get(self, name: str, default: Any = None) -> Any:
        return self.raw.get(name, default)

    @property
    def key(self) -> str | None:
        key = self.raw.get("key")
        return key if isinstance(key, str) else None


@dataclasses.dataclass(frozen=True)
class Operation:
    """A client operation: its invoke and the completion that followed it on the same process.

    `completion` is None when the history ends with the operation still in flight; such an operation is
    treated like `info` (it may or may not have happened).
    """

    invoke: Event
    completion: Event | None

    @property
    def process(self) -> Process:
        return self.invoke.process

    @property
    def f(self) -> str:
        return self.invoke.f

    @property
    def key(self) -> str | None:
        return self.invoke.key

    @property
    def type(self) -> Literal["ok", "fail", "info"]:
        if self.completion is None:
            return "info"
        completion_type = self.completion.type
        if completion_type == "invoke":  # pragma: no cover - pairing never produces this
            raise AssertionError(f"completion of {self.invoke.index} is an invoke")
        return completion_type

    @property
    def pending(self) -> bool:
        return self.completion is None

    @property
    def invoke_index(self) -> int:
        return self.invoke.index

    @property
    def complete_index(self) -> int | None:
        """Index of the completion, None while pending (an info that never completed)."""
        return None if self.completion is None else self.completion.index

    def precedes(self, then: Operation) -> bool:
        """This operation completed before ``then`` was invoked (real time)."""
        return self.complete_index is not None and self.complete_index < then.invoke_index

    def events(self) -> list[JsonDict]:
        """The operation's lines, as written (invoke first)."""
        raws = [self.invoke.raw]
        if self.completion is not None:
            raws.append(self.completion.raw)
        return raws

    def result(self, name: str, default: Any = None) -> Any:
        """A field of the completion (e.g. `offset`, `records`), `default` when not completed."""
        if self.completion is None:
            return default
        return self.completion.raw.get(name, default)


@dataclasses.dataclass(frozen=True)
class History:
    """A validated history: all events, the paired client operations and the nemesis events."""

    events: tuple[Event, ...]
    operations: tuple[Operation, ...]
    nemesis: tuple[Event, ...]
    truncated: bool = False
    warnings: tuple[str, ...] = ()

    @property
    def pending(self) -> tuple[Operation, ...]:
        return tuple(op for op in self.operations if op.pending)


# ---------------------------------------------------------------------------------------------------
# Reading and writing


def parse_lines(lines: Iterable[str], source: str = "history.jsonl") -> History:
    """Parse JSONL text lines. A last line that is not valid JSON and has no newline marks truncation."""
    raws: list[JsonDict] = []
    line_numbers: list[int] = []
    truncated = False
    numbered = list(enumerate(lines, start=1))
    for position, (line_no, line) in enumerate(numbered):
        text = line.strip()
        if not text:
            continue
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            is_last = position == len(numbered) - 1
            if is_last and not line.endswith("\n"):
                truncated = True  # a writer was cut off mid-line: keep what is whole
                break
            raise HistoryError(source, line_no, f"not valid JSON ({error.msg})") from error
        if not isinstance(raw, dict):
            raise HistoryError(source, line_no, f"expected a JSON object, got {type(raw).__name__}")
        raws.append(raw)
        line_numbers.append(line_no)
    return build(raws, source=source, line_numbers=line_numbers, truncated=truncated)


def read_history(path: str | pathlib.Path) -> History:
    """Read and validate a history.jsonl file."""
    path = pathlib.Path(path)
    with path.open(encoding="utf-8") as handle:
        return parse_lines(list(handle), source=str(path))


def write_history(path: str | pathlib.Path, events: Iterable[Mapping[str, Any]]) -> None:
    """Write events as JSONL, one compact object per line."""
    path = pathlib.Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for event in events:
            handle.write(dumps_event(event))
            handle.write("\n")


def dumps_event(event: Mapping[str, Any]) -> str:
    return json.dumps(dict(event), separators=(",", ":"), sort_keys=False)


# ---------------------------------------------------------------------------------------------------
# Validation and pairing


def build(
    raws: Sequence[JsonDict],
    *,
    source: str = "history",
    line_numbers: Sequence[int] | None = None,
    truncated: bool = False,
) -> History:
    """Validate event dicts (in file order) and pair each client invoke with its completion."""
    if line_numbers is None:
        line_numbers = range(1, len(raws) + 1)
    events: list[Event] = []
    operations: list[Operation] = []
    nemesis: list[Event] = []
    warnings: list[str] = []
    in_flight: dict[Process, Event] = {}
    unknown_fs: set[str] = set()
    previous_time = float("-inf")
    for position, (raw, line_no) in enumerate(zip(raws, line_numbers, strict=True)):
        event = _event(raw, position, source, line_no)
        if event.time < previous_time:
            warnings.append(f"{source}:{line_no}: time {event.time} is before the previous line's")
        previous_time = max(previous_time, event.time)
        events.append(event)
        if event.is_nemesis:
            _check_nemesis(event, source, line_no)
            nemesis.append(event)
            continue
        if event.f not in CLIENT_FS:
            unknown_fs.add(event.f)
        if event.type == "invoke":
            if event.process in in_flight:
                open_invoke = in_flight[event.process]
                raise HistoryError(
                    source,
                    line_no,
                    f"process {event.process!r} invokes while its invoke at index {open_invoke.index} "
                    "is still in flight (one operation per process)",
                )
            _check_invoke(event, source, line_no)
            in_flight[event.process] = event
            continue
        invoke = in_flight.pop(event.process, None)
        if invoke is None:
            raise HistoryError(
                source, line_no, f"{event.type} of process {event.process!r} without a preceding invoke"
            )
        if event.f != invoke.f or event.raw.get("key") != invoke.raw.get("key"):
            raise HistoryError(
                source,
                line_no,
                f"completion (f={event.f!r}, key={event.raw.get('key')!r}) does not repeat its invoke at "
                f"index {invoke.index} (f={invoke.f!r}, key={invoke.raw.get('key')!r})",
            )
        _check_completion(invoke, event, source, line_no)
        operations.append(Operation(invoke, event))
    for invoke in in_flight.values():
        operations.append(Operation(invoke, None))
    operations.sort(key=lambda op: op.invoke_index)
    if unknown_fs:
        warnings.append(f"client operations with unknown f (only counted): {sorted(unknown_fs)}")
    return History(tuple(events), tuple(operations), tuple(nemesis), truncated, tuple(warnings))


def _event(raw: JsonDict, position: int, source: str, line_no: int) -> Event:
    def fail(message: str) -> HistoryError:
        return HistoryError(source, line_no, message)

    for name in ("index", "time", "process", "type", "f"):
        if name not in raw:
            raise fail(f"missing field {name!r}")
    index = raw["index"]
    if not _is_int(index) or index != position:
        raise fail(f"index is {index!r}, expected {position} (0.. in file order)")
    time = raw["time"]
    if isinstance(time, bool) or not isinstance(time, int | float):
        raise fail(f"time must be a number of seconds, got {time!r}")
    process = raw["process"]
    if not (_is_int(process) or process == NEMESIS_PROCESS):
        raise fail(f"process must be an int or {NEMESIS_PROCESS!r}, got {process!r}")
    event_type = raw["type"]
    if event_type not in EVENT_TYPES:
        raise fail(f"type must be one of {sorted(EVENT_TYPES)}, got {event_type!r}")
    f = raw["f"]
    if not isinstance(f, str) or not f:
        raise fail(f"f must be a non-empty string, got {f!r}")
    return Event(index, float(time), process, event_type, f, raw)


def _check_nemesis(event: Event, source: str, line_no: int) -> None:
    if event.type != "info":
        raise HistoryError(source, line_no, f"nemesis events are type 'info', got {event.type!r}")
    if event.f not in NEMESIS_FS:
        raise HistoryError(source, line_no, f"nemesis f must be one of {sorted(NEMESIS_FS)}, got {event.f!r}")
    fault = event.raw.get("fault")
    if not isinstance(fault, str) or not fault:
        raise HistoryError(source, line_no, f"nemesis event needs a 'fault' string, got {fault!r}")


def _check_invoke(event: Event, source: str, line_no: int) -> None:
    raw = event.raw

    def need(name: str, ok: bool, what: str) -> None:
        if not ok:
            raise HistoryError(
                source, line_no, f"{event.f} invoke: {name} must be {what}, got {raw.get(name)!r}"
            )

    if event.f not in CLIENT_FS:
        return
    if event.f in TXN_FS:
        _check_txn_invoke(event, need)
        return
    if event.f in GROUP_FS:
        need("group", _is_text(raw.get("group")), "a non-empty string")
        need(
            "protocol", raw.get("protocol", "classic") in GROUP_PROTOCOLS, f"one of {sorted(GROUP_PROTOCOLS)}"
        )
        return
    if event.f in SHARE_FS:
        need("group", _is_text(raw.get("group")), "a non-empty string")
        acks = raw.get("acks", [])
        need("acks", isinstance(acks, list) and all(_is_ack_row(row) for row in acks),
             f"a list of [key, offset, one of {sorted(SHARE_ACK_TYPES)}]")  # fmt: skip
        need("final", isinstance(raw.get("final", False), bool), "a boolean")
        return
    need("key", isinstance(raw.get("key"), str) and bool(raw.get("key")), "a 'topic/partition' string")
    if event.f == "send":
        need("value", _is_int(raw.get("value")), "an int")
        has_id, has_sequence = "producer_id" in raw, "sequence" in raw
        if has_id != has_sequence:
            raise HistoryError(source, line_no, "send invoke: producer_id and sequence go together")
        if has_id:
            need("producer_id", _is_int(raw["producer_id"]) or isinstance(raw["producer_id"], str), "an id")
            need("sequence", _is_int(raw["sequence"]), "an int")
    elif event.f == "poll":
        need("offset", _is_int(raw.get("offset")) and raw["offset"] >= 0, "an offset >= 0")
        need("final", isinstance(raw.get("final", False), bool), "a boolean")
        need("isolation", raw.get("isolation", "read_uncommitted") in ISOLATION_LEVELS,
             f"one of {sorted(ISOLATION_LEVELS)}")  # fmt: skip
    elif event.f == "commit":
        need("group", isinstance(raw.get("group"), str), "a string")
        need("offset", _is_int(raw.get("offset")) and raw["offset"] >= 0, "an offset >= 0")
        need("reset", isinstance(raw.get("reset", False), bool), "a boolean")
    elif event.f == "committed":
        need("group", isinstance(raw.get("group"), str), "a string")


def _check_txn_invoke(event: Event, need: Callable[[str, bool, str], None]) -> None:
    raw = event.raw
    if event.f == "init":
        need("transactional_id", _is_text(raw.get("transactional_id")), "a non-empty string")
        return
    need("txn", _is_text(raw.get("txn")), "a non-empty string naming the transaction")
    if event.f == "end":
        need("commit", isinstance(raw.get("commit"), bool), "a boolean (commit, or abort)")
        return
    need("transactional_id", _is_text(raw.get("transactional_id")), "a non-empty string")
    need("intent", raw.get("intent") in ("commit", "abort"), "'commit' or 'abort'")
    writes = raw.get("writes")
    need("writes", isinstance(writes, list) and all(_is_pair(w, str, int) for w in writes),
         "a list of [key, value]")  # fmt: skip
    offsets = raw.get("offsets", [])
    need("offsets", isinstance(offsets, list) and all(_is_offset_row(row) for row in offsets),
         "a list of [group, key, offset]")  # fmt: skip
    consumed = raw.get("consumed", [])
    need("consumed", isinstance(consumed, list) and all(_is_consumed_row(row) for row in consumed),
         "a list of [key, offset, value]")  # fmt: skip


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _is_pair(value: object, first: type, second: type) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], first)
        and isinstance(value[1], second)
        and not isinstance(value[1], bool)
    )


def _is_row(row: object, *fields: Callable[[object], bool]) -> bool:
    """Whether ``row`` is a list of as many values as ``fields``, each passing its field's check."""
    return (
        isinstance(row, list)
        and len(row) == len(fields)
        and all(check(value) for check, value in zip(fields, row, strict=True))
    )


def _is_any(_: object) -> bool:
    return True


def _is_offset_row(row: object) -> bool:
    return _is_row(row, _is_text, _is_text, _is_int)  # [group, key, offset]


def _is_consumed_row(row: object) -> bool:
    return _is_row(row, _is_text, _is_int, _is_any)  # [key, offset, value]


def _check_completion(invoke: Event, event: Event, source: str, line_no: int) -> None:
    raw = event.raw

    def fail(message: str) -> HistoryError:
        return HistoryError(source, line_no, f"{event.f} {event.type}: {message}")

    if event.f in TXN_FS and raw.get("txn") != invoke.raw.get("txn"):
        raise fail(f"names transaction {raw.get('txn')!r}, its invoke {invoke.raw.get('txn')!r}")
    if event.f == "txn":
        written = raw.get("written", [])
        if not (isinstance(written, list) and all(_is_written_row(row) for row in written)):
            raise fail(f"'written' must be a list of [key, value, offset], got {written!r}")
        if event.type == "ok" and len(written) != len(invoke.raw["writes"]):
            raise fail(f"an ok transaction reports every write's offset: {len(invoke.raw['writes'])} "
                       f"writes, {len(written)} offsets")  # fmt: skip
    if event.f in GROUP_FS:
        items = raw.get("items", [])
        bad = (
            next((item for item in items if not _is_group_item(item)), None)
            if isinstance(items, list)
            else items
        )
        if bad is not None or (event.type == "ok" and "items" not in raw):
            raise fail(f"'items' must be a list of assign, revoke, record and error rows, got {bad!r}")
    if event.type != "ok" or event.f not in CLIENT_FS:
        return

    if event.f == "send":
        if not (_is_int(raw.get("offset")) and raw["offset"] >= 0):
            raise fail(f"needs 'offset' (an int >= 0), got {raw.get('offset')!r}")
    elif event.f == "poll":
        records = raw.get("records")
        if not isinstance(records, list):
            raise fail(f"needs 'records' (a list of [offset, value]), got {records!r}")
        for position, record in enumerate(records):
            if not (isinstance(record, list) and len(record) == 2 and _is_int(record[0])):
                raise fail(f"records[{position}] must be [offset, value], got {record!r}")
    elif event.f == "acquire":
        records = raw.get("records")
        if not (isinstance(records, list) and all(_is_acquired_row(row) for row in records)):
            raise fail(f"needs 'records' (a list of [key, offset, value, delivery_count]), got {records!r}")
    elif event.f == "commit":
        if not _is_int(raw.get("committed")):
            raise fail(f"needs 'committed' (the stored offset), got {raw.get('committed')!r}")
    elif event.f == "committed" and not (
        "offset" in raw and (raw["offset"] is None or _is_int(raw["offset"]))
    ):
        raise fail(f"needs 'offset' (int or null), got {raw.get('offset')!r}")


def _is_ack_row(row: object) -> bool:
    return _is_row(row, _is_text, _is_int, lambda kind: kind in SHARE_ACK_TYPES)  # [key, offset, kind]


def _is_acquired_row(row: object) -> bool:  # [key, offset, value, delivery_count]
    return _is_row(row, _is_text, _is_int, _is_any, lambda count: _is_int(count) and count >= 1)


def _is_group_item(item: object) -> bool:
    """A row of a consume's ``items``: ``["assign", generation, member_id, [key...]]``, ``["revoke",
    generation, member_id, [key...], lost]``, ``["record", key, offset, value, generation]`` or
    ``["error", name]``."""
    if not isinstance(item, list) or not item:
        return False
    kind, rest = item[0], item[1:]
    if kind in ("assign", "revoke"):
        shape = len(rest) == (3 if kind == "assign" else 4) and _is_int(rest[0]) and isinstance(rest[1], str)
        return shape and isinstance(rest[2], list) and all(_is_text(k) for k in rest[2])
    if kind == "record":
        return len(rest) == 4 and _is_text(rest[0]) and _is_int(rest[1]) and _is_int(rest[3])
    return kind == "error" and len(rest) == 1


def _is_written_row(row: object) -> bool:  # [key, value, offset]
    return _is_row(row, _is_text, _is_int, lambda value: _is_int(value) and value >= 0)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
