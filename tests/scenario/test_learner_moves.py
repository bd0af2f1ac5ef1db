"""A replica move on real node processes under load: the joining replica is a learner until it has caught
up, so a joiner that does not answer holds up no commit, even with one old replica down as well; once it
is back the move ends (learner, then voter, then counted) and nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import pytest

from raftlog_client.client import RaftlogClient

from .cluster import ProcessCluster
from .test_admin_under_load import TOKEN, WAIT_S, Workload, admin_token_args, fully_replicated, until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[ProcessCluster]:
    started = ProcessCluster.create(str(tmp_path), count=4)
    for argv in started.argv.values():
        argv += admin_token_args(str(tmp_path))
    try:
        started.start_all()
        yield started
    finally:
        started.stop_all()


def test_a_paused_joiner_stays_a_learner_and_holds_up_no_commit(cluster: ProcessCluster) -> None:
    async def scenario() -> None:
        async with RaftlogClient(cluster.urls, admin_token=TOKEN, retries=60, backoff_max_s=0.5) as admin:
            await admin.create_topic("w", partitions=1, replication_factor=3)
            workload = Workload(cluster.urls, "w", 1)
            workload.start()
            await workload.advanced()
            state = await admin.cluster.partition_state("w", 0)
            replicas = [r["node"] for r in state["replicas"]]
            leader = state["leader"]
            joiner = next(n for n in ("n1", "n2", "n3", "n4") if n not in replicas)
            stays = [n for n in replicas if n != leader]
            target = [joiner, *stays]

            # the joiner does nothing from the move's answer on: it is made a learner all the same, and stays
            # one. Paused only once the move is accepted: a move to a node gossip already suspects is
            # refused (400/40002, "a new replica needs a live node"), and on a loaded machine the request
            # could reach the controller after gossip's suspicion. The answer comes once the controller
            # committed the move, before the partition's leader adds the joiner on its next step.
            await admin.cluster.move_replicas("w", 0, target)
            cluster.pause(joiner)

            async def joined_as_learner() -> bool:
                rows = (await admin.cluster.partition_state("w", 0))["replicas"]
                return any(r["node"] == joiner and r["role"] == "learner" for r in rows)

            await until(f"{joiner} a learner of w/0", joined_as_learner)

            # one old replica goes quiet too: the leader and the other old replica are 2 of the 3 voters
            # (had the joiner become a voter at once, they would be 2 of 4: no commit)
            silent = stays[0]
            cluster.pause(silent)
            before = len(workload.acked[0])

            async def committing() -> bool:  # a voter more (the joiner) and 2 of 4 would commit nothing
                return len(workload.acked[0]) - before >= 20

            await until("20 records acknowledged with a learner and a voter down", committing)
            rows = (await admin.cluster.partition_state("w", 0))["replicas"]
            assert any(r["node"] == joiner and r["role"] == "learner" for r in rows), rows

            cluster.resume(silent)
            cluster.resume(joiner)

            async def moved() -> bool:
                progress = await admin.cluster.move_progress("w", 0)
                return progress["move"] is None and progress["replicas"] == target

            await until("move of w/0", moved, timeout_s=60)
            rows = (await admin.cluster.partition_state("w", 0))["replicas"]
            assert {r["node"] for r in rows} == set(target)
            assert all(r["role"] in ("leader", "follower") for r in rows), rows
            await workload.finish(admin)
            await until("full replication", lambda: fully_replicated(admin, "w", 1, 3))

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S * 6))
