"""The consumer-group workload (``--workload group``): one Kafka consumer group through confluent-kafka,
of the classic protocol or (``--group-protocol consumer``) KIP-848's consumer group protocol, checked by
``jepsen.group_checker``.

Processes (``--concurrency`` of them, at least four): a third (at least one) are producers, the rest
but one are the group's members, and the last is the monitor.

- a producer (idempotent) sends unique, rising numbers to a random partition of ``gq`` (four
  partitions), one at a time, and waits for the delivery report: a ``send`` operation (``ok`` with the
  offset; anything else ``info``: no value is sent twice);
- a member subscribes to ``gq`` in the run's group (``jg-<run>``: eager range assignment, manual
  commits, ``auto.offset.reset`` earliest) and loops: a ``consume`` operation is one ``consume()`` call,
  whose completion lists in order what the member saw during it (``items``): each assignment and
  revocation its rebalance callbacks got, with the generation and member id librdkafka holds then
  (parsed from ``consumer_group_metadata()``; a revocation says whether the assignment was lost), and
  each record delivered, with the generation it was delivered under. About once a second it commits,
  synchronously, as a consumer that commits before it goes on: a ``commit`` operation per partition it
  owns with a new position (the offset past the last record it delivered), under the generation it was
  assigned in (a commit without an answer in 10 s completes ``info`` and the member goes on). A
  partition it no longer owns, or a generation librdkafka has since left, is not committed (Kafka takes
  a commit of any partition from a current member: one that committed what it does not own could lower
  another's offset). The commit names its generation and member id before the call (``generation``),
  the generation after it (``generation_after``), and the member's ``session_timeout_ms``;
- the monitor reads the group's committed offset of every partition about once a second (``committed``,
  a consumer with the group's id that never joins it).

Classic members alternate heartbeat intervals of 1 and 3 s (session timeout 30 s), so that after a
coordinator failover they find out at different times.

With ``--group-protocol consumer`` every member is a librdkafka consumer with ``group.protocol=consumer``:
the coordinator assigns (its default assignor, ``uniform``), incrementally (an assignment callback adds
partitions, a revocation takes some away), and the member's "generation" is its member epoch, which
librdkafka reports in ``consumer_group_metadata()`` and which moves on at the group's epoch changes
without a callback. A member records the highest epoch it has held (read at each callback and before each
``consume()``: an epoch of 0 or -1 while it rejoins is not one it holds partitions in); its records are
delivered under it and it commits under its current epoch, as before. Session timeout and heartbeat
interval are the group's, from the coordinator (librdkafka refuses ``session.timeout.ms``,
``heartbeat.interval.ms`` and ``partition.assignment.strategy`` with that protocol): the node's
``--group-consumer-session-timeout-ms`` (30 s here, as the classic members') and heartbeat interval
(5 s; a group config may not go below it, as in Kafka); members heartbeat on timers of their own, so they
still find out about a failover at different times. Nodes run with ``--group-initial-rebalance-delay-ms=0``
(Kafka's setting for tests; ``raftlog dev``'s default) unless a ``--serve-arg`` names it: the first
member to rejoin an empty group is assigned at once, not after the others joined too.

After the faults heal (``finish``): the members go on consuming and committing until the group's
committed offset of every partition has reached its high watermark (read once the producers stopped),
or ``DRAIN_BUDGET_S`` passed; then the monitor reads every committed offset once more (``final``).

librdkafka's calls block: each runs on a daemon thread with a bound (``_on_thread``); the history is
written on the event loop. A member's rebalance callbacks run inside its ``consume()`` call, on that
thread, and only append to the list the operation completes with.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
import random
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient

from jepsen.kafka_workload import client_config, committed_offset, error_fields, error_of
from jepsen.recorder import Recorder
from jepsen.txn_client import on_thread, read_back
from jepsen.workload import Deadline, Stats, Values, key_of, split_key

T = TypeVar("T")

TOPIC = "gq"
PARTITIONS = 4
TOPICS = {TOPIC: PARTITIONS}
TOPIC_CONFIGS: dict[str, dict[str, Any]] = {TOPIC: {}}
INITIAL_DELAY_ARG = "--group-initial-rebalance-delay-ms"
SERVE_ARGS = (f"{INITIAL_DELAY_ARG}=0",)
SESSION_TIMEOUT_MS = 30_000
CLASSIC, CONSUMER = "classic", "consumer"
PROTOCOLS = (CLASSIC, CONSUMER)  # the group protocols a run may choose (--group-protocol)
CONSUMER_SESSION_ARG = "--group-consumer-session-timeout-ms"
HEARTBEAT_INTERVALS_MS = (1_000, 3_000)  # member i takes [i % 2]
MAX_POLL_INTERVAL_MS = 45_000  # the rebalance timeout librdkafka sends
CONSUME_MESSAGES_MAX = 200
CONSUME_WAIT_S = 0.2  # short: what a member saw is placed in time to within about this
COMMIT_EVERY_S = 1.0
MONITOR_EVERY_S = 1.0
DELIVERY_TIMEOUT_S = 8.0
CALL_TIMEOUT_S = 5.0
STATISTICS_INTERVAL_MS = 1000  # how often a member's librdkafka says which node it takes for coordinator
COMMIT_BOUND_S = 10.0  # librdkafka's synchronous commit waits for a coordinator without a bound of its own
WEDGED_SLACK_S = 10.0  # past a call's own timeout: left behind on its thread
DRAIN_BUDGET_S = 60.0
CLOSE_TIMEOUT_S = 15.0
CGMD_MAGIC = b"CGMDv2:"
_LEFT_BEHIND: list[Consumer] = []  # consumers a call still holds: never destroyed under it
# Commit refusals that say the commit was not applied: the member is fenced or the group rebalances
# (Kafka's coordinator checks these before it writes), or librdkafka did not send it.
NOT_COMMITTED = frozenset({
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.STALE_MEMBER_EPOCH,  # the consumer protocol's ILLEGAL_GENERATION
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError._NO_OFFSET,
    KafkaError._ASSIGNMENT_LOST,
    KafkaError._STATE,
})  # fmt: skip


def group_of(run_id: str) -> str:
    return f"jg-{run_id}"


def keys() -> list[str]:
    return [key_of(TOPIC, p) for p in range(PARTITIONS)]


def roles(concurrency: int) -> tuple[range, range, int]:
    """(producer processes, member processes, the monitor's process) for ``concurrency`` processes."""
    if concurrency < 4:
        raise ValueError(f"the group workload needs --concurrency of at least 4, got {concurrency}")
    producers = max(1, concurrency // 3)
    return range(producers), range(producers, concurrency - 1), concurrency - 1


def parse_group_metadata(data: bytes) -> tuple[int, str]:
    """(generation, member id) from librdkafka's serialized consumer group metadata: the magic
    ``CGMDv2:``, the generation (int32, host order), then the group id and member id, each NUL-ended."""
    if not data.startswith(CGMD_MAGIC) or len(data) < len(CGMD_MAGIC) + 4:
        raise ValueError(f"not librdkafka's consumer group metadata: {data[:16]!r}")
    (generation,) = struct.unpack_from("=i", data, len(CGMD_MAGIC))
    rest = data[len(CGMD_MAGIC) + 4 :].split(b"\x00")
    member = rest[1].decode("utf-8", "replace") if len(rest) > 1 else ""
    return int(generation), member


def group_metadata(consumer: Consumer) -> tuple[int, str]:
    return parse_group_metadata(bytes(consumer.consumer_group_metadata()))


def serve_args(given: Sequence[str]) -> list[str]:
    """The nodes' serve options for this workload: the group's first rebalance without a delay, and a
    consumer protocol member's session of ``SESSION_TIMEOUT_MS`` as a classic member's, unless ``given``
    chooses them."""
    args = [] if any(arg.startswith(INITIAL_DELAY_ARG) for arg in given) else list(SERVE_ARGS)
    if not any(arg.startswith(CONSUMER_SESSION_ARG) for arg in given):
        args.append(f"{CONSUMER_SESSION_ARG}={SESSION_TIMEOUT_MS}")
    return args


async def _on_thread(call: Callable[[], T], bound_s: float) -> T | None:
    """``call()`` on a daemon thread (``on_thread``); None when it has not returned within ``bound_s``
    (the call is left behind, its client no longer used)."""
    try:
        return await on_thread(call, bound_s, "group-call")
    except TimeoutError:
        return None


def coordinator_of(statistics: str) -> str | None:
    """The group coordinator's address (host:port) in librdkafka's statistics JSON: the logical broker
    ``GroupCoordinator`` names the broker FindCoordinator gave the client; None when it knows none."""
    try:
        broker = json.loads(statistics).get("brokers", {}).get("GroupCoordinator") or {}
    except (ValueError, AttributeError):
        return None
    name = broker.get("nodename") if isinstance(broker, dict) else None
    return name if isinstance(name, str) and name else None


# ---------------------------------------------------------------------------------------------------
# The processes


class GroupProducer:
    """An idempotent producer: one ``send`` at a time."""

    def __init__(self, config: dict[str, Any], recorder: Recorder, process: int) -> None:
        self.config = {**config, "enable.idempotence": True, "linger.ms": 2,
                       "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000)}  # fmt: skip
        self.recorder, self.process = recorder, process
        self.producer: Producer | None = Producer(self.config)

    async def send(self, key: str, value: int) -> str:
        self.recorder.invoke(self.process, "send", key=key, value=value, client="kafka")
        if self.producer is None:
            self.producer = Producer(self.config)
        result = await _on_thread(
            lambda: _produce(self.producer, key, value), DELIVERY_TIMEOUT_S + WEDGED_SLACK_S
        )
        if result is None:
            kind, fields = "info", {"error": "wedged: librdkafka did not return", "wedged": True}
            self.producer = None
        else:
            kind, fields = result
            if fields.get("fatal"):
                self.producer = None  # a new producer (a new idempotent session) for the next value
        self.recorder.complete(self.process, kind, **fields)
        return kind

    def close(self) -> None:
        if self.producer is not None:
            with contextlib.suppress(KafkaException):
                self.producer.flush(0)
            self.producer = None


def _produce(producer: Producer | None, key: str, value: int) -> tuple[str, dict[str, Any]]:
    if producer is None:
        return "info", {"error": "no producer"}
    topic, partition = split_key(key)
    reports: list[tuple[KafkaError | None, int]] = []

    def report(error: KafkaError | None, message: Message) -> None:
        offset = None if message is None else message.offset()
        reports.append((error, -1 if offset is None else offset))

    try:
        producer.produce(
            topic, partition=partition, key=key.encode(), value=str(value).encode(),
            headers=[("v", str(value).encode())], on_delivery=report,
        )  # fmt: skip
    except (BufferError, KafkaException) as exc:
        return "fail", {"error": f"produce: {exc}"[:200]}
    producer.flush(DELIVERY_TIMEOUT_S + 1.0)
    if not reports:
        return "info", {"error": "no delivery report"}
    error, offset = reports[0]
    if error is None and offset >= 0:
        return "ok", {"offset": offset}
    fields: dict[str, Any] = error_fields(error) if error is not None else {"error": "no offset"}
    if error is not None and error.fatal():
        fields["fatal"] = True
    return "info", fields


@dataclass
class Member:
    """One member of the group: its consumer and what its rebalance callbacks told it."""

    process: int
    session_timeout_ms: int
    incremental: bool = False  # the consumer protocol's: callbacks add and take away partitions
    consumer: Consumer = field(init=False)  # made with the member's callbacks
    items: list[list[Any]] = field(default_factory=list)  # what the running consume() saw, in order
    owned: set[str] = field(default_factory=set)  # partitions of its current assignment
    generation: int = -1  # of its current assignment (consumer protocol: the highest member epoch held)
    member_id: str = ""
    positions: dict[str, int] = field(default_factory=dict)  # next offset per owned partition
    committed: dict[str, int] = field(default_factory=dict)  # what it last committed, this assignment
    wedged: bool = False
    committing: bool = False  # a commit call has not returned (it may outlast its operation's bound)
    coordinator: str | None = None  # the group coordinator's address, as its last statistics said

    def on_statistics(self, statistics: str) -> None:
        self.coordinator = coordinator_of(statistics)

    def epoch_seen(self, epoch: int) -> None:
        """The consumer protocol's member epoch as librdkafka holds it now: the member's generation rises
        to it (epochs only rise; 0 or -1 while it rejoins are not epochs it holds partitions in)."""
        if self.incremental and epoch > self.generation:
            self.generation = epoch

    def on_assign(self, consumer: Consumer, partitions: list[KafkaPartition]) -> None:
        generation, member_id = group_metadata(consumer)
        keys = sorted(key_of(p.topic, p.partition) for p in partitions)
        if self.incremental:  # partitions added to what it holds
            self.epoch_seen(generation)
            self.items.append(["assign", self.generation, member_id, keys])
            self.owned |= set(keys)
            self.member_id = member_id
            for key in keys:
                self.positions.pop(key, None)
                self.committed.pop(key, None)
            return
        self.items.append(["assign", generation, member_id, keys])
        self.owned, self.generation, self.member_id = set(keys), generation, member_id
        self.positions, self.committed = {}, {}

    def _revoked(self, consumer: Consumer, partitions: list[KafkaPartition], lost: bool) -> None:
        generation, member_id = group_metadata(consumer)
        keys = sorted(key_of(p.topic, p.partition) for p in partitions)
        self.items.append(["revoke", generation, member_id, keys, lost])
        self.owned -= set(keys)
        for key in keys:
            self.positions.pop(key, None)
            self.committed.pop(key, None)

    def on_revoke(self, consumer: Consumer, partitions: list[KafkaPartition]) -> None:
        self._revoked(consumer, partitions, False)

    def on_lost(self, consumer: Consumer, partitions: list[KafkaPartition]) -> None:
        self._revoked(consumer, partitions, True)


class GroupRun:
    """The workload against one cluster: producers, members and the monitor, then the drain."""

    def __init__(
        self,
        bootstrap_servers: str,
        recorder: Recorder,
        *,
        concurrency: int,
        run_id: str,
        rng: random.Random,
        logger: logging.Logger,
        protocol: str = CLASSIC,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"group protocol {protocol!r}: choose from {', '.join(PROTOCOLS)}")
        self.recorder, self.rng, self.protocol = recorder, rng, protocol
        self.group = group_of(run_id)
        self.keys = keys()
        self.values = Values()
        producers, members, monitor = roles(concurrency)
        common = client_config(bootstrap_servers, logger)
        self.common = common
        self.producers = [GroupProducer(common, recorder, p) for p in producers]
        self.members = [self._member(common, p, i) for i, p in enumerate(members)]
        self.monitor_process = monitor
        self.monitor = Consumer({**common, "group.id": self.group, "enable.auto.commit": False})
        self.acked: dict[str, int] = {}  # the highest acknowledged offset per partition

    def _member(self, common: dict[str, Any], process: int, index: int) -> Member:
        member = Member(process, SESSION_TIMEOUT_MS, incremental=self.protocol == CONSUMER)
        protocol: dict[str, Any] = (
            {"group.protocol": CONSUMER}  # the coordinator's session, heartbeat interval and assignor
            if self.protocol == CONSUMER
            else {
                "partition.assignment.strategy": "range",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_INTERVALS_MS[index % len(HEARTBEAT_INTERVALS_MS)],
            }
        )
        member.consumer = consumer = Consumer({
            **common,
            **protocol,
            "group.id": self.group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
            "fetch.wait.max.ms": 200,
            "statistics.interval.ms": STATISTICS_INTERVAL_MS,
            "stats_cb": member.on_statistics,
        })  # fmt: skip
        consumer.subscribe([TOPIC], on_assign=member.on_assign, on_revoke=member.on_revoke,
                           on_lost=member.on_lost)  # fmt: skip
        return member

    def coordinator(self) -> str | None:
        """The address of the group's coordinator, as most members' clients found it (FindCoordinator)
        by their last statistics; None when none knows one."""
        known = [m.coordinator for m in self.members if m.coordinator is not None and not m.wedged]
        return max(set(known), key=known.count) if known else None

    # -- the members ----------------------------------------------------------------------------------

    async def consume(self, member: Member, stats: Stats) -> None:
        """``consume``: one ``consume()`` call and what it saw."""
        self.recorder.invoke(
            member.process, "consume", group=self.group, protocol=self.protocol, client="kafka"
        )
        member.items = []

        def call() -> list[list[Any]]:
            if member.incremental:
                member.epoch_seen(group_metadata(member.consumer)[0])
            for message in member.consumer.consume(CONSUME_MESSAGES_MAX, CONSUME_WAIT_S):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        member.items.append(["error", error.name()])
                    continue
                topic, partition, offset = message.topic(), message.partition(), message.offset()
                if topic is None or partition is None or offset is None:
                    continue
                key = key_of(topic, partition)
                member.items.append(["record", key, offset, read_back(message), member.generation])
                member.positions[key] = offset + 1
            return member.items

        result = await _on_thread(call, CONSUME_WAIT_S + CALL_TIMEOUT_S + WEDGED_SLACK_S)
        fields: dict[str, Any]
        if result is None:
            member.wedged = True
            kind, fields = "info", {"error": "wedged: librdkafka did not return", "items": list(member.items)}
        else:
            kind, fields = "ok", {"items": list(result)}
        fields.update(generation=member.generation, member_id=member.member_id)
        stats.add("consume", kind)
        self.recorder.complete(member.process, kind, **fields)

    async def commit(self, member: Member, stats: Stats) -> None:
        """A ``commit`` of each owned partition with a new position, one after another, under the
        generation it was assigned in (none once librdkafka has left that generation)."""
        for key in sorted(member.owned):
            position = member.positions.get(key)
            if position is None or position <= member.committed.get(key, -1):
                continue
            if member.committing:  # the last one still waits on its thread: librdkafka takes one at a time
                return
            generation, member_id = group_metadata(member.consumer)
            member.epoch_seen(generation)  # the consumer protocol's epoch moves on without a callback
            if generation != member.generation or key not in member.owned:
                return
            self.recorder.invoke(
                member.process, "commit", key=key, group=self.group, offset=position,
                generation=generation, member_id=member_id, session_timeout_ms=member.session_timeout_ms,
                client="kafka",
            )  # fmt: skip
            member.committing = True

            def call(key: str = key, position: int = position) -> tuple[str, dict[str, Any]]:
                try:
                    return _commit(member.consumer, key, position)
                finally:
                    member.committing = False

            result = await _on_thread(call, COMMIT_BOUND_S)
            after: int | None = None
            fields: dict[str, Any]
            if result is None:  # left waiting on its thread (it may still land): the member goes on
                # and its generation is not asked: librdkafka answers it only once that commit returns,
                # which blocked this loop, and with it the nemesis that heals the cluster (a run hung so)
                kind, fields = "info", {"error": f"no answer within {COMMIT_BOUND_S:.0f} s"}
            else:
                after, _ = group_metadata(member.consumer)
                kind, fields = result
            if kind == "ok":
                fields["committed"] = position
                member.committed[key] = position
            stats.add("commit", kind)
            self.recorder.complete(member.process, kind, generation_after=after, **fields)
            if kind != "ok":
                return

    async def _member_loop(self, member: Member, stats: Stats, until: Callable[[], bool]) -> None:
        loop = asyncio.get_running_loop()
        next_commit = loop.time() + COMMIT_EVERY_S
        while not until() and not member.wedged:
            await self.consume(member, stats)
            if loop.time() >= next_commit and not member.wedged:
                await self.commit(member, stats)
                next_commit = loop.time() + COMMIT_EVERY_S * self.rng.uniform(0.7, 1.3)

    # -- the monitor ----------------------------------------------------------------------------------

    async def committed(self, key: str, stats: Stats, *, final: bool = False) -> int | None:
        """``committed``: the group's committed offset of ``key``; None when not answered."""
        flags = {"final": True} if final else {}
        self.recorder.invoke(self.monitor_process, "committed", key=key, group=self.group, client="kafka",
                             **flags)  # fmt: skip
        result = await _on_thread(
            lambda: committed_offset(self.monitor, KafkaPartition(*split_key(key)), CALL_TIMEOUT_S),
            CALL_TIMEOUT_S + WEDGED_SLACK_S,
        )
        kind, fields = result if result is not None else ("info", {"error": "wedged"})
        stats.add("committed", kind)
        self.recorder.complete(self.monitor_process, kind, group=self.group, **fields)
        offset = fields.get("offset")
        return int(offset) if kind == "ok" and offset is not None else (-1 if kind == "ok" else None)

    async def _monitor_loop(self, stats: Stats, until: Callable[[], bool]) -> dict[str, int | None]:
        seen: dict[str, int | None] = {}
        while not until():
            for key in self.keys:
                seen[key] = await self.committed(key, stats)
            await asyncio.sleep(MONITOR_EVERY_S)
        return seen

    # -- the producers --------------------------------------------------------------------------------

    async def _producer_loop(
        self, producer: GroupProducer, rate: float, deadline: Deadline, stats: Stats
    ) -> None:
        loop = asyncio.get_running_loop()
        interval = len(self.producers) / rate
        while deadline.left() > 0:
            began = loop.time()
            key = self.rng.choice(self.keys)
            value = self.values.take()
            kind = await producer.send(key, value)
            stats.add("send", kind)
            pause = max(0.0, self.rng.uniform(0.5, 1.5) * interval - (loop.time() - began))
            await asyncio.sleep(min(pause, deadline.left()))

    # -- the run --------------------------------------------------------------------------------------

    async def run_workers(self, *, rate: float, deadline: float | Deadline, stats: Stats) -> None:
        """Producers, members and the monitor until ``deadline``."""
        until = Deadline.of(deadline)

        def over() -> bool:
            return until.left() <= 0

        await asyncio.gather(
            *(self._producer_loop(p, rate, until, stats) for p in self.producers),
            *(self._member_loop(m, stats, over) for m in self.members),
            self._monitor_loop(stats, over),
        )

    async def finish(self, stats: Stats, budget_s: float = DRAIN_BUDGET_S) -> dict[str, Any]:
        """After the heal: the members consume and commit until every partition's committed offset
        reached its high watermark (or the budget ran out), then a final read of every committed
        offset."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget_s
        highs: dict[str, int | None] = {}
        for key in self.keys:
            highs[key] = await _on_thread(
                functools.partial(_high_watermark, self.monitor, key), CALL_TIMEOUT_S + 5
            )
        state = {"drained": False}

        def over() -> bool:
            return state["drained"] or loop.time() >= deadline

        async def watch() -> None:
            while not over():
                seen = await self._monitor_round(stats)
                if all(_drained(highs[k], seen.get(k)) for k in self.keys):
                    state["drained"] = True
                    return
                await asyncio.sleep(MONITOR_EVERY_S)

        members = [m for m in self.members if not m.wedged]
        await asyncio.gather(watch(), *(self._member_loop(m, stats, over) for m in members))
        final: dict[str, int | None] = {}
        for key in self.keys:
            for _ in range(5):
                final[key] = await self.committed(key, stats, final=True)
                if final[key] is not None:
                    break
                await asyncio.sleep(1.0)
        described = await _on_thread(
            functools.partial(_group_type, self.common, self.group), CALL_TIMEOUT_S + WEDGED_SLACK_S
        )
        return {
            "group": self.group,
            "protocol": self.protocol,
            "group_type": described,  # as DescribeConsumerGroups names it, members still in the group
            "high_watermarks": highs,
            "drained": state["drained"],
            "final_committed": final,
            "wedged_members": [m.process for m in self.members if m.wedged],
        }

    async def _monitor_round(self, stats: Stats) -> dict[str, int | None]:
        return {key: await self.committed(key, stats) for key in self.keys}

    async def close(self) -> None:
        for producer in self.producers:
            producer.close()

        def close_all() -> None:
            for member in self.members:
                if member.wedged or member.committing:  # a call still holds it: left to that thread
                    _LEFT_BEHIND.append(member.consumer)
                else:
                    with contextlib.suppress(KafkaException, RuntimeError):
                        member.consumer.close()
            with contextlib.suppress(KafkaException, RuntimeError):
                self.monitor.close()

        await _on_thread(close_all, CLOSE_TIMEOUT_S)


def _drained(high: int | None, committed: int | None) -> bool:
    return high == 0 or (high is not None and committed is not None and committed >= high)


def _commit(consumer: Consumer, key: str, offset: int) -> tuple[str, dict[str, Any]]:
    topic, partition = split_key(key)
    try:
        rows = consumer.commit(offsets=[KafkaPartition(topic, partition, offset)], asynchronous=False)
    except KafkaException as exc:
        error = error_of(exc)
        return ("fail" if error.code() in NOT_COMMITTED else "info"), error_fields(error)
    for row in rows or []:
        if row.error is not None:
            return ("fail" if row.error.code() in NOT_COMMITTED else "info"), error_fields(row.error)
    return "ok", {}


def _group_type(common: dict[str, Any], group: str) -> str | None:
    """The group's type (``classic``, ``consumer``) as the Kafka door describes it to librdkafka's
    DescribeConsumerGroups (ConsumerGroupDescribe, else DescribeGroups); None when not answered."""
    admin = AdminClient(dict(common))
    try:
        description = admin.describe_consumer_groups([group], request_timeout=CALL_TIMEOUT_S)[group].result(
            timeout=CALL_TIMEOUT_S + 1
        )
    except (KafkaException, TimeoutError, concurrent.futures.TimeoutError):
        return None
    return str(description.type.name).lower()


def _high_watermark(consumer: Consumer, key: str) -> int | None:
    for _ in range(5):
        try:
            _low, high = consumer.get_watermark_offsets(
                KafkaPartition(*split_key(key)), timeout=CALL_TIMEOUT_S, cached=False
            )
            return int(high)
        except KafkaException:
            time.sleep(0.5)
    return None
