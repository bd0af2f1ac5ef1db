"""One worker's Kafka clients in the transactional workload (``jepsen.txn_workload``): a transactional
producer, a read_committed consumer in the worker's group and a read_uncommitted one, through
confluent-kafka, and the HTTP API's ``?isolation=`` reads for workers on that door. Each operation is recorded
(invoke, then its ``Outcome``) in the history. librdkafka's calls block: each runs on a daemon thread with a
bound of its own, and a call wedged past it is left behind (``WEDGED_SLACK_S``); the history is written on the
event loop. Records: the value's number as JSON text, the transaction's name as key, and a header ``v`` with
the number (``record_args``, read back by ``read_back``)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from jepsen.kafka_workload import client_config, committed_offset, error_fields, error_of
from jepsen.recorder import Recorder
from jepsen.workload import POLL_MAX_BYTES, POLL_TIMEOUT_S, POLL_WAIT_MS, Http, split_key
from raftlog_contract import records_path

T = TypeVar("T")
POLL_MESSAGES_MAX = 500
TRANSACTION_TIMEOUT_MS = 15_000
DELIVERY_TIMEOUT_S = 8.0  # message.timeout.ms: below the transaction timeout, as librdkafka requires
INIT_TIMEOUT_S = 10.0
END_TIMEOUT_S = 12.0
OFFSETS_TIMEOUT_S = 8.0
FINAL_READ_TIMEOUT_S = 20.0  # one final read of one partition: from 0 to the high watermark
WEDGED_SLACK_S = 10.0  # past a call's own timeout: the call is left behind (TxnClient)
CLOSE_TIMEOUT_S = 15.0
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: str  # ok | fail | info
    fields: dict[str, Any]


async def on_thread(call: Callable[[], T], bound_s: float, name: str) -> T:
    """``call()`` on a daemon thread named ``name``: its result, or what it raised; TimeoutError when it has
    not returned within ``bound_s`` (librdkafka does not always keep its own timeouts: the call is left
    behind, and its caller no longer uses what it holds)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if done.done():  # given up on
            return
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)

    def run() -> None:
        outcome: tuple[bool, Any]
        try:
            outcome = (True, call())
        except BaseException as exc:  # handed to the waiting coroutine, which raises it
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await asyncio.wait_for(done, bound_s)


def transactional_id(run_id: str, process: int) -> str:
    return f"jepsen-{run_id}-{process}"


def group_of(process: int) -> str:
    return f"ctp{process}"


def record_args(value: int, txn: str) -> dict[str, Any]:
    """``Producer.produce`` arguments for the record of ``value`` in transaction ``txn`` (key and value JSON
    text, so that the HTTP API answers it in its JSON flavour)."""
    return {
        "key": json.dumps(txn).encode(),
        "value": json.dumps(value).encode(),
        "headers": [("v", str(value).encode())],
    }


def number_of(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> Any:
    """The number a record carries when its value and ``v`` header agree, else the record as JSON text
    (a value never sent: the checker's phantom read)."""
    try:
        number = json.loads(value) if value is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        number = None
    if type(number) is int and list(headers) == [("v", str(number).encode())]:
        return number

    def text(data: bytes | None) -> str | None:
        return None if data is None else data.decode("utf-8", "replace")

    return json.dumps(
        {"key": text(key), "value": text(value), "headers": [[k, text(v)] for k, v in headers]},
        sort_keys=True,
    )


def read_back(message: Message) -> Any:
    """The number a consumed record carries (``number_of``)."""
    headers = cast(list[tuple[str, bytes | None]], message.headers() or [])
    return number_of(message.key(), message.value(), headers)


def read_back_row(row: dict[str, Any]) -> Any:
    """The number a record read over the HTTP API carries (``number_of``), from a row of either flavour:
    JSON (key and value as JSON, headers as text) or binary (base64)."""
    try:
        if row.get("format") == "binary":
            key, value = _unbase64(row.get("key")), _unbase64(row.get("value"))
            headers = [(h["key"], _unbase64(h["value"])) for h in row.get("headers") or []]
        else:
            key = None if row.get("key") is None else json.dumps(row["key"]).encode()
            value = None if row.get("value") is None else json.dumps(row["value"]).encode()
            headers = [
                (h["key"], None if h["value"] is None else str(h["value"]).encode()) for h in row["headers"]
            ]
    except (KeyError, TypeError, ValueError, binascii.Error):
        return json.dumps(row, sort_keys=True, default=str)
    return number_of(key, value, headers)


def _unbase64(text: Any) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


class HttpReader:
    """The workload's polls through the HTTP API (``?isolation=``), for the workers whose door is
    ``http``: the same ``poll`` operation, without ``client`` (docs/jepsen-history.md)."""

    def __init__(self, http: Http, recorder: Recorder) -> None:
        self.http = http
        self.recorder = recorder

    async def poll(self, process: int, key: str, offset: int, isolation: str) -> Outcome:
        self.recorder.invoke(process, "poll", key=key, offset=offset, isolation=isolation)
        params = {
            "offset": offset,
            "timeout": POLL_WAIT_MS,
            "max_bytes": POLL_MAX_BYTES,
            "isolation": isolation,
        }
        kind, status, payload, info = await self.http.call(
            "GET", records_path(*split_key(key)), params=params, timeout_s=POLL_TIMEOUT_S
        )
        fields: dict[str, Any] = {"offset": offset, **info}
        if kind == "ok":
            try:
                fields["records"] = [[int(row["offset"]), read_back_row(row)] for row in payload]
            except (KeyError, TypeError, ValueError):
                kind, fields["error"] = "info", f"unexpected answer: {str(payload)[:200]}"
        elif status:
            fields.update({"status": status, "error": str(payload)[:200]})
        self.recorder.complete(process, kind, **fields)
        return Outcome(kind, fields)


class TxnClient:
    """One worker's (or final reader's) Kafka clients: a transactional producer (none for a reader), a
    read_committed consumer in the worker's group and a read_uncommitted one.

    Every librdkafka call runs on a daemon thread of its own and is given a bound: its own timeout plus
    ``WEDGED_SLACK_S``. A call that does not return by then (librdkafka does not always keep its own
    timeouts) completes its operation ``info`` (``wedged``), and the handles it used are left to its
    thread and replaced: a new producer (which must ``init`` first, fencing the old one) or new consumers.
    The client's state (its handles, whether the producer is ready) changes on the event loop only."""

    def __init__(
        self,
        bootstrap_servers: str,
        recorder: Recorder,
        *,
        process: int,
        logger: logging.Logger,
        transactional: str | None,
    ) -> None:
        self.recorder = recorder
        self.process = process
        self.transactional_id = transactional
        self.group = group_of(process)
        common = client_config(bootstrap_servers, logger)
        self.producer_config = {
            **common,
            "transactional.id": transactional,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000),
            "linger.ms": 5,
        }
        self.consumer_config = {
            **common,
            "group.id": self.group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 200,
        }
        self.consumers = self._new_consumers()
        self.producer: Producer | None = None
        self.ready = False  # init_transactions went through on this producer
        self.wedged = 0  # calls left behind

    def _new_consumers(self) -> dict[str, Consumer]:
        return {
            isolation: Consumer({**self.consumer_config, "isolation.level": isolation})
            for isolation in (READ_COMMITTED, READ_UNCOMMITTED)
        }

    async def _blocking(self, call: Callable[[], T], bound_s: float, uses: str) -> T | None:
        """``call()`` on a daemon thread; None if it has not returned within ``bound_s``, and then the
        handles it ``uses`` ("producer" or "consumers") are replaced (the stuck call keeps the old ones)."""
        try:
            return await on_thread(call, bound_s, f"txn-{self.process}")
        except TimeoutError:
            self.wedged += 1
            if uses == "producer":
                self.producer, self.ready = None, False
            else:
                self.consumers = self._new_consumers()
            return None

    def _wedged(self, bound_s: float) -> tuple[str, dict[str, Any]]:
        return "info", {"error": f"wedged: librdkafka did not return within {bound_s:.0f} s", "wedged": True}

    def _let_go(self, producer: Producer | None) -> None:
        """Drop a producer without waiting for what it holds (a new one fences it anyway), on a thread of
        its own: its destruction may wait for its broker threads."""
        if producer is not None:
            threading.Thread(target=_destroy, args=(producer,), name="txn-drop", daemon=True).start()

    async def close(self) -> None:
        producer, consumers = self.producer, list(self.consumers.values())
        self.producer, self.ready = None, False
        self._let_go(producer)

        def close_consumers() -> None:
            for consumer in consumers:
                consumer.close()

        await self._blocking(close_consumers, CLOSE_TIMEOUT_S, "consumers")

    # -- the producer's life ----------------------------------------------------------------------------

    async def init(self, *, renew: bool) -> Outcome:
        """``init``: InitProducerId for the transactional id, on a new producer when ``renew`` or when
        there is none (a producer whose init timed out tries again)."""
        if self.transactional_id is None:
            raise ValueError(f"process {self.process} is a reader: no producer")
        self.recorder.invoke(self.process, "init", transactional_id=self.transactional_id)
        if renew or self.producer is None:
            self._let_go(self.producer)
            self.producer = Producer(self.producer_config)
        self.ready = False
        bound = INIT_TIMEOUT_S + WEDGED_SLACK_S
        result = await self._blocking(functools.partial(_init_transactions, self.producer), bound, "producer")
        kind, fields, usable = result if result is not None else (*self._wedged(bound), False)
        if kind == "ok":
            self.ready = True
        elif not usable:
            self._let_go(self.producer)
            self.producer = None
        self.recorder.complete(self.process, kind, **fields)
        return Outcome(kind, fields)

    # -- a transaction ----------------------------------------------------------------------------------

    async def transaction(
        self,
        name: str,
        writes: Sequence[tuple[str, int]],
        *,
        intent: str,
        offsets: Sequence[tuple[str, str, int]] = (),
        consumed: Sequence[tuple[str, int, Any]] = (),
    ) -> Outcome:
        """``txn``: begin, produce ``writes``, wait for their delivery reports, send ``offsets``. Only with a
        ready producer (``init``)."""
        producer = self.producer
        if producer is None or not self.ready:
            raise RuntimeError(f"process {self.process}: a transaction without a ready producer")
        self.recorder.invoke(
            self.process, "txn", txn=name, transactional_id=self.transactional_id, intent=intent,
            writes=[[k, v] for k, v in writes], offsets=[list(o) for o in offsets],
            consumed=[list(c) for c in consumed], client="kafka",
        )  # fmt: skip
        metadata = self.consumers[READ_COMMITTED].consumer_group_metadata() if offsets else None
        call = functools.partial(_run_transaction, producer, name, writes, offsets, metadata)
        bound = DELIVERY_TIMEOUT_S + OFFSETS_TIMEOUT_S + WEDGED_SLACK_S
        result = await self._blocking(call, bound, "producer")
        kind, fields = result if result is not None else self._wedged(bound)
        if kind == "fail" and fields.get("stage") == "begin":
            self.ready = False  # a producer that cannot begin is renewed before the next try
        self.recorder.complete(self.process, kind, **fields)
        return Outcome(kind, fields)

    async def end(self, name: str, commit: bool) -> Outcome:
        """``end``: commit (or abort) the open transaction."""
        self.recorder.invoke(self.process, "end", txn=name, commit=commit)
        producer = self.producer
        bound = END_TIMEOUT_S + WEDGED_SLACK_S
        if producer is None:  # left to a wedged call: a new producer ends the transaction
            kind, fields = "info", {"error": "no producer"}
        else:
            result = await self._blocking(functools.partial(_end, producer, commit), bound, "producer")
            kind, fields = result if result is not None else self._wedged(bound)
        if kind == "info":
            self.ready = False  # unknown: a new producer (init) ends it before anything else
        self.recorder.complete(self.process, kind, **fields)
        return Outcome(kind, fields)

    # -- reads --------------------------------------------------------------------------------------------

    async def poll(self, key: str, offset: int, isolation: str, *, limit: int = POLL_MESSAGES_MAX) -> Outcome:
        """``poll`` under ``isolation`` from ``offset``: what arrives first (at most ``limit`` records), or
        the partition's end, or nothing within the wait."""
        self.recorder.invoke(
            self.process, "poll", key=key, offset=offset, isolation=isolation, client="kafka"
        )
        call = functools.partial(
            _consume, self.consumers[isolation], key, offset, POLL_TIMEOUT_S / 2, limit=limit
        )
        bound = POLL_TIMEOUT_S + WEDGED_SLACK_S
        result = await self._blocking(call, bound, "consumers")
        if result is None:
            kind, fields = self._wedged(bound)
            fields["offset"] = offset
        else:
            records, end, errors = result
            kind, fields = "ok", {"offset": offset, "records": records}
            if end is not None:
                fields["end"] = end
            if errors:
                fields["errors"] = errors[:5]
        self.recorder.complete(self.process, kind, **fields)
        return Outcome(kind, fields)

    async def committed(self, key: str, *, final: bool = False) -> Outcome:
        """``committed``: the worker's group's offset of ``key`` (librdkafka asks for a stable offset under
        read_committed, and retries while a transaction holds one pending)."""
        flags = {"final": True} if final else {}
        self.recorder.invoke(self.process, "committed", key=key, group=self.group, client="kafka", **flags)
        bound = POLL_TIMEOUT_S + WEDGED_SLACK_S
        partition = TopicPartition(*split_key(key))
        call = functools.partial(committed_offset, self.consumers[READ_COMMITTED], partition, POLL_TIMEOUT_S)
        result = await self._blocking(call, bound, "consumers")
        kind, fields = result if result is not None else self._wedged(bound)
        self.recorder.complete(self.process, kind, group=self.group, **fields)
        return Outcome(kind, fields)

    async def final_read(self, key: str, isolation: str) -> Outcome:
        """A final ``poll``: from offset 0 until the consumer reports the end at or past the high watermark
        read first; ``ok`` (with ``end``) only then."""
        self.recorder.invoke(
            self.process, "poll", key=key, offset=0, isolation=isolation, final=True, client="kafka"
        )
        call = functools.partial(
            _final_read, self.consumers[READ_UNCOMMITTED], self.consumers[isolation], key
        )
        bound = POLL_TIMEOUT_S + FINAL_READ_TIMEOUT_S + WEDGED_SLACK_S
        result = await self._blocking(call, bound, "consumers")
        kind, fields = result if result is not None else self._wedged(bound)
        self.recorder.complete(self.process, kind, **fields)
        return Outcome(kind, fields)


# -- what runs on the threads: librdkafka's blocking calls, no client state ----------------------------


def _destroy(producer: Producer) -> None:
    with contextlib.suppress(
        KafkaException
    ):  # a producer in a fatal state may refuse to purge: dropped anyway
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        producer.flush(0)


def _init_transactions(producer: Producer) -> tuple[str, dict[str, Any], bool]:
    """(kind, fields, whether the producer may try again)."""
    try:
        producer.init_transactions(INIT_TIMEOUT_S)
    except KafkaException as exc:
        error = error_of(exc)
        return "info", error_fields(error), error.retriable() and not error.fatal()
    return "ok", {}, True


def _run_transaction(
    producer: Producer,
    name: str,
    writes: Sequence[tuple[str, int]],
    offsets: Sequence[tuple[str, str, int]],
    metadata: Any,
) -> tuple[str, dict[str, Any]]:
    try:
        producer.begin_transaction()
    except KafkaException as exc:
        return "fail", {"stage": "begin", **error_fields(error_of(exc))}
    reports: dict[int, tuple[KafkaError | None, int]] = {}
    produced = 0
    try:
        for key, value in writes:
            topic, partition = split_key(key)

            def report(error: KafkaError | None, message: Message, value: int = value) -> None:
                offset = None if message is None else message.offset()
                reports[value] = (error, -1 if offset is None else offset)

            producer.produce(topic, partition=partition, on_delivery=report, **record_args(value, name))
            produced += 1
    except (BufferError, KafkaException) as exc:
        kind = "fail" if produced == 0 else "info"
        return kind, {"stage": "produce", "written": _written(writes, reports), "error": str(exc)[:200]}
    left = producer.flush(DELIVERY_TIMEOUT_S + 1.0)
    written = _written(writes, reports)
    errors = [error for error, _ in reports.values() if error is not None]
    if left or errors:
        fields: dict[str, Any] = {"stage": "produce", "written": written}
        fields.update(error_fields(errors[0]) if errors else {"error": f"{left} delivery reports missing"})
        return "info", fields
    if offsets:
        positions = [TopicPartition(*split_key(key), offset) for _, key, offset in offsets]
        try:
            producer.send_offsets_to_transaction(positions, metadata, OFFSETS_TIMEOUT_S)
        except KafkaException as exc:
            return "info", {"stage": "offsets", "written": written, **error_fields(error_of(exc))}
    return "ok", {"written": written}


def _written(
    writes: Sequence[tuple[str, int]], reports: dict[int, tuple[KafkaError | None, int]]
) -> list[list[Any]]:
    return [
        [key, value, reports[value][1]]
        for key, value in writes
        if value in reports and reports[value][0] is None and reports[value][1] >= 0
    ]


def _end(producer: Producer, commit: bool) -> tuple[str, dict[str, Any]]:
    deadline = time.monotonic() + END_TIMEOUT_S
    if not commit:
        return _abort(producer, deadline)
    error = _until_done(producer.commit_transaction, deadline, abortable=True)
    if error is None:
        return "ok", {}
    if error.txn_requires_abort():
        kind, fields = _abort(producer, deadline)
        # the service acknowledged the abort: the refused commit did not happen
        return ("fail" if kind == "ok" else "info"), {"refused": error_fields(error), **fields}
    return "info", error_fields(error)


def _abort(producer: Producer, deadline: float) -> tuple[str, dict[str, Any]]:
    error = _until_done(producer.abort_transaction, deadline)
    return ("ok", {}) if error is None else ("info", {"abort": error_fields(error)})


def _until_done(
    call: Callable[[float], object], deadline: float, abortable: bool = False
) -> KafkaError | None:
    """``call(timeout_s)`` (a commit or an abort) again while it fails retriably before ``deadline``: None
    once it succeeded, else the error that ended it (with ``abortable``, also one that needs an abort)."""
    while True:
        try:
            call(max(0.5, deadline - time.monotonic()))
            return None
        except KafkaException as exc:
            error = error_of(exc)
            if abortable and error.txn_requires_abort():
                return error
            if error.fatal() or not error.retriable() or time.monotonic() >= deadline:
                return error
        time.sleep(0.1)


def _consume(
    consumer: Consumer,
    key: str,
    offset: int,
    wait_s: float,
    *,
    limit: int = POLL_MESSAGES_MAX,
    until: int | None = None,
) -> tuple[list[list[Any]], int | None, list[str]]:
    """Records from ``offset`` (at most ``limit``), and the offset at which the consumer reported the
    partition's end (None if it did not). With ``until``, go on until the end is reported at or past it
    (or the wait runs out)."""
    topic, partition = split_key(key)
    consumer.assign([TopicPartition(topic, partition, offset)])
    records: list[list[Any]] = []
    errors: list[str] = []
    end: int | None = None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for message in consumer.consume(POLL_MESSAGES_MAX, 0.1):
            if message.topic() != topic or message.partition() != partition:
                continue  # an earlier assignment's leftovers
            error = message.error()
            if error is None:
                records.append([message.offset(), read_back(message)])
                end = None
            elif error.code() == KafkaError._PARTITION_EOF:
                end = message.offset()
            else:
                errors.append(error.name())
        if until is None and (records or end is not None):
            break
        if until is not None and end is not None and end >= until:
            break
    if until is None and len(records) > limit:
        records, end = records[:limit], None
    return records, end, errors


def _final_read(watermarks: Consumer, consumer: Consumer, key: str) -> tuple[str, dict[str, Any]]:
    try:
        _low, high = watermarks.get_watermark_offsets(
            TopicPartition(*split_key(key)), timeout=POLL_TIMEOUT_S, cached=False
        )
    except KafkaException as exc:
        return "info", {"stage": "watermarks", **error_fields(error_of(exc))}
    records, end, errors = _consume(consumer, key, 0, FINAL_READ_TIMEOUT_S, until=int(high))
    fields: dict[str, Any] = {"offset": 0, "final": True, "high_watermark": int(high)}
    if errors:
        fields["errors"] = errors[:5]
    if end is None or end < high:
        return "info", {**fields, "reached": end, "records_read": len(records)}
    return "ok", {**fields, "records": records, "end": end}
