"""The transactional checker against a model of Kafka's transactions: processes interleave (each
operation's effect lands between its invoke and its completion), acknowledgements are lost, commits time
out before or after they reach the coordinator, and read_committed readers stop at the last stable offset.
Every history the model writes is valid; with the model's marker path broken (abort markers applied as
commits, as ``--break-markers flip-abort`` does to real nodes) or a committed record lost, it is invalid."""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Iterator
from typing import Any

import pytest
from jepsen_history_builder import HistoryBuilder

from jepsen.txn_checker import check

KEYS = ("tx/0", "tx/1", "ty/0")
PROCESSES = 4
STEPS = 160


@dataclasses.dataclass
class Entry:
    value: int | None  # None: a control record (marker)
    txn: str
    producer: int


@dataclasses.dataclass
class OpenTxn:
    name: str
    producer: int
    writes: list[tuple[str, int]]
    offsets: list[tuple[str, str, int]]
    commit_requested: bool = False


class Kafka:
    """Partitions of entries; each transaction's fate is decided by markers. ``flip_abort``: abort markers
    are applied as commits; ``lose``: the first committed record's partition loses it after the fact."""

    def __init__(self, flip_abort: bool = False) -> None:
        self.logs: dict[str, list[Entry]] = {key: [] for key in KEYS}
        self.fate: dict[str, bool] = {}  # txn -> committed
        self.open: dict[int, OpenTxn] = {}  # producer -> its open transaction
        self.offsets: dict[tuple[str, str], int] = {}
        self.flip_abort = flip_abort

    def append(self, key: str, value: int, txn: OpenTxn) -> int:
        self.logs[key].append(Entry(value, txn.name, txn.producer))
        return len(self.logs[key]) - 1

    def end(self, producer: int, commit: bool) -> None:
        txn = self.open.pop(producer)
        applied = commit or self.flip_abort
        self.fate[txn.name] = applied
        for key in sorted({key for key, _ in txn.writes}):
            self.logs[key].append(Entry(None, txn.name, producer))
        if applied:
            for group, key, offset in txn.offsets:
                self.offsets[(group, key)] = offset

    def stable(self, key: str) -> int:
        """The last stable offset: the first offset of the oldest open transaction in the partition."""
        for offset, entry in enumerate(self.logs[key]):
            if entry.value is not None and entry.txn not in self.fate:
                return offset
        return len(self.logs[key])

    def read(self, key: str, start: int, committed: bool, limit: int) -> tuple[list[list[Any]], int | None]:
        end = self.stable(key) if committed else len(self.logs[key])
        records = [
            [offset, entry.value]
            for offset, entry in enumerate(self.logs[key][:end])
            if offset >= start and entry.value is not None and (not committed or self.fate.get(entry.txn))
        ]
        return (records[:limit], None) if len(records) > limit else (records, end)


class Simulation:
    """Processes take turns at random; each operation is three steps: invoke, effect, completion."""

    def __init__(self, seed: int, kafka: Kafka) -> None:
        self.rng = random.Random(seed)
        self.kafka = kafka
        self.h = HistoryBuilder()
        self.values = iter(range(1, 1_000_000))
        self.counts = [0] * PROCESSES

    def run(self) -> HistoryBuilder:
        programs = {p: self.program(p) for p in range(PROCESSES)}
        for _ in range(STEPS * 3):
            process = self.rng.randrange(PROCESSES)
            next(programs[process])
        for process, program in programs.items():  # let each finish what it is doing, then end it all
            while self._busy(process):
                next(program)
        for process in range(PROCESSES):
            self.init(process)
        for process in range(PROCESSES):
            group, key = f"g{process}", KEYS[process % len(KEYS)]
            fields = {"key": key, "group": group, "final": True}
            self._op(process, "committed", fields, functools.partial(self._fetch, group, key, {}))
        for index, key in enumerate(KEYS):
            fields = {"key": key, "offset": 0, "isolation": "read_committed", "final": True}
            self._op(PROCESSES + index, "poll", fields, functools.partial(self._final, key))
        return self.h

    def _final(self, key: str) -> tuple[str, dict[str, Any]]:
        records, end = self.kafka.read(key, 0, True, 10**9)
        return "ok", {"records": records, "end": end, "high_watermark": len(self.kafka.logs[key])}

    def _fetch(self, group: str, key: str, into: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        into["offset"] = self.kafka.offsets.get((group, key))
        return "ok", {"group": group, "offset": into["offset"]}

    def _read(
        self, key: str, start: int, committed: bool, limit: int, into: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        records, end = self.kafka.read(key, start, committed, limit)
        into["records"] = records
        return "ok", {"records": records, **({"end": end} if end is not None else {})}

    def _busy(self, process: int) -> bool:
        return process in self.h._open or process in self.kafka.open

    def _op(self, process: int, f: str, fields: dict[str, Any], effect: Any) -> None:
        """An operation in one go (the final phase)."""
        self.h.invoke(process, f, **fields)
        kind, result = effect()
        self.h.complete(process, kind, **result)

    def steps(self, process: int, f: str, fields: dict[str, Any], effect: Any) -> Iterator[None]:
        """An operation over three turns of the process; ``effect`` returns (completion type, fields)."""
        self.h.invoke(process, f, **fields)
        yield
        kind, result = effect()
        yield
        self.h.complete(process, kind, **result)
        yield

    def init(self, process: int) -> None:
        def effect() -> tuple[str, dict[str, Any]]:
            if process in self.kafka.open:  # InitProducerId aborts what the old producer left open
                self.kafka.end(process, commit=False)
            return "ok", {}

        self._op(process, "init", {"transactional_id": f"tid-{process}"}, effect)

    def program(self, process: int) -> Iterator[None]:
        rng = self.rng
        while True:
            choice = rng.choice(["txn", "txn", "ctp", "poll", "poll-ru"])
            if choice.startswith("poll"):
                committed = choice == "poll"
                key, start = rng.choice(KEYS), rng.choice([0, 0, 2, 5])
                isolation = "read_committed" if committed else "read_uncommitted"
                fields = {"key": key, "offset": start, "isolation": isolation}
                read = functools.partial(self._read, key, start, committed, rng.choice([2, 100]), {})
                yield from self.steps(process, "poll", fields, read)
                continue
            sent: list[tuple[str, str, int]] = []
            consumed: list[list[Any]] = []
            if choice == "ctp":  # consume from the group's committed offset, send the next one
                group, key = f"g{process}", KEYS[process % len(KEYS)]
                stored: dict[str, Any] = {}
                fetch = functools.partial(self._fetch, group, key, stored)
                yield from self.steps(process, "committed", {"key": key, "group": group}, fetch)
                start = stored["offset"] or 0
                got: dict[str, Any] = {}
                fields = {"key": key, "offset": start, "isolation": "read_committed"}
                consume = functools.partial(self._read, key, start, True, 2, got)
                yield from self.steps(process, "poll", fields, consume)
                if not got["records"]:
                    continue
                consumed = [[key, offset, value] for offset, value in got["records"]]
                sent = [(group, key, got["records"][-1][0] + 1)]
            yield from self.transaction(process, sent, consumed)

    def transaction(
        self, process: int, sent: list[tuple[str, str, int]], consumed: list[list[Any]]
    ) -> Iterator[None]:
        rng = self.rng
        self.counts[process] += 1
        name = f"p{process}.{self.counts[process]}"
        writes = [(rng.choice(KEYS), next(self.values)) for _ in range(rng.randint(1, 4))]
        intent = "commit" if rng.random() < 0.7 else "abort"
        txn = OpenTxn(name, process, writes, sent)
        fields = {
            "txn": name,
            "transactional_id": f"tid-{process}",
            "intent": intent,
            "writes": [list(w) for w in writes],
            "offsets": [list(o) for o in sent],
            "consumed": consumed,
        }
        delivered = rng.random() < 0.9

        def produce() -> tuple[str, dict[str, Any]]:
            self.kafka.open[process] = txn
            written = [[key, value, self.kafka.append(key, value, txn)] for key, value in writes]
            if delivered:
                return "ok", {"written": written}
            return "info", {"written": written[: len(written) // 2]}  # some reports lost

        yield from self.steps(process, "txn", fields, produce)
        commit = intent == "commit" and delivered
        ending = rng.choice(["ok", "ok", "ok", "lost-ack", "never-arrived"] + (["refused"] if commit else []))

        def end() -> tuple[str, dict[str, Any]]:
            if ending == "never-arrived":  # the request was lost: the transaction stays open
                return "info", {}
            if ending == "refused":  # the commit was refused and the abort that followed acknowledged
                self.kafka.end(process, commit=False)
                return "fail", {}
            self.kafka.end(process, commit=commit)
            return ("info" if ending == "lost-ack" else "ok"), {}

        yield from self.steps(process, "end", {"txn": name, "commit": commit}, end)
        if ending in ("lost-ack", "never-arrived"):
            self.init(process)  # a new producer, as the workload makes after an unknown outcome
            yield


@pytest.mark.parametrize("seed", range(40))
def test_histories_of_the_model_are_valid(seed: int) -> None:
    kafka = Kafka()
    results = check(Simulation(seed, kafka).run().history())
    assert results["verdict"] == "valid", (seed, results["reasons"], results["anomalies"])
    assert results["stats"]["transactions"].get("committed", 0) > 5


def test_the_models_histories_hold_every_kind_of_outcome() -> None:
    """So that the valid verdicts above mean something: lost acknowledgements both ways, refused commits,
    deliberate aborts, and offsets sent in transactions and read back."""
    seen: dict[str, int] = {}
    offsets = 0
    for seed in range(40):
        stats = check(Simulation(seed, Kafka()).run().history())["stats"]
        for outcome, count in stats["transactions"].items():
            seen[outcome] = seen.get(outcome, 0) + count
        offsets += stats["transactions_sending_offsets"]
    expected = {
        "committed",
        "aborted, deliberately",
        "aborted, on error",
        "unknown, visible",
        "unknown, not visible",
    }
    assert set(seen) == expected, seen
    assert min(seen.values()) >= 10 and offsets >= 40, (seen, offsets)


@pytest.mark.parametrize("seed", range(10))
def test_a_model_whose_abort_markers_commit_is_caught(seed: int) -> None:
    kafka = Kafka(flip_abort=True)
    results = check(Simulation(seed, kafka).run().history())
    assert results["verdict"] == "invalid", (seed, results["stats"])
    assert results["anomaly_counts"]["aborted-read"] > 0, results["anomaly_counts"]


@pytest.mark.parametrize("seed", range(10))
def test_a_model_that_loses_a_committed_record_is_caught(seed: int) -> None:
    kafka = Kafka()
    h = Simulation(seed, kafka).run()
    # a record of a transaction whose commit was acknowledged vanishes from its final read
    acknowledged = _acknowledged(h)
    writer = {
        v: e["txn"] for e in h.events if e["f"] == "txn" and e["type"] == "invoke" for _, v in e["writes"]
    }
    final = next(e for e in h.events if e["process"] >= PROCESSES and e["type"] == "ok" and e.get("records"))
    position = next(i for i, (_, value) in enumerate(final["records"]) if writer[value] in acknowledged)
    lost = final["records"].pop(position)
    results = check(h.history())
    assert results["verdict"] == "invalid", seed
    anomaly = results["anomalies"]["lost-write"][0]
    assert (anomaly["key"], anomaly["value"]) == (final["key"], lost[1])


def _acknowledged(h: HistoryBuilder) -> set[str]:
    """The transactions whose commit was acknowledged: an ``end`` with commit completed ``ok``."""
    asked: dict[int, str] = {}
    done: set[str] = set()
    for event in h.events:
        if event["f"] != "end":
            continue
        if event["type"] == "invoke" and event["commit"]:
            asked[event["process"]] = event["txn"]
        elif event["type"] == "ok" and asked.get(event["process"]) == event["txn"]:
            done.add(event["txn"])
    return done
