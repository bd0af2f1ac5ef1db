"""The share group workload (``--workload share``): one share group (KIP-932) of HTTP members, checked by
``jepsen.share_checker``.

Processes (``--concurrency``, at least two): a third (at least one) are producers, the rest the group's
members.

- a producer sends unique, rising numbers to a random partition of ``sq`` (two partitions), one record
  a request, idempotently (its own producer id and sequence): a ``send`` (the queue's, ``ok`` with the
  offset);
- a member joins the run's group (``sg-<run>``) through any node and loops: an ``acquire`` (at most
  ``ACQUIRE_RECORDS_MAX`` records, waiting up to ``ACQUIRE_WAIT_MS``; ``records`` of the ``ok``: key,
  offset, value, delivery count), then an ``ack`` per partition of what it got: each record accepted
  (80%), released (10%), rejected (5%) or left to its lock's expiry (5%). A member the coordinator
  dropped (404) joins again. An acquire that some partition's leader could not serve says ``partial``.

After the faults heal (``finish``): the members accept everything they acquire (``final: true``) until
one acquire invoked after the last send came back empty and whole, or ``DRAIN_BUDGET_S`` passed. Nodes
hold locks ``LOCK_MS`` (``--group-share-record-lock-duration-ms``, unless a ``--serve-arg`` names it), so
the drain waits for held records a few seconds, not Kafka's 30.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import Any

from jepsen.recorder import Recorder
from jepsen.workload import PRODUCER_ID_BASE, Deadline, Http, Operations, Stats, Values, key_of, split_key
from raftlog_contract import share_group_path, share_member_path

TOPIC = "sq"
PARTITIONS = 2
TOPICS = {TOPIC: PARTITIONS}
TOPIC_CONFIGS: dict[str, dict[str, Any]] = {TOPIC: {}}
LOCK_ARG = "--group-share-record-lock-duration-ms"
LOCK_MS = 3_000
ACQUIRE_RECORDS_MAX = 50
ACQUIRE_WAIT_MS = 500
CALL_TIMEOUT_S = 10.0
DRAIN_BUDGET_S = 90.0
KINDS = ("accept", "release", "reject", "hold")
WEIGHTS = (80, 10, 5, 5)


def _code(payload: object) -> object:
    return payload.get("error_code") if isinstance(payload, dict) else None


def serve_args(given: Sequence[str]) -> list[str]:
    return [] if any(a.startswith(LOCK_ARG) for a in given) else [f"{LOCK_ARG}={LOCK_MS}"]


def group_of(run_id: str) -> str:
    return f"sg-{run_id}"


def keys() -> list[str]:
    return [key_of(TOPIC, p) for p in range(PARTITIONS)]


class ShareRun:
    """The workload's processes over one ``Http`` (one attempt per call) and the run's recorder."""

    def __init__(
        self, http: Http, operations: Operations, recorder: Recorder, *, concurrency: int, run_id: str,
        rng: random.Random,
    ) -> None:  # fmt: skip
        self.http, self.operations, self.recorder, self.rng = http, operations, recorder, rng
        self.group = group_of(run_id)
        producers = max(1, concurrency // 3)
        self.producers = range(producers)
        self.members = range(producers, max(concurrency, producers + 1))
        self.member_ids: dict[int, str] = {}
        self.values = Values()
        self.sequences = {p: 0 for p in self.producers}

    async def _join(self, process: int) -> str | None:
        body = {"topics": [TOPIC]}
        kind, _, payload, _ = await self.http.call("POST", share_group_path(self.group), body=body)
        if kind == "ok" and isinstance(payload, dict):
            self.member_ids[process] = str(payload["member_id"])
        return self.member_ids.get(process)

    async def acquire(
        self, process: int, stats: Stats, *, final: bool = False
    ) -> tuple[list[list[Any]], bool]:
        """The records acquired, and whether the acquire was answered whole (every partition served)."""
        member = self.member_ids.get(process) or await self._join(process)
        if member is None:
            return [], False
        wait_ms = LOCK_MS + 1_000 if final else ACQUIRE_WAIT_MS
        params = {"max_records": ACQUIRE_RECORDS_MAX, "timeout": wait_ms, "format": "json",
                  "share.auto.offset.reset": "earliest"}  # fmt: skip
        self.recorder.invoke(process, "acquire", group=self.group, final=final)
        path = f"{share_member_path(self.group, member)}/records"
        kind, status, payload, info = await self.http.call(
            "POST", path, params=params, timeout_s=CALL_TIMEOUT_S + wait_ms / 1000
        )
        fields: dict[str, Any] = dict(info)
        records: list[list[Any]] = []
        if kind == "ok" and isinstance(payload, dict):
            for row in payload["records"]:
                value = self.operations.model.number_of(row)
                records.append(
                    [key_of(row["topic"], row["partition"]), row["offset"], -1 if value is None else value,
                     row["delivery_count"]]
                )  # fmt: skip
            fields["records"] = records
            if payload.get("errors"):
                fields["partial"] = True
        elif status:
            fields.update({"status": status, "error_code": _code(payload)})
            if status == 404:
                self.member_ids.pop(process, None)  # dropped: join again
        self.recorder.complete(process, kind, **fields)
        stats.add("acquire", kind)
        return records, kind == "ok" and not fields.get("partial", False)

    async def ack(self, process: int, acks: list[list[Any]], stats: Stats) -> None:
        """One ``ack`` per partition (each applied all or none)."""
        member = self.member_ids.get(process)
        if member is None or not acks:
            return
        by_key: dict[str, list[list[Any]]] = {}
        for row in acks:
            by_key.setdefault(row[0], []).append(row)
        for key, rows in sorted(by_key.items()):
            topic, partition = split_key(key)
            self.recorder.invoke(process, "ack", group=self.group, acks=rows)
            body = {"acknowledgements": [
                {"topic": topic, "partition": partition, "offset": offset, "type": how}
                for _, offset, how in rows
            ]}  # fmt: skip
            path = f"{share_member_path(self.group, member)}/acknowledgements"
            kind, status, payload, info = await self.http.call(
                "POST", path, body=body, timeout_s=CALL_TIMEOUT_S
            )
            refused = {"status": status, "error_code": _code(payload)} if kind != "ok" else {}
            self.recorder.complete(process, kind, **info, **(refused if status else {}))
            stats.add("ack", kind)

    async def _member_step(self, process: int, stats: Stats) -> None:
        got, _ = await self.acquire(process, stats)
        chosen = [(row, self.rng.choices(KINDS, WEIGHTS)[0]) for row in got]
        await self.ack(process, [[r[0], r[1], k] for r, k in chosen if k != "hold"], stats)

    async def _producer_step(self, process: int, stats: Stats) -> None:
        key = self.rng.choice(keys())
        sequence = self.sequences[process]
        self.sequences[process] += 1
        outcome = await self.operations.send(
            process, key, self.values.take(), (PRODUCER_ID_BASE + process, sequence)
        )
        stats.add("send", outcome.kind)

    async def run_workers(self, *, rate: float, deadline: float | Deadline, stats: Stats) -> None:
        interval = len(self.producers) / rate
        until = Deadline.of(deadline)

        async def loop_of(process: int, step: Callable[[int, Stats], Any], pause_s: float) -> None:
            while until.left() > 0:
                await step(process, stats)
                await asyncio.sleep(min(pause_s, until.left()))

        await asyncio.gather(
            *(loop_of(p, self._producer_step, interval) for p in self.producers),
            *(loop_of(m, self._member_step, 0.05) for m in self.members),
        )

    async def finish(self, stats: Stats, budget_s: float = DRAIN_BUDGET_S) -> dict[str, Any]:
        """The members accept everything until an acquire came back empty and whole."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget_s
        drained = asyncio.Event()

        async def drain(process: int) -> None:
            while not drained.is_set() and loop.time() < deadline:
                got, whole = await self.acquire(process, stats, final=True)
                await self.ack(process, [[r[0], r[1], "accept"] for r in got], stats)
                if not got and whole:
                    drained.set()

        await asyncio.gather(*(drain(m) for m in self.members))
        for member in self.member_ids.values():
            await self.http.call("DELETE", share_member_path(self.group, member), timeout_s=CALL_TIMEOUT_S)
        return {"drained": drained.is_set(), "members_joined": len(self.member_ids)}
