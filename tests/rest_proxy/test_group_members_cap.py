"""A consumer group holds at most ``GROUP_MEMBERS_MAX`` members however many join at once: on a real
3-node cluster, creates sent together (the way a fleet of consumers restarting at once sends them) are
counted when the coordinator's Raft group applies them, so the creates past the bound are refused with
409 and error code 40907 and the group never holds more."""

from __future__ import annotations

import asyncio

import aiohttp
from rest_fixtures import V2, call

from partitions.groups.group_model import GROUP_MEMBERS_MAX
from raftlog_client.local_cluster import LocalCluster

EXTRA = 60  # creates past the bound
AT_ONCE = 200  # creates in flight at once: many pass any check made before their joins are applied
GROUP_FULL_CODE = 40907
SESSION_TIMEOUT_MS = 300_000  # members stay while the test counts them, however slow the machine


async def test_concurrent_creates_never_pass_the_members_bound(rest_cluster: LocalCluster) -> None:
    base = rest_cluster.servers[0]
    group = "crowd"
    gate = asyncio.Semaphore(AT_ONCE)

    async def create(session: aiohttp.ClientSession, index: int) -> tuple[int, dict[str, object]]:
        body = {"name": f"m{index}", "session.timeout.ms": SESSION_TIMEOUT_MS}
        async with (
            gate,
            session.post(f"{base}/consumers/{group}", json=body, headers={"Content-Type": V2}) as r,
        ):
            return r.status, await r.json()

    connector = aiohttp.TCPConnector(limit=AT_ONCE)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        answers = await asyncio.gather(*(create(session, i) for i in range(GROUP_MEMBERS_MAX + EXTRA)))

    created = [body for status, body in answers if status == 200]
    refused = [(status, body) for status, body in answers if status != 200]
    assert len(created) == GROUP_MEMBERS_MAX, f"{len(created)} creates succeeded"
    assert len(refused) == EXTRA
    assert all(status == 409 and body["error_code"] == GROUP_FULL_CODE for status, body in refused), refused[
        :3
    ]
    assert "maximum" in str(refused[0][1]["message"])
    described = await call(base, "GET", f"/v1/consumer-groups/{group}", content_type=None)
    assert described.status == 200, described.body
    assert len(described.body["members"]) == GROUP_MEMBERS_MAX
