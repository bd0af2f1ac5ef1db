"""Who may wait for a first frame on the gossip port (raftlog.admission), and Gossip applying it: one
outsider's address gets at most its share, outsiders together at most the pool, a known member's host
always gets in, and a connection that sends no frame is closed within push_pull_first_frame_timeout_ms."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest
from udp_helpers import FAST, SECRET, cluster

from membership import Gossip, GossipConfig
from raftlog.admission import Admission, admit


def test_outsiders_are_bounded_per_address_and_together() -> None:
    known = {"10.0.0.1": 1}
    assert admit("10.9.9.9", {"10.9.9.9": 3}, 3, known, 4, 32) is Admission.ADMIT
    assert admit("10.9.9.9", {"10.9.9.9": 4}, 4, known, 4, 32) is Admission.REFUSE_ADDRESS_FULL
    assert admit("10.9.9.8", {"10.9.9.9": 4}, 32, known, 4, 32) is Admission.REFUSE_POOL_FULL
    assert admit("10.9.9.8", {"10.9.9.9": 4}, 31, known, 4, 32) is Admission.ADMIT


def test_a_known_members_host_gets_in_whatever_outsiders_hold() -> None:
    known = {"10.0.0.1": 1, "10.0.0.2": 3}  # three members on one machine
    assert admit("10.0.0.1", {"10.9.9.9": 32}, 32, known, 4, 32) is Admission.ADMIT
    assert admit("10.0.0.1", {"10.0.0.1": 4}, 32, known, 4, 32) is Admission.ADMIT
    assert admit("10.0.0.1", {"10.0.0.1": 5}, 32, known, 4, 32) is Admission.ADMIT_EVICTING_OLDEST
    assert admit("10.0.0.2", {"10.0.0.2": 6}, 32, known, 4, 32) is Admission.ADMIT
    assert admit("10.0.0.2", {"10.0.0.2": 7}, 32, known, 4, 32) is Admission.ADMIT_EVICTING_OLDEST


def test_the_limits_are_checked() -> None:
    for name in (
        "push_pull_first_frame_timeout_ms",
        "push_pull_pending_per_address_max",
        "push_pull_pending_max",
    ):
        changes: dict[str, Any] = {name: 0}
        with pytest.raises(ValueError, match=name):
            replace(GossipConfig(), **changes)


async def closed_within(reader: asyncio.StreamReader, timeout_s: float) -> bool:
    try:
        async with asyncio.timeout(timeout_s):
            return await reader.read(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


async def test_gossip_refuses_a_fifth_waiting_connection_from_one_address_and_drops_silent_ones() -> None:
    config = replace(FAST, push_pull_first_frame_timeout_ms=500, push_pull_timeout_ms=5_000)
    node = Gossip("n0", "127.0.0.1:0", SECRET, config=config)
    await node.start()
    host, port = node.address.rsplit(":", 1)
    writers: list[asyncio.StreamWriter] = []

    async def connect_from(source: str) -> asyncio.StreamReader:
        reader, writer = await asyncio.open_connection(host, int(port), local_addr=(source, 0))
        writers.append(writer)
        return reader

    try:
        held = [await connect_from("127.0.0.2") for _ in range(4)]
        fifth = await connect_from("127.0.0.2")
        assert await closed_within(fifth, 0.4)  # refused at once, before any first-frame deadline
        assert node.stats()["push_pulls_refused_address"] == 1
        other = await connect_from("127.0.0.3")  # another address still gets in
        started = time.monotonic()
        assert await closed_within(other, 5)  # ... and is closed for sending no frame
        assert time.monotonic() - started < 4  # the first-frame timeout (0.5 s), not push_pull_timeout (5 s)
        assert all([await closed_within(reader, 5) for reader in held])
        assert node.stats()["push_pull_first_frame_timeouts"] >= 5
    finally:
        for writer in writers:
            writer.close()
        await node.stop()


async def test_a_member_joins_while_outsiders_hold_the_pool() -> None:
    config = replace(FAST, push_pull_pending_max=4, push_pull_pending_per_address_max=2)
    async with cluster(2, config=config) as nodes:
        seed = nodes[0]
        host, port = seed.address.rsplit(":", 1)
        writers = [
            (await asyncio.open_connection(host, int(port), local_addr=(f"127.0.0.{2 + i // 2}", 0)))[1]
            for i in range(6)
        ]
        try:
            await asyncio.sleep(0)  # let the seed accept them
            newcomer = Gossip("n-new", "127.0.0.1:0", SECRET, config=config)
            await newcomer.start()
            try:
                # 127.0.0.1 is a known member's host (nodes[1] lives there): it has room of its own
                assert await newcomer.join([seed.address], timeout_s=10.0) == 1  # refused: 0 at once
            finally:
                await newcomer.stop()
            assert seed.stats()["push_pulls_refused"] >= 1  # the outsiders' pool was full
        finally:
            for writer in writers:
                writer.close()
