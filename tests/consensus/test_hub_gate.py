"""A hub keeps out a peer by what its code announces (``hub_gate``): the levels each side announces in its
handshake (``wire``: bound into the transcript, left out by a node of release 0.1.0, which ignores them),
and real hubs with stock pysyncobj groups where the rule, once it turns against a peer that announces
nothing, cuts it off: it receives no entry more, and its dials are refused, while the others commit."""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgpack
import pytest
from test_transport import Node_, commit, leader_of, wait_until

from raftlog.consensus import wire, wire_errors
from raftlog.consensus.hub_gate import LevelGate

SECRET = b"test-cluster-secret-0123456789ab"
LEVELS = {"raftlog.version": 2, "transaction.version": 2}


def run_handshake(
    dialer: wire.DialerHandshake,
    acceptor: wire.AcceptorHandshake,
    tamper_hello: bool = False,
    strip_challenge: bool = False,
) -> tuple[wire.Session, wire.Session]:
    reader = wire.FrameReader(wire.HANDSHAKE_FRAME_BYTES_MAX)
    ((kind, payload),) = reader.frames(dialer.hello())
    if tamper_hello:  # on the way: the dialer made to announce more than it does
        hello = msgpack.unpackb(payload)
        hello["levels"] = {"raftlog.version": 9}
        payload = msgpack.packb(hello)
    ((kind, payload),) = reader.frames(acceptor.on_hello(kind, payload))
    if strip_challenge:  # on the way: the acceptor's announcement taken out
        challenge = msgpack.unpackb(payload)
        del challenge["levels"]
        payload = msgpack.packb(challenge)
    auth, dialer_session = dialer.on_challenge(kind, payload)
    ((kind, payload),) = reader.frames(auth)
    return dialer_session, acceptor.on_auth(kind, payload)


def sides(dialer_levels: Mapping[str, int] | None, acceptor_levels: Mapping[str, int] | None):  # type: ignore[no-untyped-def]
    dialer = wire.DialerHandshake(SECRET, "n2", "n1", os.urandom(32), dialer_levels)
    acceptor = wire.AcceptorHandshake(SECRET, "n1", os.urandom(32), {"n2"}.__contains__, acceptor_levels)
    return dialer, acceptor


def test_each_side_learns_the_levels_the_other_announces() -> None:
    dialer, acceptor = sides(LEVELS, {"raftlog.version": 3})
    sent, received = run_handshake(dialer, acceptor)
    assert acceptor.peer_levels == LEVELS and dialer.peer_levels == {"raftlog.version": 3}
    reader = wire.FrameReader(1 << 20)
    ((kind, payload),) = reader.frames(sent.seal(wire.KIND_BATCH, b"entries"))
    assert received.open(kind, payload) == b"entries"


@pytest.mark.parametrize("dialer_levels, acceptor_levels", [(None, LEVELS), (LEVELS, None), (None, None)])
def test_a_side_that_announces_nothing_as_release_0_1_0_still_connects(
    dialer_levels: Mapping[str, int] | None, acceptor_levels: Mapping[str, int] | None
) -> None:
    """Release 0.1.0 sends no levels and ignores the key: the handshake and transcript are its own, and
    the other side learns that nothing was announced."""
    dialer, acceptor = sides(dialer_levels, acceptor_levels)
    run_handshake(dialer, acceptor)
    assert acceptor.peer_levels == dialer_levels
    assert dialer.peer_levels == (acceptor_levels if dialer_levels is not None else None)


def test_an_announcement_altered_or_stripped_on_the_way_fails_the_handshake() -> None:
    dialer, acceptor = sides(LEVELS, LEVELS)
    with pytest.raises(wire_errors.AuthenticationFailed):  # the acceptor bound what it got, not what was sent
        run_handshake(dialer, acceptor, tamper_hello=True)
    dialer, acceptor = sides(LEVELS, LEVELS)
    with pytest.raises(wire_errors.AuthenticationFailed):  # the acceptor bound both maps; the dialer, none
        run_handshake(dialer, acceptor, strip_challenge=True)


def test_malformed_announcements_are_refused() -> None:
    for levels in ({"x" * 65: 1}, {"raftlog.version": -1}, {"a": "2"}, {f"f{i}": 1 for i in range(33)}):
        with pytest.raises(wire_errors.MalformedFrame):
            wire.check_levels(levels)


@pytest.mark.timeout(60)
def test_a_peer_announcing_nothing_is_cut_off_once_the_rule_turns_against_it() -> None:
    """n0 and n1 announce level 2 and keep out a peer below ``level[0]``; n2 announces nothing (a node of
    release 0.1.0). While the level is 1 all three replicate; raised to 2 (``recheck``), n2's connections
    close, its dials are refused and named, it applies no entry more, and n0 and n1 go on committing."""
    level = [1]

    def admit(peer: str, announced: Mapping[str, int] | None) -> str | None:
        supported = 1 if announced is None else announced.get("raftlog.version", 1)
        return None if supported >= level[0] else f"supports {supported}, the cluster is at {level[0]}"

    nodes = [Node_(f"n{i}", SECRET, gate=LevelGate(LEVELS, admit)) for i in range(2)] + [Node_("n2", SECRET)]
    try:
        for node in nodes:
            for other in nodes:
                if other is not node:
                    node.hub.peers.set(other.node_id, other.hub.address)
            node.start()
        for node in nodes:
            node.add_group("g", ["n0", "n1", "n2"])
        wait_until(lambda: leader_of(nodes, "g") is not None, 20, "a leader")
        commit(nodes, ["g"], count=3, timeout_s=15, retry=True)
        wait_until(lambda: all(n.groups["g"].value == 3 for n in nodes), 15, "n2 applied the first 3")
        assert nodes[0].hub.gate.announced("n2") == (True, None)
        # n2 announced nothing, so n0 answered its HELLO without its own levels
        assert nodes[2].hub.gate.announced("n0") == (True, None)

        level[0] = 2
        for node in nodes[:2]:
            node.hub.recheck()
        wait_until(
            lambda: (
                not any(n.hub.peers.is_connected("n2") for n in nodes[:2])
                and all("n2" in n.hub.gate.kept_out() for n in nodes[:2])
            ),
            15,
            "n2 cut off and named by both",
        )
        received = nodes[2].hub.stats().get("messages_received", 0)
        commit(nodes[:2], ["g"], count=5, timeout_s=20, retry=True)
        wait_until(lambda: all(n.groups["g"].value == 8 for n in nodes[:2]), 15, "n0 and n1 at 8")
        # n2 dials n0 and n1 (greater id) again and again: each time refused, never let in
        refusals = nodes[0].hub.gate.kept_out()["n2"].refusals
        wait_until(
            lambda: nodes[0].hub.gate.kept_out()["n2"].refusals > refusals, 20, "n2's next dial refused"
        )
        assert nodes[2].groups["g"].value == 3
        assert nodes[2].hub.stats().get("messages_received", 0) == received
        reason = nodes[0].hub.gate.kept_out()["n2"].reason
        assert reason == "supports 1, the cluster is at 2"
        assert nodes[0].hub.stats()["peers_kept_out"] > 0
    finally:
        for node in nodes:
            node.close()
