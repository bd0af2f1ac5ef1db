"""After deleting a phase's topic the benchmark waits until every node removed its files (the nodes'
``raftlog_removal_pending_bytes``), so that the next phase does not measure the removal."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from raftlog_bench.cluster_http import Http
from raftlog_bench.raftlog_target import RaftlogTarget
from raftlog_dev.layout import free_port


class Backlogs:
    """What each fake node's /metrics says next: a list of values per node, the last one repeated."""

    def __init__(self, per_node: list[list[int | None]]) -> None:
        self.per_node = per_node
        self.asked = [0] * len(per_node)

    def next(self, node: int) -> int | None:
        values = self.per_node[node]
        value = values[min(self.asked[node], len(values) - 1)]
        self.asked[node] += 1
        return value


@pytest.fixture
async def nodes(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Backlogs, list[str]]]:
    backlogs = Backlogs(request.param)
    runners, urls = [], []
    for node in range(len(backlogs.per_node)):

        async def metrics(_: web.Request, node: int = node) -> web.Response:
            value = backlogs.next(node)
            lines = ["raftlog_produce_requests 0"]
            if value is not None:
                lines.append(f"raftlog_removal_pending_bytes {value}")
            return web.Response(text="\n".join(lines) + "\n")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
        urls.append(f"http://127.0.0.1:{port}")
    try:
        yield backlogs, urls
    finally:
        for runner in runners:
            await runner.cleanup()


async def _settle(urls: list[str]) -> float:
    target = RaftlogTarget(urls, None, 1 << 20)
    target._http = Http(urls, None, 8)
    try:
        started = time.monotonic()
        await target._settle_removal()
        return time.monotonic() - started
    finally:
        await target.close()


@pytest.mark.parametrize("nodes", [[[3 << 20, 1 << 20, 0], [0, 2 << 20, 0]]], indirect=True)
async def test_it_waits_until_every_node_has_nothing_left_for_a_second(
    nodes: tuple[Backlogs, list[str]],
) -> None:
    backlogs, urls = nodes
    took = await _settle(urls)
    # polls 1-3 see files left on some node; from poll 3 on none: it returns once that held for 1 s
    assert backlogs.asked[0] >= 3 + 4 and took >= 1.0
    assert took < 5.0


@pytest.mark.parametrize("nodes", [[[0], [None]]], indirect=True)
async def test_servers_that_do_not_report_it_are_not_waited_for(nodes: tuple[Backlogs, list[str]]) -> None:
    took = await _settle(nodes[1])
    assert took < 0.5


async def test_a_backlog_sum_counts_every_node() -> None:
    port = free_port()

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text="raftlog_removal_pending_bytes 2.5e+06\nraftlog_removal_pending_paths 3\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        url = f"http://127.0.0.1:{port}"
        for servers, expected in (([url, url], 5_000_000), ([url, f"http://127.0.0.1:{free_port()}"], None)):
            http = Http(servers, None, 8)
            try:
                assert await http.removal_backlog() == expected
            finally:
                await http.close()
    finally:
        await runner.cleanup()
