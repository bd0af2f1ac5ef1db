"""A consumer instance's records come straight from the partition's leader, never through the group's
coordinator: on a real 3-node cluster, a member read through the partition's leader, its group
coordinated by another node, gets its records without one peer fetch of them; read through another
node, the same member's records are fetched from the leader (the counter is real)."""

from __future__ import annotations

import re

import aiohttp
from rest_fixtures import BINARY, b64, call
from test_rest_conformance import create_topic, produce_binary, read_until

from raftlog_client.local_cluster import LocalCluster

FETCH_ROUTE = "/internal/v1/data/fetch_batches"
BEGIN_READ_ROUTE = "/internal/v1/groups/begin_read"


async def requests_served(base: str, route: str) -> float:
    """How many POSTs of ``route`` the node answered, by its ``/metrics``."""
    async with aiohttp.ClientSession() as session, session.get(base + "/metrics") as response:
        text = await response.text()
    series = re.compile(
        r'^raftlog_http_requests_total\{method="POST",route="' + re.escape(route) + r'",status="\d+"\} (\S+)$'
    )
    return sum(float(m.group(1)) for line in text.splitlines() if (m := series.match(line)))


async def coordinator_of(cluster: LocalCluster, group: str) -> str:
    """The URL of the node leading the group's coordinator partition now."""
    described = await call(cluster.servers[0], "GET", f"/v1/consumer-groups/{group}", content_type=None)
    partition = described.body["coordinator_partition"]
    state = await call(
        cluster.servers[0], "GET", f"/v1/partitions/__consumer_groups/{partition}", content_type=None
    )
    return cluster.urls[state.body["leader"]]


async def test_a_member_reads_from_the_leader_not_through_the_coordinator(rest_cluster: LocalCluster) -> None:
    await create_topic(rest_cluster, "direct", 1)
    view = await call(rest_cluster.servers[0], "GET", "/topics/direct/partitions")
    leader = rest_cluster.urls[view.body[0]["leader"]]
    other = next(url for url in rest_cluster.servers if url != leader)
    values = [b"direct-%d" % i for i in range(5)]
    for attempt in range(64):  # a group whose coordinator is not the partition's leader
        group = f"direct-{attempt}"
        created = await call(
            leader, "POST", f"/consumers/{group}", body={"name": "m", "auto.offset.reset": "earliest"}
        )
        assert created.status == 200, created.body
        instance = f"/consumers/{group}/instances/m"
        if await coordinator_of(rest_cluster, group) == leader:
            assert (await call(leader, "DELETE", instance)).status == 204
            continue
        assert (
            await call(leader, "POST", f"{instance}/subscription", body={"topics": ["direct"]})
        ).status == 204
        produced = await produce_binary(leader, "direct", [{"value": b64(v)} for v in values])
        assert produced.status == 200, produced.body
        fetches_before = await requests_served(leader, FETCH_ROUTE)
        grants_before = sum([await requests_served(url, BEGIN_READ_ROUTE) for url in rest_cluster.servers])

        rows = await read_until(leader, instance, len(values), accept=BINARY)

        if await coordinator_of(rest_cluster, group) == leader:
            continue  # the coordinator moved onto the leader meanwhile: try again with another group
        assert len(rows) == len(values)
        assert (
            await requests_served(leader, FETCH_ROUTE) == fetches_before
        )  # read there, from its own replica
        grants = sum([await requests_served(url, BEGIN_READ_ROUTE) for url in rest_cluster.servers])
        assert grants > grants_before  # granted by the coordinator, elsewhere
        break
    else:
        raise AssertionError("no group coordinated away from the partition's leader")

    committed = await call(leader, "POST", f"{instance}/offsets", raw=b"")
    assert committed.status == 200
    offsets = await call(other, "GET", f"{instance}/offsets", params={"topic": "direct", "partition": "0"})
    assert offsets.body["offsets"][0]["offset"] == len(values)  # the positions went back to the coordinator

    # the control: read through a node that does not lead the partition, the leader serves peer fetches
    produced = await produce_binary(leader, "direct", [{"value": b64(v)} for v in values])
    assert produced.status == 200, produced.body
    rows = await read_until(other, instance, len(values), accept=BINARY)
    assert len(rows) == len(values) and await requests_served(leader, FETCH_ROUTE) > fetches_before
