"""The Gossip class over real UDP/TCP on 127.0.0.1, with timings scaled down 10x (udp_helpers.FAST)."""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import replace

import pytest
from udp_helpers import FAST, SECRET, all_alive, cluster, state_of

from membership import Gossip, InvalidAddress, Member, MemberState, MetadataTooLarge, NotStarted, wire
from membership.messages import Ping
from tests.waiting import wait_until


async def test_members_join_through_a_seed_and_see_each_other() -> None:
    async with cluster(4) as nodes:
        for node in nodes:
            assert node.address.startswith("127.0.0.1:") and not node.address.endswith(":0")
            view = {m.node_id: m for m in node.members()}
            assert set(view) == {f"node-{i}" for i in range(4)}
            assert view["node-2"].meta == b"m2"
            assert view["node-2"].address == nodes[2].address
            assert node.member(node.node_id) is not None
        # probes flowed (ten acked by each node, about a second of rounds at FAST's pace) and nobody was
        # suspected meanwhile on a clean network: a negative window counted in rounds, not seconds
        await wait_until(
            lambda: all(n.stats()["acks"] >= 10 for n in nodes), "ten acks each", 30.0, every_s=0.01
        )
        assert all_alive(nodes)
        assert sum(n.stats()["deaths"] for n in nodes) == 0


async def test_a_crashed_member_is_declared_dead_by_everyone() -> None:
    async with cluster(5) as nodes:
        seen: list[Member] = []
        nodes[0].subscribe(seen.append)
        victim = nodes[4]
        await victim.stop()  # no leave: looks like kill -9
        await wait_until(
            lambda: all(state_of(n, victim.node_id) is MemberState.DEAD for n in nodes[:4]),
            "victim dead everywhere",
            10.0,
            every_s=0.01,
        )
        states = [m.state for m in seen if m.node_id == victim.node_id]
        assert MemberState.DEAD in states
        assert all(state_of(n, m.node_id) is MemberState.ALIVE for n in nodes[:4] for m in nodes[:4])


async def test_a_member_that_leaves_is_left_everywhere_not_dead() -> None:
    async with cluster(4) as nodes:
        leaver = nodes[3]
        await leaver.leave(timeout_s=2.0)
        await leaver.stop()
        await wait_until(
            lambda: all(state_of(n, leaver.node_id) is MemberState.LEFT for n in nodes[:3]),
            "leaver LEFT everywhere",
            5.0,
            every_s=0.01,
        )
        await asyncio.sleep(1.0)  # it stays LEFT: nobody turns it into DEAD
        assert all(state_of(n, leaver.node_id) is MemberState.LEFT for n in nodes[:3])


async def test_set_meta_propagates_and_notifies_subscribers() -> None:
    async with cluster(4) as nodes:
        updates: list[Member] = []
        nodes[3].subscribe(updates.append)
        before = nodes[1].incarnation
        nodes[1].set_meta(b"leader:p0@7")
        assert nodes[1].incarnation == before + 1
        await wait_until(
            lambda: all(n.member("node-1").meta == b"leader:p0@7" for n in nodes),  # type: ignore[union-attr]
            "new meta everywhere",
            3.0,
            every_s=0.01,
        )
        assert any(m.node_id == "node-1" and m.meta == b"leader:p0@7" for m in updates)
        with pytest.raises(MetadataTooLarge):
            nodes[1].set_meta(b"x" * (FAST.meta_bytes_max + 1))
        assert nodes[1].member("node-1").meta == b"leader:p0@7"  # type: ignore[union-attr]


async def test_a_member_with_the_wrong_secret_cannot_join() -> None:
    async with cluster(3) as nodes:
        intruder = Gossip("intruder", "127.0.0.1:0", b"not-the-secret", config=FAST, seed=9)
        await intruder.start()
        try:
            # The node refuses the intruder's push-pull and closes the connection: the join ends as soon as
            # the node has read the request (and counted its failure). A loop starved past the join's
            # timeout (a loaded machine) ends an attempt early, possibly before the request was sent, so
            # the intruder tries until the proof that a request landed is there.
            for _attempt in range(10):
                assert await intruder.join([nodes[0].address], timeout_s=5.0) == 0
                if nodes[0].stats()["auth_failures"] >= 1:
                    break
            assert nodes[0].stats()["auth_failures"] >= 1
            await asyncio.sleep(0.5)  # a negative window: the intruder does not get in by another path
            assert all(n.member("intruder") is None for n in nodes)
            assert [m.node_id for m in intruder.members()] == ["intruder"]
        finally:
            await intruder.stop()


async def test_garbage_datagrams_are_counted_and_ignored() -> None:
    async with cluster(3) as nodes:
        target = nodes[0]
        host, port = target.address.rsplit(":", 1)
        before = target.stats()
        valid = wire.encode_datagram(
            SECRET, "tool", nodes[1].address, 7, [Ping(1, "node-0")], salt=os.urandom(wire.SALT_BYTES)
        )
        forged = bytearray(valid)
        forged[-1] ^= 0xFF
        bad_body = wire._seal(SECRET, wire.KIND_DATAGRAM, b"\xc1not msgpack", os.urandom(wire.SALT_BYTES))
        wrong_shape = wire._seal(SECRET, wire.KIND_DATAGRAM, b"\x93\x01\x02\x03", os.urandom(wire.SALT_BYTES))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for data in (b"", b"\x00" * 10, b"hello world" * 5, bytes(forged), bad_body, wrong_shape):
                sock.sendto(data, (host, int(port)))
            sock.sendto(b"\x01\x01" + b"\x00" * 2000, (host, int(port)))  # oversized
            sock.sendto(valid, (host, int(port)))
            sock.sendto(valid, (host, int(port)))  # a replay of an authentic datagram
        await wait_until(
            lambda: target.stats()["replays"] > before["replays"] and target.stats()["oversized"] > 0,
            "rejections counted",
            2.0,
            every_s=0.01,
        )
        after = target.stats()
        assert after["auth_failures"] - before["auth_failures"] == 1
        assert after["malformed"] - before["malformed"] == 5
        assert after["oversized"] - before["oversized"] == 1
        assert after["replays"] - before["replays"] == 1
        # and the member keeps working: five more probes acked, and nobody suspected meanwhile
        await wait_until(
            lambda: target.stats()["acks"] >= before["acks"] + 5, "five more acks", 30.0, every_s=0.01
        )
        assert all_alive(nodes)


async def test_join_never_raises_for_unreachable_seeds_but_rejects_bad_input() -> None:
    node = Gossip("lonely", "127.0.0.1:0", SECRET, config=FAST)
    with pytest.raises(NotStarted):
        await node.join(["127.0.0.1:1"])
    await node.leave()  # nothing to leave yet: a no-op, so close paths can always call it
    await node.start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
            closed.bind(("127.0.0.1", 0))
            free_address = f"127.0.0.1:{closed.getsockname()[1]}"
        assert await node.join([free_address], timeout_s=1.0) == 0
        assert await node.join([node.address]) == 0  # ourselves: nothing to do
        for bad in ("no-port", "host:port", "127.0.0.1:99999"):
            with pytest.raises(InvalidAddress):
                await node.join([bad])
        assert [m.node_id for m in node.members()] == ["lonely"]
    finally:
        await node.stop()
    with pytest.raises(MetadataTooLarge):
        Gossip("big", "127.0.0.1:0", SECRET, meta=b"x" * 513)


async def test_a_crashed_member_restarting_under_its_name_is_alive_again() -> None:
    async with cluster(3) as nodes:
        victim = nodes[2]
        address = victim.address
        await victim.stop()
        await wait_until(
            lambda: all(state_of(n, "node-2") is MemberState.DEAD for n in nodes[:2]),
            "node-2 dead on the other nodes",
            10.0,
            every_s=0.01,
        )
        reborn = Gossip("node-2", address, SECRET, meta=b"reborn", config=FAST, seed=42)
        await reborn.start()
        try:
            assert await reborn.join([nodes[0].address]) == 1
            # it learns it was declared dead, refutes with a higher incarnation, and is alive everywhere
            await wait_until(
                lambda: all(
                    state_of(n, "node-2") is MemberState.ALIVE and n.member("node-2").meta == b"reborn"  # type: ignore[union-attr]
                    for n in nodes[:2]
                ),
                "node-2 alive again with its new meta on the other nodes",
                5.0,
                every_s=0.01,
            )
            assert reborn.incarnation > 0
        finally:
            await reborn.stop()


async def test_long_dead_members_are_removed_and_subscribers_hear_of_it() -> None:
    config = replace(FAST, dead_member_reap_ms=1_000)
    async with cluster(3, config=config) as nodes:
        heard: list[Member] = []
        nodes[0].subscribe(heard.append)
        await nodes[2].stop()
        await wait_until(
            lambda: state_of(nodes[0], "node-2") is MemberState.DEAD,
            "node-2 dead on node-0",
            10.0,
            every_s=0.01,
        )
        await wait_until(
            lambda: nodes[0].member("node-2") is None,
            "node-2 removed from node-0's members",
            5.0,
            every_s=0.01,
        )
        assert [m.node_id for m in nodes[0].members()] == ["node-0", "node-1"]
        assert heard[-1].node_id == "node-2" and heard[-1].state is MemberState.DEAD
        assert nodes[0].stats()["reaped"] == 1


async def test_stopped_members_refuse_calls_and_a_left_member_stays_left() -> None:
    async with cluster(3) as nodes:
        await nodes[2].leave(timeout_s=1.0)
        nodes[2].set_meta(b"after leave")  # must not undo the leave with a new alive broadcast
        await wait_until(
            lambda: state_of(nodes[0], "node-2") is MemberState.LEFT,
            "node-2 LEFT on node-0",
            3.0,
            every_s=0.01,
        )
        await asyncio.sleep(0.5)  # a negative window: the later meta does not bring it back alive
        assert state_of(nodes[0], "node-2") is MemberState.LEFT
        await nodes[2].stop()
        with pytest.raises(NotStarted):
            await nodes[2].join([nodes[0].address])
