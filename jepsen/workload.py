"""The Kafka-style queue workload: producers, consumers, commits, and the final read.

A worker runs its operations through one door (``ClientOperations``): here, ``Operations``, where every
operation is one HTTP request to a random node (any node answers; non-leaders forward); or a Kafka client
of its own (``jepsen.kafka_workload``). Each is recorded as an invoke and a completion
(docs/jepsen-history.md). HTTP completions are classified:

- ``ok``: 2xx (and, for a produce, the record's own ``error_code`` is null);
- ``fail`` (definitely not done): 4xx; 503 / a 503xx record error (retriable, not done); a TCP connect
  that failed (the request never left the harness);
- ``info`` (outcome unknown): 504 / a 504xx record error, any other 5xx, a timeout, a connection lost
  after the request was sent.

Every record carries Kafka's record model, so that faults are checked on all of it: its value's number as
its key, headers ``v`` (the number) and ``n`` (a null value), a CreateTime of the run's start (wall clock,
milliseconds) plus the number (recent, so that time-based retention keeps every record of the run); every
``TOMBSTONE_EVERY``-th value is sent as a tombstone (a null value) and every ``NULL_KEY_EVERY``-th without
a key, so a record is known by its ``v`` header (a value both null-keyed and a tombstone has nothing
else). On a LogAppendTime topic (the runner makes one) the leader's clock replaces the CreateTime: such a
record must come back LogAppendTime, stamped within the run (give or take the clock nemesis' skew). A poll
reads a record as the number it carries only when all of that came back as sent; otherwise as the
record's JSON text, a value never sent, which the checker reports as a phantom read.

Workers: ``concurrency`` processes, each doing one operation at a time, together at about ``rate`` operations
per second. Half the workers of each door produce idempotently (``idempotent_worker``: their own
``producer_id`` and an increasing ``sequence``); after an ``info`` they retry the same value with the same
pair (random, up to 3 times), which must not append twice. The others produce plainly and retry a value only
after a ``fail`` (a retry after ``info`` could legitimately duplicate). Each worker is its own consumer group
``g<worker>``: it polls every key from its position, commits positions, and now and then restarts its consumer
from the committed offset (a ``committed`` read)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jepsen.recorder import Recorder
from raftlog_client.session import NoAnswer, NotSent, Session
from raftlog_contract import (
    HIGH_WATERMARK_HEADER,
    JSON_V2,
    LEADER_HEADER,
    NOT_DONE_CODES,
    group_offsets_path,
    offsets_path,
    partition_path,
    records_path,
)

SEND_TIMEOUT_S = 5.0
POLL_WAIT_MS = 200
POLL_TIMEOUT_S = 4.0
POLL_MAX_BYTES = 64 * 1024
RETRIES_MAX = 3
TOMBSTONE_EVERY = 4
NULL_KEY_EVERY = 3
# how far a LogAppendTime stamp may lie outside [the run's start, the read]: the leader's wall clock, which
# the clock nemesis skews by up to 120 s
APPEND_TIME_SLACK_MS = 180_000
FINAL_READ_BUDGET_S = 90.0
FINAL_POLL_ATTEMPTS_MAX = 400
PRODUCER_ID_BASE = 1_000_000
STEPS = ("send", "poll", "commit", "restart")  # a queue worker's steps, chosen by weight
STEP_WEIGHTS = (60, 28, 10, 2)
WRITE_SHARE = STEP_WEIGHTS[0] / sum(STEP_WEIGHTS)  # of the workers' steps, the sends


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: str  # ok | fail | info
    fields: dict[str, Any]


def classify_status(status: int) -> str:
    if 200 <= status < 300:
        return "ok"
    if 400 <= status < 500 or status == 503:
        return "fail"
    return "info"


def classify_record_error(error_code: int) -> str:
    """A per-record error inside a 200 produce answer."""
    if error_code in NOT_DONE_CODES:
        return "fail"
    if 40000 <= error_code < 50000:
        return "fail"
    return "info"


def _error(status: int, body: Any) -> dict[str, Any]:
    if isinstance(body, dict):
        return {
            "status": status,
            "error_code": body.get("error_code"),
            "error": str(body.get("message"))[:200],
        }
    return {"status": status, "error": str(body)[:200]}


class Http:
    """One attempt per call over the client's ``Session`` (no retries: the harness judges every attempt),
    every failure turned into an ``Outcome``."""

    def __init__(self, urls: Sequence[str], rng: random.Random) -> None:
        self.urls = list(urls)
        self.rng = rng
        self.session = Session(limit=0)

    async def close(self) -> None:
        await self.session.close()

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        timeout_s: float = SEND_TIMEOUT_S,
        url: str | None = None,
        accept: str = JSON_V2,
    ) -> tuple[str, int, Any, dict[str, Any]]:
        """``(kind, status, body, extra)``; kind is ok/fail/info by status, or by the network failure."""
        base = url or self.rng.choice(self.urls)
        headers = {"Accept": accept}
        data = None
        if body is not None:
            headers["Content-Type"] = JSON_V2
            data = json.dumps(body).encode()
        node: dict[str, Any] = {"node": base}
        try:
            answer = await self.session.exchange(
                method, base + path, body=data, params=params, headers=headers, timeout_s=timeout_s
            )
        except NotSent as exc:
            return "fail", 0, None, {**node, "error": f"connect: {exc}"}
        except NoAnswer as exc:
            error = "timeout" if exc.timed_out else f"connection: {exc}"[:200]
            return "info", 0, None, {**node, "error": error}
        text = answer.body.decode("utf-8", "replace")
        try:
            payload = json.loads(text) if text else None
        except json.JSONDecodeError:
            payload = text
        leader = answer.header(LEADER_HEADER)
        if leader:
            node["leader"] = leader
        high_watermark = answer.header(HIGH_WATERMARK_HEADER)  # a fetch's: what the read says of the log
        if high_watermark and high_watermark.isdigit():
            node["high_watermark"] = int(high_watermark)
        return classify_status(answer.status), answer.status, payload, node


def key_of(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def split_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


def record_of(value: int, base_ms: int) -> dict[str, Any]:
    """The record a send of ``value`` produces (JSON flavour), in a run that started at ``base_ms``."""
    return {
        "key": None if value % NULL_KEY_EVERY == 0 else value,
        "value": None if value % TOMBSTONE_EVERY == 0 else value,
        "headers": [{"key": "v", "value": str(value)}, {"key": "n", "value": None}],
        "timestamp": base_ms + value,
    }


def _number_of(row: dict[str, Any]) -> int | None:
    """The number a fetched record claims: its key, or (a record sent without a key) its ``v`` header."""
    key = row.get("key")
    if type(key) is int:
        return key
    headers = row.get("headers")
    if key is None and isinstance(headers, list) and headers and isinstance(headers[0], dict):
        text = headers[0].get("value")
        if headers[0].get("key") == "v" and isinstance(text, str) and text.isdigit():
            return int(text)
    return None


@dataclass(frozen=True, slots=True)
class RecordModel:
    """What a workload's records are: the record a send of a value makes (``record_of(value, base_ms)``),
    the value a fetched row claims to be (``number_of``), and what a send's invoke says of its record
    besides the value (``describe``: nothing for the queue; the record key and whether it is a tombstone
    for the compaction workload). A record is read back as its value only when all of it matches."""

    name: str
    record_of: Callable[[int, int], dict[str, Any]]
    number_of: Callable[[dict[str, Any]], int | None]
    describe: Callable[[int], dict[str, Any]] = lambda value: {}


QUEUE = RecordModel("queue", record_of, _number_of)


def read_back(
    row: dict[str, Any],
    base_ms: int,
    *,
    log_append_time: bool = False,
    read_ms: int | None = None,
    model: RecordModel = QUEUE,
) -> Any:
    """The value a fetched record stands for: the number it was sent with, when its key, value, headers,
    timestamp and timestamp type came back as that send made them; else the row itself as JSON text.
    ``log_append_time``: the record's topic is LogAppendTime, so its timestamp is the leader's stamp, which
    must lie between the run's start and ``read_ms`` (when the read was answered), give or take
    ``APPEND_TIME_SLACK_MS``. ``model``: the workload's records (the queue's by default)."""
    number = model.number_of(row)
    if number is not None:
        sent = model.record_of(number, base_ms)
        timestamp = row.get("timestamp")
        if not log_append_time:
            stamped = row.get("timestamp_type") == "CreateTime" and timestamp == sent["timestamp"]
        else:
            if read_ms is None:
                raise ValueError("a LogAppendTime record is read back with the time of its read (read_ms)")
            stamped = (
                row.get("timestamp_type") == "LogAppendTime"
                and type(timestamp) is int
                and base_ms - APPEND_TIME_SLACK_MS <= timestamp <= read_ms + APPEND_TIME_SLACK_MS
            )
        if stamped and all(row.get(field) == sent[field] for field in ("key", "value", "headers")):
            return number
    return json.dumps(row, sort_keys=True)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class ClientOperations(Protocol):
    """What a worker does through one client: the four operations, each recorded as invoke +
    completion, and the end offset the final read needs. ``Operations`` (HTTP, shared by workers) and
    ``jepsen.kafka_workload.KafkaOperations`` (a Kafka client per worker) are the two."""

    client: str
    retry_after_info: bool  # whether an idempotent send may be retried after an unknown outcome

    async def send(self, process: int, key: str, value: int, producer: tuple[int, int] | None) -> Outcome: ...

    async def poll(self, process: int, key: str, offset: int, *, final: bool = False) -> Outcome: ...

    async def commit(self, process: int, key: str, group: str, offset: int) -> Outcome: ...

    async def committed(self, process: int, key: str, group: str) -> Outcome: ...

    async def end_offset(self, key: str) -> int | None: ...


class Operations:
    """The four client operations over the HTTP API, each recorded as invoke + completion."""

    client = "http"
    retry_after_info = True  # the same producer id and sequence: the server appends it at most once

    def __init__(
        self,
        http: Http,
        recorder: Recorder,
        base_ms: int,
        log_append_time_topics: frozenset[str] = frozenset(),
        model: RecordModel = QUEUE,
    ) -> None:
        """``base_ms``: the run's start, wall clock: every record's CreateTime is it plus the value.
        ``log_append_time_topics``: the topics whose leader stamps its clock on every record.
        ``model``: the workload's records."""
        self.http = http
        self.recorder = recorder
        self.base_ms = base_ms
        self.log_append_time_topics = log_append_time_topics
        self.model = model

    async def send(self, process: int, key: str, value: int, producer: tuple[int, int] | None) -> Outcome:
        topic, partition = split_key(key)
        extra: dict[str, Any] = {}
        body: dict[str, Any] = {"records": [self.model.record_of(value, self.base_ms)]}
        if producer is not None:
            extra = {"producer_id": producer[0], "sequence": producer[1]}
            body.update(extra)
        self.recorder.invoke(process, "send", key=key, value=value, **self.model.describe(value), **extra)
        path = partition_path(topic, partition)
        kind, status, payload, info = await self.http.call("POST", path, body=body)
        fields: dict[str, Any] = {"value": value, **info}
        if kind == "ok":
            try:
                row = payload["offsets"][0]
            except (KeyError, IndexError, TypeError):
                kind, fields["error"] = "info", f"unexpected answer: {str(payload)[:200]}"
            else:
                if row.get("error_code") is None:
                    fields["offset"] = int(row["offset"])
                else:
                    kind = classify_record_error(int(row["error_code"]))
                    fields.update({"error_code": row["error_code"], "error": str(row.get("error"))[:200]})
        elif status:
            fields.update(_error(status, payload))
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)

    async def poll(self, process: int, key: str, offset: int, *, final: bool = False) -> Outcome:
        topic, partition = split_key(key)
        flags = {"final": True} if final else {}
        self.recorder.invoke(process, "poll", key=key, offset=offset, **flags)
        path = records_path(topic, partition)
        params = {"offset": offset, "timeout": 0 if final else POLL_WAIT_MS, "max_bytes": POLL_MAX_BYTES}
        kind, status, payload, info = await self.http.call(
            "GET", path, params=params, timeout_s=POLL_TIMEOUT_S
        )
        fields: dict[str, Any] = {"offset": offset, **flags, **info}
        if kind == "ok":
            stamped, read_ms = topic in self.log_append_time_topics, wall_clock_ms()
            try:
                fields["records"] = [
                    [int(r["offset"]), self._read_back(r, stamped, read_ms)] for r in payload
                ]
            except (KeyError, TypeError, ValueError):
                kind, fields["error"] = "info", f"unexpected answer: {str(payload)[:200]}"
        elif status:
            fields.update(_error(status, payload))
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)

    def _read_back(self, row: dict[str, Any], stamped: bool, read_ms: int) -> Any:
        return read_back(row, self.base_ms, log_append_time=stamped, read_ms=read_ms, model=self.model)

    async def commit(self, process: int, key: str, group: str, offset: int) -> Outcome:
        topic, partition = split_key(key)
        self.recorder.invoke(process, "commit", key=key, group=group, offset=offset)
        body = {"offsets": [{"topic": topic, "partition": partition, "offset": offset}]}
        kind, status, payload, info = await self.http.call("POST", group_offsets_path(group), body=body)
        fields: dict[str, Any] = {"group": group, "offset": offset, **info}
        if kind == "ok":
            fields["committed"] = offset
        elif status:
            fields.update(_error(status, payload))
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)

    async def committed(self, process: int, key: str, group: str) -> Outcome:
        topic, partition = split_key(key)
        self.recorder.invoke(process, "committed", key=key, group=group)
        params = {"topic": topic, "partition": partition}
        kind, status, payload, info = await self.http.call("GET", group_offsets_path(group), params=params)
        fields: dict[str, Any] = {"group": group, **info}
        if kind == "ok":
            found = None
            try:
                for row in payload["offsets"]:
                    if row["topic"] == topic and int(row["partition"]) == partition:
                        found = None if row.get("offset") is None else int(row["offset"])
            except (KeyError, TypeError, ValueError):
                kind, fields["error"] = "info", f"unexpected answer: {str(payload)[:200]}"
            fields["offset"] = found
        elif status:
            fields.update(_error(status, payload))
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)

    async def end_offset(self, key: str) -> int | None:
        topic, partition = split_key(key)
        kind, _, payload, _ = await self.http.call("GET", offsets_path(topic, partition))
        if kind == "ok" and isinstance(payload, dict):
            return int(payload["end_offset"])
        return None


@dataclass
class Values:
    """Unique ints across the run."""

    next_value: int = 0

    def take(self) -> int:
        self.next_value += 1
        return self.next_value


def idempotent_worker(process: int, doors: int = 1) -> bool:
    """Half the workers of each door produce idempotently: with ``doors`` doors taken in turn (worker ``i``
    on door ``i % doors``), workers ``0 .. doors-1`` are, the next ``doors`` are not, and so on (a parity
    rule alone made every Kafka worker of ``--clients http,kafka`` plain)."""
    return (process // doors) % 2 == 0


@dataclass
class Worker:
    process: int
    keys: list[str]
    rng: random.Random
    idempotent: bool
    producer_id: int
    sequence: int = 0
    positions: dict[str, int] = field(default_factory=dict)
    committed: dict[str, int] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return f"g{self.process}"

    def choose(self) -> str:
        return self.rng.choices(STEPS, STEP_WEIGHTS)[0]


class Deadline:
    """When the workers stop, in event-loop time. The nemesis moves it later while it waits for the cluster
    to recover from a fault window, so that the windows after it still come, each after the quiet time
    the schedule gave it (``jepsen.nemesis.Nemesis.run``)."""

    def __init__(self, at: float) -> None:
        self.at = at

    def extend(self, at: float) -> None:
        self.at = max(self.at, at)

    def left(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.at - asyncio.get_running_loop().time())

    @classmethod
    def of(cls, deadline: float | Deadline) -> Deadline:
        """``deadline`` as a Deadline (a float is a fixed loop time)."""
        return deadline if isinstance(deadline, Deadline) else cls(deadline)


@dataclass
class Stats:
    ops: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, f: str, kind: str) -> None:
        self.ops.setdefault(f, {}).setdefault(kind, 0)
        self.ops[f][kind] += 1


async def send_with_retries(
    ops: ClientOperations, worker: Worker, key: str, value: int, stats: Stats
) -> None:
    """Send ``value`` to ``key``; retry it (at random, up to ``RETRIES_MAX`` times) after ``fail``, and
    after ``info`` when the worker's producer is idempotent and its door keeps that safe."""
    producer = None
    if worker.idempotent:
        producer = (worker.producer_id, worker.sequence)
        worker.sequence += 1
    for attempt in range(RETRIES_MAX + 1):
        outcome = await ops.send(worker.process, key, value, producer)
        stats.add("send", outcome.kind)
        if outcome.kind == "ok" or attempt == RETRIES_MAX:
            return
        unknown_but_safe = outcome.kind == "info" and worker.idempotent and ops.retry_after_info
        retry = outcome.kind == "fail" or unknown_but_safe
        if not retry or worker.rng.random() < 0.3:
            return
        await asyncio.sleep(worker.rng.uniform(0.05, 0.5))


async def poll_once(ops: ClientOperations, worker: Worker, key: str, stats: Stats) -> None:
    """Poll ``key`` from the worker's position, which moves past what came back."""
    offset = worker.positions.get(key, 0)
    outcome = await ops.poll(worker.process, key, offset)
    stats.add("poll", outcome.kind)
    records = outcome.fields.get("records") or []
    if outcome.kind == "ok" and records:
        worker.positions[key] = max(offset, int(records[-1][0]) + 1)


async def _commit(ops: ClientOperations, worker: Worker, stats: Stats) -> None:
    ahead = [k for k in worker.keys if worker.positions.get(k, 0) > worker.committed.get(k, 0)]
    if not ahead:
        return
    key = worker.rng.choice(ahead)
    offset = worker.positions[key]
    outcome = await ops.commit(worker.process, key, worker.group, offset)
    stats.add("commit", outcome.kind)
    if outcome.kind == "ok":
        worker.committed[key] = offset


async def _restart_consumer(ops: ClientOperations, worker: Worker, stats: Stats) -> None:
    """A consumer restart: resume a key from the group's committed offset."""
    key = worker.rng.choice(worker.keys)
    outcome = await ops.committed(worker.process, key, worker.group)
    stats.add("committed", outcome.kind)
    if outcome.kind == "ok":
        stored = outcome.fields.get("offset")
        worker.positions[key] = 0 if stored is None else int(stored)
        worker.committed[key] = worker.positions[key]


Step = Callable[[ClientOperations, Worker, Values, Stats], Awaitable[None]]


async def queue_step(ops: ClientOperations, worker: Worker, values: Values, stats: Stats) -> None:
    """One operation of the queue workload: a send of a new value, a poll, a commit or a restart."""
    choice = worker.choose()
    if choice == "send":
        await send_with_retries(ops, worker, worker.rng.choice(worker.keys), values.take(), stats)
    elif choice == "poll":
        await poll_once(ops, worker, worker.rng.choice(worker.keys), stats)
    elif choice == "commit":
        await _commit(ops, worker, stats)
    else:
        await _restart_consumer(ops, worker, stats)


async def run_workers(
    clients: Sequence[ClientOperations],
    keys: list[str],
    *,
    rate: float,
    deadline: float | Deadline,
    rng: random.Random,
    stats: Stats,
    step: Step = queue_step,
    doors: int = 1,
) -> None:
    """Run one worker per client until ``deadline``, each doing ``step`` after ``step``;
    worker ``i`` uses ``clients[i]`` (``doors``: how many doors the workers take in turn; half of each
    door's workers produce idempotently: ``idempotent_worker``)."""
    values = Values()
    loop = asyncio.get_running_loop()
    interval = len(clients) / rate
    until = Deadline.of(deadline)

    async def work(worker: Worker) -> None:
        ops = clients[worker.process]
        await asyncio.sleep(worker.rng.uniform(0, interval))
        while until.left() > 0:
            began = loop.time()
            await step(ops, worker, values, stats)
            spent = loop.time() - began
            pause = max(0.0, worker.rng.uniform(0.5, 1.5) * interval - spent)
            await asyncio.sleep(min(pause, until.left()))

    workers = [
        Worker(
            process=i,
            keys=keys,
            rng=random.Random(rng.getrandbits(64)),
            idempotent=idempotent_worker(i, doors),
            producer_id=PRODUCER_ID_BASE + rng.getrandbits(40),
        )
        for i in range(len(clients))
    ]
    await asyncio.gather(*(work(w) for w in workers))


async def final_read(
    readers: Sequence[ClientOperations], keys: list[str], *, first_process: int, stats: Stats
) -> dict[str, Any]:
    """Read every key from offset 0 to its end (``final: true`` polls), process ``first_process + i``
    reading ``keys[i]`` through ``readers[i]``. Returns, per key, the end offset reached and whether the
    read completed."""
    summary: dict[str, Any] = {}
    budget_end = time.monotonic() + FINAL_READ_BUDGET_S

    async def read(process: int, ops: ClientOperations, key: str) -> None:
        end: int | None = None
        offset = 0
        attempts = 0
        while attempts < FINAL_POLL_ATTEMPTS_MAX and time.monotonic() < budget_end:
            attempts += 1
            if end is None:
                end = await ops.end_offset(key)
            outcome = await ops.poll(process, key, offset, final=True)
            stats.add("poll", outcome.kind)
            if outcome.kind != "ok":
                await asyncio.sleep(0.3)
                continue
            records = outcome.fields.get("records") or []
            if records:
                offset = int(records[-1][0]) + 1
                continue
            if end is not None and offset >= end:  # the end, confirmed by an empty poll
                summary[key] = {"end_offset": end, "read_to": offset, "complete": True}
                return
            await asyncio.sleep(0.2)  # empty below the known end (or end unknown): ask again
        summary[key] = {"end_offset": end, "read_to": offset, "complete": False}

    await asyncio.gather(*(read(first_process + i, readers[i], key) for i, key in enumerate(keys)))
    return summary
