"""Consumer groups on three in-process nodes over HTTP: members join, leave and crash while records are
produced; every record is processed at least once, commits after processing lose none, and a commit with
a generation from before a rebalance is refused.

What holds under any scheduling is asserted, not what a quiet machine happens to do: on a loaded machine a
live member's poll can come later than its session allows, the coordinator evicts it and it joins again
(``GroupConsumer.rejoined``), which is correct and loses nothing."""

from __future__ import annotations

import asyncio
import pathlib
import time

import aiohttp
from in_process import Served, configs, controller_leader, until

from raftlog_client.client import GroupConsumer, Message, RaftlogClient
from raftlog_client.errors import RequestFailed
from raftlog_contract import FENCED_CODES

TOPIC = "work"
PARTITIONS = 4
RECORDS = 240
DEADLINE_S = 40.0  # for the workload's members; each later wait has its own
SETTLE_S = 60.0  # draining, the crashed member's eviction, the last rebalance: generous for a loaded machine


async def test_members_come_and_go_during_a_workload_and_nothing_is_lost(tmp_path: pathlib.Path) -> None:
    served = [Served(c) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    urls = [next(p.http for p in s.config.peers if p.node_id == s.config.node_id) for s in served]
    clients = [RaftlogClient([url], timeout_s=10.0, retries=20) for url in urls * 2]
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.topic_changes.create_topic(TOPIC, PARTITIONS, 3, {})
        await until(lambda: all(TOPIC in n.metadata.topics() for n in nodes), what="topic on every node")
        processed: list[bytes] = []
        produced: list[bytes] = []
        started = time.monotonic()

        async def produce() -> None:
            for i in range(RECORDS):
                value = b"%d" % i
                await clients[0].produce(TOPIC, [Message(value, key=value)])
                produced.append(value)
                await asyncio.sleep(0.01)

        async def member(consumer: GroupConsumer, start_s: float, stop_s: float, leave: bool) -> None:
            await asyncio.sleep(start_s)
            await consumer.start([TOPIC])
            while time.monotonic() - started < stop_s:
                records = await consumer.poll(timeout_ms=200)
                processed.extend(r.value for r in records)  # process, then commit
                try:
                    await consumer.commit()
                except RequestFailed as exc:
                    if exc.error_code not in FENCED_CODES:
                        raise
            if leave:
                await consumer.close()  # a crashed member just stops: its session times out

        finisher = GroupConsumer(clients[1], "g", session_timeout_ms=3_000, name_prefix="finisher")
        early = GroupConsumer(clients[2], "g", session_timeout_ms=1_500, name_prefix="early")
        crashed = GroupConsumer(clients[3], "g", session_timeout_ms=1_500, name_prefix="crash")
        late = GroupConsumer(clients[4], "g", session_timeout_ms=3_000, name_prefix="late")
        members = [
            member(early, 0.0, 2.0, leave=True),
            member(crashed, 0.5, 3.5, leave=False),
            member(late, 1.5, 5.0, leave=True),
            member(finisher, 0.0, 5.0, leave=False),  # stays, and drains what is left below
        ]
        await asyncio.wait_for(asyncio.gather(produce(), *members), DEADLINE_S)

        async def poll_and_commit() -> None:
            """The finisher's poll is its heartbeat: it keeps polling, as a live member does, while the
            test waits for anything."""
            processed.extend(r.value for r in await finisher.poll(timeout_ms=200))
            try:
                await finisher.commit()
            except RequestFailed as exc:
                if exc.error_code not in FENCED_CODES:
                    raise

        # the finisher drains what is left; the crashed member's partitions come back after its session
        ends = [(await clients[0].offsets(TOPIC, p))[1] for p in range(PARTITIONS)]
        assert sum(ends) == RECORDS

        async def committed_ends() -> list[int | None]:
            committed = await clients[0].committed_offsets("g", TOPIC)
            return [committed.get((TOPIC, p)) for p in range(PARTITIONS)]

        deadline = time.monotonic() + SETTLE_S
        while set(processed) != set(produced) or await committed_ends() != ends:
            assert time.monotonic() < deadline, (
                len(set(produced) - set(processed)),
                await committed_ends(),
                ends,
            )
            await poll_and_commit()
        assert set(processed) == set(produced) and len(produced) == RECORDS
        print(f"processed {len(processed)} records for {RECORDS} produced ({len(processed) - RECORDS} again)")

        # the crashed member was evicted when its session timed out (watched through the admin view: any
        # call of the instance itself would be its heartbeat)
        assert crashed.instance_id is not None

        async def evicted() -> bool:
            view = await clients[0].consumer_group("g")
            return crashed.instance_id not in [m["instance_id"] for m in view["members"]]

        deadline = time.monotonic() + SETTLE_S
        while not await evicted():
            assert time.monotonic() < deadline, "the crashed member was never evicted"
            await poll_and_commit()
        # the finisher, the one member left, gets every partition (once it has heard of the last rebalance)
        deadline = time.monotonic() + SETTLE_S
        while sorted((await finisher.assignment())[1]) != [(TOPIC, p) for p in range(PARTITIONS)]:
            assert time.monotonic() < deadline, (
                f"the finisher never got every partition: {finisher.generation}"
            )
            await poll_and_commit()
        generation = (await finisher.assignment())[0]
        assert generation >= 11  # 4 joins, 4 subscriptions, 2 leaves and an eviction: each one rebalanced
        assert set(processed) == set(produced)  # a rejoin under load hands out records again, loses none

        # a commit that names the generation from before a rebalance is refused
        joiner = GroupConsumer(clients[5], "g", name_prefix="joiner")
        await joiner.start([TOPIC])
        body = {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}], "generation": generation}
        async with aiohttp.ClientSession() as http:
            base = f"{urls[2]}/consumers/g/instances/{finisher.instance_id}"
            async with http.post(f"{base}/offsets", json=body) as answer:
                assert answer.status == 409 and (await answer.json())["error_code"] == 40905
        assert (await clients[0].committed_offsets("g", TOPIC))[(TOPIC, 0)] == ends[0]
        await joiner.close()
        await finisher.close()
    finally:
        await asyncio.gather(*(c.close() for c in clients))
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)
