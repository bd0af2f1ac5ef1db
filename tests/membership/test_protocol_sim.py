"""The pure protocol core on a simulated clock and network (gossip_sim.SimNet), memberlist LAN defaults."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest
from gossip_sim import SimNet

from membership.errors import MetadataTooLarge
from membership.messages import Ack, Alive, Dead, MemberRecord, Message, Ping, PushPullBody, Suspect
from membership.model import GossipConfig, MemberState, retransmit_limit, suspicion_timeout_ms
from membership.protocol import Protocol, Send

DEAD, ALIVE, SUSPECT, LEFT = MemberState.DEAD, MemberState.ALIVE, MemberState.SUSPECT, MemberState.LEFT


def converged_net(count: int, seed: int = 1, config: GossipConfig | None = None) -> tuple[SimNet, list[str]]:
    net = SimNet(seed=seed, config=config)
    ids = net.start_cluster(count)
    assert net.run_until(net.converged, 10_000) is not None, "cluster did not converge"
    return net, ids


def test_memberlist_formulas() -> None:
    config = GossipConfig()
    assert suspicion_timeout_ms(config, 50) == 6795  # 4 * log10(50) * 1 s, as the REPORT's 6.8 s
    assert suspicion_timeout_ms(config, 5) == 4000  # max(1, log10 n)
    assert retransmit_limit(config, 50) == 8
    assert retransmit_limit(config, 9) == 4


@pytest.mark.parametrize("count", [5, 20, 50])
def test_a_crash_is_detected_by_every_member_within_the_suspicion_bounds(count: int) -> None:
    net, ids = converged_net(count, seed=count)
    net.run(5_000)
    victim = ids[-1]
    net.crash(victim)
    took = net.run_until(lambda: net.all_see(victim, DEAD), 60_000)
    assert took is not None, "crash never detected everywhere"
    # first failed probe within ~2 rounds of round-robin, then at least the minimum suspicion timeout
    minimum = suspicion_timeout_ms(net.config, count)
    assert minimum <= took <= minimum * net.config.suspicion_max_timeout_mult
    assert took <= 10_000, f"all {count - 1} survivors took {took} ms"
    # the relays' nacks arrived before the probe deadlines: a dead peer does not degrade our health
    if count > 2:
        assert sum(net.nodes[n].stats["nacks"] for n in ids[:-1]) > 0
    assert max(net.nodes[n].awareness for n in ids[:-1]) == 0
    assert not [e for e in net.events_where(DEAD) if e[2].node_id != victim]


def _suspect_then_time_to_death(confirmers: list[str]) -> int:
    config = GossipConfig()
    node = Protocol("me", "10.0.0.1:1", b"", config, random.Random(1), 0)
    records = tuple(MemberRecord(f"m{i}", f"10.0.1.{i}:1", 0, ALIVE, b"") for i in range(9))
    node.merge_remote_state("m0", PushPullBody(False, records), 0)
    node.handle("m1", "10.0.1.1:1", [Suspect("m8", 0, "m1")], 0)
    for sender in confirmers:
        node.handle(sender, "10.0.1.2:1", [Suspect("m8", 0, sender)], 0)
    for now in range(0, 60_000, 10):
        for action in node.tick(now):  # everyone answers our probes: only the suspicion timer decides
            if isinstance(action, Send):
                for message in action.messages:
                    if isinstance(message, Ping):
                        node.handle(message.target_id, action.address, [Ack(message.sequence)], now)
        member = node.member("m8")
        assert member is not None
        if member.state is DEAD:
            return now
    raise AssertionError("suspicion never expired")


def test_independent_confirmations_shorten_the_suspicion_timeout() -> None:
    # n = 10: min = 4 s, max = 6 * min = 24 s, k = suspicion_mult - 2 = 2 confirmations reach min
    alone = _suspect_then_time_to_death([])
    one = _suspect_then_time_to_death(["m2"])
    two = _suspect_then_time_to_death(["m2", "m3"])
    repeated = _suspect_then_time_to_death(["m2", "m2", "m1"])  # not independent: still one
    assert alone == pytest.approx(24_000, abs=20)
    assert two == pytest.approx(4_000, abs=20)
    assert two < one < alone
    assert repeated == one


def test_a_falsely_suspected_member_refutes_with_a_higher_incarnation() -> None:
    node = Protocol("me", "10.0.0.1:1", b"m", GossipConfig(), random.Random(1), 0)
    node.merge_remote_state("a", PushPullBody(False, (MemberRecord("a", "10.0.0.2:1", 0, ALIVE, b""),)), 0)
    node.handle("a", "10.0.0.2:1", [Suspect("me", 0, "a")], 0)
    assert node.me.incarnation == 1
    assert node.awareness == 1
    assert node.stats["refutations"] == 1
    # the refutation rides on the next datagram we send (the ack)
    (send,) = node.handle("a", "10.0.0.2:1", [Ping(5, "me")], 1)
    assert isinstance(send, Send)
    assert Alive("me", "10.0.0.1:1", 1, b"m") in send.messages
    # a peer's "dead" about us is refuted too, and a stale suspicion is ignored
    node.handle("a", "10.0.0.2:1", [Dead("me", 1, "a")], 2)
    assert node.me.incarnation == 2
    node.handle("a", "10.0.0.2:1", [Suspect("me", 0, "a")], 3)
    assert node.me.incarnation == 2


def test_push_pull_merges_a_remote_dead_as_suspect_so_the_accused_can_refute() -> None:
    node = Protocol("me", "10.0.0.1:1", b"", GossipConfig(), random.Random(1), 0)
    records = (MemberRecord("a", "10.0.0.2:1", 3, ALIVE, b""), MemberRecord("b", "10.0.0.3:1", 0, ALIVE, b""))
    node.merge_remote_state("b", PushPullBody(False, records), 0)
    node.merge_remote_state("b", PushPullBody(False, (MemberRecord("a", "10.0.0.2:1", 3, DEAD, b""),)), 1)
    assert node.member("a").state is SUSPECT  # type: ignore[union-attr]
    node.merge_remote_state("b", PushPullBody(False, (MemberRecord("me", "10.0.0.1:1", 4, DEAD, b""),)), 2)
    assert node.me.incarnation == 5
    assert node.member("me").state is ALIVE  # type: ignore[union-attr]


@pytest.mark.parametrize("loss", [0.05, 0.10])
def test_no_false_deaths_under_packet_loss_over_simulated_minutes(loss: float) -> None:
    net, ids = converged_net(50, seed=int(loss * 100))
    net.loss = loss
    net.run(5 * 60_000)
    suspicions = net.events_where(SUSPECT)
    assert len(suspicions) > 0, "the loss never caused a suspicion: the test would prove nothing"
    assert net.events_where(DEAD) == []
    assert sum(net.nodes[n].stats["refutations"] for n in ids) > 0
    net.loss = 0.0
    assert net.run_until(net.converged, 10_000) is not None


def test_awareness_grows_when_nacks_go_missing_and_slows_probing_then_recovers() -> None:
    net, ids = converged_net(10, seed=7)
    deaf = ids[3]
    net.inbound_loss[deaf] = 1.0  # it hears nothing: no acks, no nacks
    net.run(20_000)
    node = net.nodes[deaf]
    assert node.awareness == net.config.awareness_max_multiplier - 1
    probes_before = node.stats["probes"]
    net.run(24_000)
    # probing every 8 s instead of every 1 s
    assert node.stats["probes"] - probes_before <= 4
    net.inbound_loss[deaf] = 0.0
    assert net.run_until(lambda: net.nodes[deaf].awareness == 0, 120_000) is not None


def _strip_alive_about(node_id: str, receiver: str, until_ms: list[int], net: SimNet):  # type: ignore[no-untyped-def]
    def keep(src: str, dst: str, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        if dst != receiver or net.now_ms >= until_ms[0]:
            return messages
        return tuple(m for m in messages if not (isinstance(m, Alive) and m.node_id == node_id))

    return keep


@pytest.mark.parametrize("fixed", [True, False])
def test_the_join_gap_is_closed_by_push_pulling_with_unknown_senders(fixed: bool) -> None:
    # Only the fix (or the slow periodic push-pull, made very slow here) can close the gap.
    config = GossipConfig(push_pull_interval_ms=600_000, reconnect_interval_ms=600_000)
    config = replace(config, push_pull_unknown_senders=fixed)
    net, _ = converged_net(10, seed=11, config=config)
    # every gossiped "alive" about the newcomer to n7 is lost until its broadcasts ran out
    net.filters.append(_strip_alive_about("new", "n7", [net.now_ms + 5_000], net))
    net.add("new", seeds=["n0"])
    net.run(5_000)
    knows = net.run_until(lambda: net.state("n7", "new") is ALIVE, 5_000)
    if fixed:
        assert knows is not None, "n7 never learned about the newcomer"
        assert net.nodes["n7"].stats["unknown_sender_push_pulls"] >= 1
    else:
        assert knows is None  # memberlist's behaviour: the gap the REPORT measured


def test_members_joining_one_by_one_under_loss_converge_quickly() -> None:
    net = SimNet(seed=5)
    net.loss = 0.05
    net.add("n0")
    for i in range(1, 30):
        net.add(f"n{i}", seeds=["n0"])
        net.run(100)
    took = net.run_until(net.converged, 30_000)
    assert took is not None and took <= 3_000


def test_leave_is_seen_as_left_everywhere_and_never_refuted() -> None:
    net, ids = converged_net(10, seed=3)
    leaver = net.nodes[ids[4]]
    leaver.leave(net.now_ms)
    assert net.run_until(lambda: leaver.leave_done, 5_000) is not None
    assert net.run_until(lambda: net.all_see(ids[4], LEFT), 5_000) is not None
    net.run(60_000)  # it keeps answering pings until stopped, yet stays LEFT
    assert net.all_see(ids[4], LEFT)
    assert leaver.me.incarnation == 0
    assert net.events_where(DEAD) == []


def test_long_dead_members_are_reaped_and_subscribers_hear_of_it() -> None:
    config = GossipConfig(dead_member_reap_ms=60_000)
    net, ids = converged_net(6, seed=2, config=config)
    net.crash(ids[5])
    assert net.run_until(lambda: net.all_see(ids[5], DEAD), 60_000) is not None
    died_at = net.now_ms
    net.run(50_000)
    assert net.all_see(ids[5], DEAD)
    assert net.run_until(lambda: net.all_see(ids[5], None), 15_000) is not None
    assert net.now_ms - died_at >= 60_000 - 1_000
    removals = [
        e for e in net.events if e[2].node_id == ids[5] and e[2].state is DEAD and e[0] >= died_at + 50_000
    ]
    assert {observer for _, observer, _ in removals} == set(ids[:5])


@pytest.mark.parametrize("split_ms", [20_000, 60_000])
def test_a_partition_heals(split_ms: int) -> None:
    net, ids = converged_net(10, seed=4)
    left, right = ids[:5], ids[5:]
    net.partition(left, right)
    net.run(split_ms)
    if split_ms >= 60_000:  # longer than the maximum suspicion timeout: each side declared the other dead
        assert all(net.state(a, b) is DEAD for a in left for b in right)
    net.heal()
    took = net.run_until(net.converged, 60_000)
    assert took is not None, "partition never healed"
    assert took <= net.config.reconnect_interval_ms + 15_000


def test_metadata_change_reaches_everyone_within_a_second() -> None:
    net, ids = converged_net(50, seed=9)
    for trial in range(5):
        owner = net.nodes[ids[trial * 7]]
        value = b"leader:p%d@%d" % (trial, trial + 1)
        owner.set_meta(value, net.now_ms)
        net._schedule(owner.node_id)
        took = net.run_until(
            lambda v=value, o=owner.node_id: all(  # type: ignore[misc]
                net.nodes[x].member(o).meta == v for x in ids
            ),
            10_000,
            step_ms=5,
        )  # type: ignore[union-attr]
        assert took is not None and took <= 1_000, f"trial {trial}: {took} ms"


def test_oversize_metadata_is_refused_and_changes_nothing() -> None:
    config = GossipConfig()
    with pytest.raises(MetadataTooLarge):
        Protocol("me", "10.0.0.1:1", b"x" * 513, config, random.Random(1), 0)
    node = Protocol("me", "10.0.0.1:1", b"ok", config, random.Random(1), 0)
    with pytest.raises(MetadataTooLarge) as raised:
        node.set_meta(b"x" * 513, 0)
    assert (raised.value.size, raised.value.limit) == (513, 512)
    assert node.me.meta == b"ok" and node.me.incarnation == 0
    node.set_meta(b"x" * 512, 0)  # exactly the limit is fine and fits a datagram
    assert node.me.incarnation == 1


@pytest.mark.parametrize(("pause_ms", "declared_dead"), [(3_000, False), (40_000, True)])
def test_a_paused_member(pause_ms: int, declared_dead: bool) -> None:
    net, ids = converged_net(10, seed=6)
    net.pause(ids[2])
    net.run(pause_ms)
    net.resume(ids[2])
    assert bool(net.events_where(DEAD)) is declared_dead
    # either way it comes back: a paused process refutes when it hears it was suspected or declared dead
    assert net.run_until(net.converged, 40_000) is not None
    assert not [e for e in net.events_where(DEAD) if e[2].node_id != ids[2]]


def test_a_simulation_is_reproducible_from_its_seed() -> None:
    def run() -> list[tuple[int, str, str, str]]:
        net, ids = converged_net(10, seed=21)
        net.loss = 0.1
        net.crash(ids[1])
        net.run(30_000)
        return [(t, o, m.node_id, m.state.value) for t, o, m in net.events]

    assert run() == run()


def _probe_gaps(aligned: bool) -> list[int]:
    config = GossipConfig(aligned_probes=aligned)
    net, ids = converged_net(20, seed=8, config=config)
    pinged: dict[str, list[int]] = {i: [] for i in ids}

    def spy(src: str, dst: str, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        if any(isinstance(m, Ping) for m in messages):
            pinged[dst].append(net.now_ms)
        return messages

    net.filters.append(spy)
    net.run(120_000)
    return [b - a for times in pinged.values() for a, b in itertools.pairwise(times)]


def test_the_aligned_schedule_probes_every_member_about_once_per_interval() -> None:
    aligned = _probe_gaps(True)
    shuffled = _probe_gaps(False)  # memberlist's independent shuffles
    assert len(aligned) > 20 * 100
    assert max(aligned) < 2 * GossipConfig().probe_interval_ms
    assert max(shuffled) > 3 * GossipConfig().probe_interval_ms


def test_the_aligned_schedule_stays_complete_when_awareness_skips_slots() -> None:
    node = Protocol("m0", "10.0.0.1:1", b"", GossipConfig(), random.Random(1), 0)
    records = tuple(MemberRecord(f"m{i}", f"10.0.1.{i}:1", 0, ALIVE, b"") for i in range(1, 10))
    node.merge_remote_state("m1", PushPullBody(False, records), 0)
    # probing every 3rd slot with 9 others: a plain stride would only ever reach 3 of them
    targets = [node._aligned_target(slot * 3 * 1000) for slot in range(9)]
    assert {t.node_id for t in targets if t is not None} == {f"m{i}" for i in range(1, 10)}
