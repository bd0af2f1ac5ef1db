"""An outsider holding the gossip port's push-pull connections (issue 54, item 8) must not keep a
restarted member from joining through its seeds: connections waiting for their first frame are bounded
per source address and, for unknown addresses, together; a known member's host has room of its own; and
a silent connection goes within ``push_pull_first_frame_timeout_ms``.

Real processes: a seed and a member (``gossip_node.py``) on 127.0.0.1, and the flood of
``tests/consensus/raft_port_flood.py`` holding silent connections to the seed from 127.0.0.2.. (never
sending a frame, reconnecting the moment the seed closes one). The member is killed and restarted; its
join through the seed must be answered."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.waiting import wait_for

HERE = pathlib.Path(__file__).parent
NODE = HERE / "gossip_node.py"
FLOOD = HERE.parent / "consensus" / "raft_port_flood.py"
FLOOD_SOURCES = 8  # 127.0.0.2 .. 127.0.0.9
FLOOD_PER_SOURCE = 12  # 96 wanted at once: three times the outsiders' pool of 32
FLOOD_SECONDS = 90.0  # the flood's own bound; the test stops it as soon as it is done
FLOOD_ATTEMPTS_MAX = 2_000_000
JOIN_BOUND_S = 5.0  # the restarted member's join must be answered within this


class Node:
    def __init__(self, node_id: str, seeds: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(NODE), node_id, ",".join(seeds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=HERE,
        )
        self.address = self.expect("address").strip()

    def expect(self, word: str) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # bounded by the test's timeout
        assert line.startswith(word + " "), f"expected {word!r}, got {line!r}"
        return line[len(word) + 1 :]

    def joined(self) -> tuple[int, float]:
        answered, seconds = self.expect("joined").split()
        return int(answered), float(seconds)

    def stats(self) -> dict[str, object]:
        assert self.process.stdin is not None
        self.process.stdin.write("stats\n")
        self.process.stdin.flush()
        return dict(json.loads(self.expect("stats")))

    def state_of(self, node_id: str) -> str | None:
        states = self.stats()["states"]
        assert isinstance(states, dict)
        return states.get(node_id)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def refused(node: Node) -> int:
    """Push-pull connections the node refused (per address or for the pool; before the per-address
    limit existed, every refusal was counted as ``push_pulls_refused``)."""
    stats = node.stats()
    return sum(int(str(stats.get(name, 0))) for name in ("push_pulls_refused", "push_pulls_refused_address"))


@pytest.fixture
def nodes() -> Iterator[list[Node]]:
    started: list[Node] = []
    yield started
    for node in started:
        node.stop()


@pytest.mark.timeout(180)
def test_a_restarted_member_joins_through_its_seed_while_an_outsider_holds_the_port(
    nodes: list[Node],
) -> None:
    seed = Node("seed", [])
    nodes.append(seed)
    assert seed.joined()[0] == 0
    member = Node("member", [seed.address])
    nodes.append(member)
    assert member.joined()[0] == 1
    wait_for(lambda: seed.state_of("member") == "alive", "the seed knows the member", 30, every_s=0.05)

    host, port = seed.address.rsplit(":", 1)
    flood = subprocess.Popen(
        [
            sys.executable,
            str(FLOOD),
            host,
            port,
            *(str(n) for n in (FLOOD_SOURCES, FLOOD_PER_SOURCE, FLOOD_SECONDS, FLOOD_ATTEMPTS_MAX)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # the flood holds the seed's push-pull connections: it refuses the outsiders' newest ones
        wait_for(lambda: refused(seed) > 0, "the seed refusing outsiders", 30, every_s=0.05)
        member.kill()
        restarted = Node("member", [seed.address])
        nodes.append(restarted)
        answered, seconds = restarted.joined()
        assert answered == 1, "the restarted member's join through its seed was refused"
        assert seconds < JOIN_BOUND_S
        wait_for(
            lambda: restarted.state_of("seed") == "alive",
            "the restarted member sees the seed alive",
            30,
            every_s=0.05,
        )
        assert flood.poll() is None, "the flood ended before the join was tested against it"
        assert refused(seed) > 0
    finally:
        flood.terminate()
        flood.wait(10)
