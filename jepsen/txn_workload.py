"""The transactional workload (``--workload txn``): Kafka transactions through confluent-kafka, checked by
``jepsen.txn_checker``.

Every worker is a Kafka client of its own (the HTTP API has no transactional producer): a transactional
producer with its own ``transactional.id`` (``jepsen-<run>-<worker>``), a read_committed consumer in the
worker's group ``ctp<worker>`` and a read_uncommitted consumer (manual assignment, no automatic commits).
Its steps, at random:

- a transaction (45%): one to five records, each to a random partition of ``tx`` and ``ty``, several to
  one partition now and then; one in four is aborted on purpose. Recorded as a ``txn`` operation (begin,
  produce, wait for every delivery report: ``written`` holds each record's offset, so the checker knows
  where the uncommitted records stand) and an ``end`` operation (commit or abort);
- consume-transform-produce (15%): read the group's committed offset of the worker's input partition
  (``committed``, a stable offset: the broker answers once no transaction holds one pending), poll from
  it under read_committed, write one record per input record in a transaction that also sends the offset
  past the last input (``send_offsets_to_transaction``) and names what it ``consumed``; one in five is
  aborted, which must leave the offset where it was;
- a read_committed poll (30%) or a read_uncommitted one (10%) of a random partition from the worker's
  position (one in four from offset 0), through the worker's door: its Kafka consumers, or (``--clients
  http,kafka``: workers take the doors in turn) the HTTP API's ``?isolation=`` reads.

Outcomes (docs/jepsen-history.md): a ``txn`` is ``ok`` when every record was delivered (and the offsets
sent), ``fail`` when nothing was produced, else ``info``; a transaction that is not ``ok`` is aborted. An
``end`` with commit is ``ok`` once ``commit_transaction`` returns; when librdkafka says the transaction
must be aborted instead, the abort follows and ``fail`` means the service acknowledged it; a timeout, a
fatal error (fencing included) or an abort that does not go through is ``info``. Retriable errors are
retried within ``END_TIMEOUT_S``. After an unknown outcome the worker drops its producer and makes a new
one with the same transactional id (``init``: InitProducerId fences the old producer and ends its open
transaction, commits that had reached the coordinator included) before it does anything else.

After the faults heal (``finish``): every worker makes a new producer (``init``), which ends every
transaction still open; every group's committed offset is read (``final``); then each partition is read
from offset 0 under read_committed until the consumer reaches the high watermark read when it began (and
under read_uncommitted, for the statistics: the aborted records are there), each read one ``final`` poll.

Records: the value's number as JSON text, the transaction's name as key, and a header ``v`` with the
number; a poll reads a record as its number only when value and header agree, else as the record's JSON
text (a value never sent, which the checker reports as a phantom read). librdkafka's calls block: each
runs on a daemon thread with a bound of its own (``TxnClient``, in ``jepsen.txn_client``); the history is
written on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jepsen.recorder import Recorder
from jepsen.txn_client import READ_COMMITTED, READ_UNCOMMITTED, HttpReader, TxnClient, transactional_id
from jepsen.workload import Deadline, Http, Stats, Values

TOPICS = {"tx": 3, "ty": 2}
# tx rolls small segments (markers and aborted records across segment ends); ty is fsynced once a second
# by group commit, so a power loss can take the tail of a replica's log, control batches included, which
# must come back from the Raft journal with the aborted index and last stable offset rebuilt
TOPIC_CONFIGS: dict[str, dict[str, Any]] = {
    "tx": {"internal.segment.bytes": 4096},
    "ty": {"flush.policy": "group", "flush.ms": 1000},
}
WRITES_MAX = 5
ABORT_ONE_IN = 4
CTP_ABORT_ONE_IN = 5
CTP_RECORDS_MAX = 4
REWIND_ONE_IN = 4
STEPS = ("txn", "ctp", READ_COMMITTED, READ_UNCOMMITTED)  # a worker's steps, chosen by weight
STEP_WEIGHTS = (45, 15, 30, 10)
WRITE_SHARE = sum(STEP_WEIGHTS[:2]) / sum(STEP_WEIGHTS)  # of the steps, transactions (a txn each)
FINAL_PHASE_BUDGET_S = 120.0


ENDS_SENDING_OFFSETS = "end sending offsets"  # Stats: ends of consume-transform-produce transactions
OFFSET_ENDS_ONE_IN = 10  # --min-ends: at least one in ten of the transactions ended sent offsets


def ended_enough(stats: Stats, min_ends: int) -> bool:
    """``--min-ends``: ``min_ends`` transactions ended, at least one in ``OFFSET_ENDS_ONE_IN`` of them a
    consume-transform-produce one (its offsets sent), so that the checker judges both kinds: under load
    the faulted window may end few, and few of those found input to consume."""
    ended = stats.ops.get("end", {}).get("ok", 0)
    sending = stats.ops.get(ENDS_SENDING_OFFSETS, {}).get("ok", 0)
    return ended >= min_ends and sending >= min_ends // OFFSET_ENDS_ONE_IN


@dataclass
class TxnWorker:
    process: int
    client: TxnClient
    rng: random.Random
    input_key: str  # where its consume-transform-produce step reads
    http: HttpReader | None  # its polls through the HTTP API, else through its Kafka consumers
    positions: dict[tuple[str, str], int] = field(default_factory=dict)  # (isolation, key) -> offset
    count: int = 0

    def next_name(self) -> str:
        self.count += 1
        return f"p{self.process}.{self.count}"


class TxnRun:
    """The workload against one cluster (its Kafka bootstrap servers): the workers, then the final phase."""

    def __init__(
        self,
        bootstrap_servers: str,
        recorder: Recorder,
        keys: Sequence[str],
        *,
        concurrency: int,
        run_id: str,
        rng: random.Random,
        logger: logging.Logger,
        doors: Sequence[str] = ("kafka",),
        http: Http | None = None,
    ) -> None:
        """Worker ``i`` polls through ``doors[i % len(doors)]`` (``http`` needs ``http``); every
        transaction, consume-transform-produce step and final read goes through Kafka clients."""
        if "http" in doors and http is None:
            raise ValueError("polls through the HTTP API need an Http session")
        self.bootstrap_servers = bootstrap_servers
        self.recorder = recorder
        self.keys = list(keys)
        self.logger = logger
        self.values = Values()
        self.workers = [
            TxnWorker(
                process,
                TxnClient(
                    bootstrap_servers,
                    recorder,
                    process=process,
                    logger=logger,
                    transactional=transactional_id(run_id, process),
                ),
                random.Random(rng.getrandbits(64)),
                self.keys[process % len(self.keys)],
                HttpReader(http, recorder)
                if http is not None and doors[process % len(doors)] == "http"
                else None,
            )
            for process in range(concurrency)
        ]
        self.readers: list[TxnClient] = []

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in [*(w.client for w in self.workers), *self.readers]))

    async def run_workers(self, *, rate: float, deadline: float | Deadline, stats: Stats) -> None:
        """Every worker steps until ``deadline``, together at about ``rate`` steps a second."""
        loop = asyncio.get_running_loop()
        interval = len(self.workers) / rate
        until = Deadline.of(deadline)

        async def work(worker: TxnWorker) -> None:
            await asyncio.sleep(worker.rng.uniform(0, interval))
            while until.left() > 0:
                began = loop.time()
                await self.step(worker, stats)
                pause = max(0.0, worker.rng.uniform(0.5, 1.5) * interval - (loop.time() - began))
                await asyncio.sleep(min(pause, until.left()))

        await asyncio.gather(*(work(w) for w in self.workers))

    async def step(self, worker: TxnWorker, stats: Stats) -> None:
        client = worker.client
        if not client.ready:  # at the start, and after an outcome left unknown: a new producer first
            outcome = await client.init(renew=True)
            stats.add("init", outcome.kind)
            return
        choice = worker.rng.choices(STEPS, STEP_WEIGHTS)[0]
        if choice == "txn":
            count = worker.rng.randint(1, WRITES_MAX)
            writes = [(worker.rng.choice(self.keys), self.values.take()) for _ in range(count)]
            commit = worker.rng.randrange(ABORT_ONE_IN) != 0
            await self._transaction(worker, writes, commit, stats)
        elif choice == "ctp":
            await self._consume_transform_produce(worker, stats)
        else:
            key = worker.rng.choice(self.keys)
            if worker.rng.randrange(REWIND_ONE_IN) == 0:
                worker.positions[(choice, key)] = 0
            offset = worker.positions.get((choice, key), 0)
            if worker.http is not None:
                outcome = await worker.http.poll(worker.process, key, offset, choice)
            else:
                outcome = await client.poll(key, offset, choice)
            stats.add("poll", outcome.kind)
            records = outcome.fields.get("records") or []
            if records:
                worker.positions[(choice, key)] = max(offset, int(records[-1][0]) + 1)

    async def _transaction(
        self,
        worker: TxnWorker,
        writes: Sequence[tuple[str, int]],
        commit: bool,
        stats: Stats,
        *,
        offsets: Sequence[tuple[str, str, int]] = (),
        consumed: Sequence[tuple[str, int, Any]] = (),
    ) -> None:
        if not worker.client.ready:  # a wedged call took the producer: a new one first (next step)
            stats.add("txn", "skipped: no producer ready")
            return
        name = worker.next_name()
        intent = "commit" if commit else "abort"
        outcome = await worker.client.transaction(
            name, writes, intent=intent, offsets=offsets, consumed=consumed
        )
        stats.add("txn", outcome.kind)
        if outcome.kind == "fail" and outcome.fields.get("stage") in ("begin", None):
            return  # no transaction was begun: nothing to end
        ended = await worker.client.end(name, commit and outcome.kind == "ok")
        stats.add("end", ended.kind)
        if offsets:
            stats.add(ENDS_SENDING_OFFSETS, ended.kind)

    async def _consume_transform_produce(self, worker: TxnWorker, stats: Stats) -> None:
        client, key = worker.client, worker.input_key
        stored = await client.committed(key)
        stats.add("committed", stored.kind)
        if stored.kind != "ok":
            return
        start = stored.fields.get("offset")
        start = 0 if start is None else int(start)
        polled = await client.poll(key, start, READ_COMMITTED, limit=CTP_RECORDS_MAX)
        stats.add("poll", polled.kind)
        inputs = polled.fields.get("records") or []
        if not inputs:
            return
        writes = [(worker.rng.choice(self.keys), self.values.take()) for _ in inputs]
        consumed = [(key, int(offset), value) for offset, value in inputs]
        sent = [(client.group, key, int(inputs[-1][0]) + 1)]
        commit = worker.rng.randrange(CTP_ABORT_ONE_IN) != 0
        await self._transaction(worker, writes, commit, stats, offsets=sent, consumed=consumed)

    async def finish(self, stats: Stats, budget_s: float = FINAL_PHASE_BUDGET_S) -> dict[str, Any]:
        """After the faults heal: a new producer per worker (ending every open transaction), each group's
        committed offset, then every partition read from 0 under read_committed and read_uncommitted."""
        deadline = time.monotonic() + budget_s
        summary: dict[str, Any] = {"init": {}, "committed": {}, "final_read": {}}

        async def renew(worker: TxnWorker) -> None:
            while True:
                outcome = await worker.client.init(renew=True)
                stats.add("init", outcome.kind)
                if outcome.kind == "ok" or time.monotonic() > deadline:
                    summary["init"][worker.client.transactional_id] = outcome.kind
                    return
                await asyncio.sleep(0.5)

        await asyncio.gather(*(renew(w) for w in self.workers))

        async def offsets(worker: TxnWorker) -> None:
            while True:
                outcome = await worker.client.committed(worker.input_key, final=True)
                stats.add("committed", outcome.kind)
                if outcome.kind == "ok" or time.monotonic() > deadline:
                    summary["committed"][worker.client.group] = outcome.fields.get("offset", outcome.kind)
                    return
                await asyncio.sleep(0.5)

        await asyncio.gather(*(offsets(w) for w in self.workers))
        first = len(self.workers)
        self.readers = [
            TxnClient(
                self.bootstrap_servers,
                self.recorder,
                process=first + i,
                logger=self.logger,
                transactional=None,
            )
            for i in range(len(self.keys))
        ]

        async def read(reader: TxnClient, key: str) -> None:
            for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
                while True:
                    outcome = await reader.final_read(key, isolation)
                    stats.add("poll", outcome.kind)
                    if outcome.kind == "ok" or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.5)
                summary["final_read"].setdefault(key, {})[isolation] = {
                    "complete": outcome.kind == "ok",
                    "end": outcome.fields.get("end", outcome.fields.get("reached")),
                    "high_watermark": outcome.fields.get("high_watermark"),
                    "records": len(outcome.fields.get("records", [])),
                }

        await asyncio.gather(*(read(r, k) for r, k in zip(self.readers, self.keys, strict=True)))
        return summary
