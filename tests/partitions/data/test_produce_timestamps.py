"""How far ahead of the clock a produced record's timestamp may be, on real nodes over HTTP: the same
bound (``TIMESTAMP_AHEAD_MAX_MS``, one hour) whether the JSON request enters at the partition's leader
(which encodes the batch) or at a follower (which encodes it and forwards the batch, checked as a
producer's); a LogAppendTime topic takes any CreateTime on both paths, since the leader's clock replaces
it."""

from __future__ import annotations

import asyncio
import pathlib
import time

import aiohttp
from in_process import Served, configs, controller_leader, http_of, partition_leader, until

from partitions.data.admission import TIMESTAMP_AHEAD_MAX_MS
from raftlog_contract import JSON_V2


async def test_a_timestamp_too_far_ahead_is_refused_alike_at_the_leader_and_at_a_follower(
    tmp_path: pathlib.Path,
) -> None:
    served = [Served(c) for c in configs(tmp_path)]
    await asyncio.gather(*(s.start() for s in served))
    try:
        nodes = [s.node for s in served]
        controller = await until(lambda: controller_leader(nodes), what="controller leader")
        await controller.topic_changes.create_topic("created", 1, 3, {})
        await controller.topic_changes.create_topic(
            "stamped", 1, 3, {"message.timestamp.type": "LogAppendTime"}
        )
        leaders = {
            t: await until(lambda t=t: partition_leader(nodes, t), what=t) for t in ("created", "stamped")
        }

        async with aiohttp.ClientSession() as client:

            async def produce(entry: Served, topic: str, timestamp: int) -> tuple[int, dict]:
                url = f"{http_of(entry.config)}/topics/{topic}/partitions/0"
                body = {"records": [{"value": "v", "timestamp": timestamp}]}
                async with client.post(url, json=body, headers={"Content-Type": JSON_V2}) as answer:
                    return answer.status, await answer.json()

            async def end_offset(topic: str) -> int:
                url = f"{http_of(served[0].config)}/topics/{topic}/partitions/0/offsets"
                async with client.get(url) as answer:
                    return int((await answer.json())["end_offset"])

            for topic, leader in leaders.items():
                entries = {
                    "leader": next(s for s in served if s.node is leader),
                    "follower": next(s for s in served if s.node is not leader),
                }
                for path, entry in entries.items():
                    now = int(time.time() * 1000)
                    far = now + TIMESTAMP_AHEAD_MAX_MS + 600_000  # ten minutes past the bound
                    near = now + TIMESTAMP_AHEAD_MAX_MS - 600_000
                    before = await end_offset(topic)
                    status, body = await produce(entry, topic, far)
                    if topic == "created":
                        assert (status, body["error_code"]) == (422, 42201), (path, body)
                        assert str(far) in body["message"], (path, body)  # the message names it
                        assert await end_offset(topic) == before, f"{path}: refused but appended"
                    else:
                        assert status == 200, (path, body)  # the leader's clock replaces it
                    status, body = await produce(entry, topic, near)
                    assert status == 200, (path, topic, body)
    finally:
        await asyncio.gather(*(s.stop() for s in served), return_exceptions=True)
