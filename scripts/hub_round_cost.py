"""Hot CPU of the Raft transport's fixed costs, on one thread and loopback, load-proof (min of 7 repeats):

    .venv/bin/python scripts/hub_round_cost.py

* a driver round's wait with nothing arriving (``MuxHub.poll(0)`` on connected idle hubs): what every
  round of a node's Raft driver pays besides its ticks;
* one message through two hubs: encoding and queueing it, sealing and sending it (``MuxHub.flush``), and
  receiving it (``MuxHub.poll``: recv, decrypt, batch and message decode, delivery to the group).

A node's driver pays more than this in place: it is woken for each round on a busy machine, with cold
caches (docs/performance.md, "Where a single-record request's CPU goes, by round")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from raftlog.consensus import wire_messages
from raftlog.consensus.hub import MuxHub

SECRET = b"hub-round-cost-secret-0123456789"
CALLS = 2000


class _Sink:
    received = 0

    def push_event(self, kind: str, node_id: str) -> None:
        pass

    def push_messages(self, peer_id: str, messages: list[Any], inbox_max: int) -> int:
        _Sink.received += len(messages)
        return len(messages)


def _connected(count: int) -> list[MuxHub]:
    hubs = [MuxHub(f"n{i}", "127.0.0.1:0", SECRET) for i in range(count)]
    for hub in hubs:
        for other in hubs:
            if other is not hub:
                hub.peers.set(other.node_id, other.address)
    deadline = time.monotonic() + 10
    while not all(peer.connected for hub in hubs for peer in hub.peers.by_id.values()):
        if time.monotonic() > deadline:
            raise SystemExit("hubs not connected within 10 s")
        for hub in hubs:
            hub.poll(0.0)
    return hubs


def _min_us(action: Callable[[], float], repeats: int = 7) -> float:
    return min(action() for _ in range(repeats)) * 1e6


def main() -> None:
    hubs = _connected(3)
    idle = hubs[0]

    def idle_rounds() -> float:
        started = time.thread_time()
        for _ in range(CALLS):
            idle.poll(0.0)
        return (time.thread_time() - started) / CALLS

    print(f"a round's wait, nothing arriving (MuxHub.poll(0), two peers): {_min_us(idle_rounds):.1f} us")
    sender, receiver = hubs[0], hubs[1]
    for hub in hubs:
        hub.register_group("topic/0", _Sink())
    append = {"type": "append_entries", "term": 3, "commit_index": 1000, "prevLogIdx": 1000,
              "prevLogTerm": 3, "entries": [(b"\x01" + b"x" * 180, 1001, 3)]}  # fmt: skip
    ack = {"type": "next_node_idx", "term": 3, "next_node_idx": 1002, "success": True, "reset": False}
    for name, message in (("append_entries, one 181-byte entry", append), ("next_node_idx (an ack)", ack)):
        costs: dict[str, list[float]] = {"encode and queue": [], "seal and send": [], "receive": []}
        for _ in range(7):
            spent = dict.fromkeys(costs, 0.0)
            for _ in range(CALLS):
                started = time.thread_time()
                sender.enqueue("n1", "topic/0", wire_messages.encode_message(message))
                queued = time.thread_time()
                sender.flush()
                sent = time.thread_time()
                before = _Sink.received
                while _Sink.received == before:
                    receiver.poll(0.001)
                spent["encode and queue"] += queued - started
                spent["seal and send"] += sent - queued
                spent["receive"] += time.thread_time() - sent
            for key, seconds in spent.items():
                costs[key].append(seconds / CALLS * 1e6)
        print(f"{name}: " + ", ".join(f"{key} {min(values):.1f} us" for key, values in costs.items()))
    for hub in hubs:
        hub.close()


if __name__ == "__main__":
    main()
