"""A deterministic simulated network and clock for the pure protocol core (a top-level test module).

Every node is a :class:`membership.protocol.Protocol`; datagrams get 1-3 ms of latency and may be lost,
filtered, partitioned or buffered while the receiver is paused; push-pull is a reliable exchange (TCP)
that fails across partitions and to stopped or paused nodes. One seeded ``random.Random`` drives the
network and seeds every node, so a run is reproducible.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable

from membership.messages import Message
from membership.model import GossipConfig, Member, MemberState
from membership.protocol import Action, Protocol, PushPull, Send

Filter = Callable[[str, str, tuple[Message, ...]], tuple[Message, ...]]


class SimNet:
    def __init__(self, seed: int = 1, config: GossipConfig | None = None) -> None:
        self.rng = random.Random(seed)
        self.config = config or GossipConfig()
        self.now_ms = 0
        self.nodes: dict[str, Protocol] = {}  # running nodes
        self.address_of: dict[str, str] = {}
        self.node_at: dict[str, str] = {}
        self.loss = 0.0
        self.inbound_loss: dict[str, float] = {}
        self.group: dict[str, int] = {}  # partition: traffic only within a group
        self.paused: dict[str, list[tuple[str, str, tuple[Message, ...]]]] = {}
        self.filters: list[Filter] = []
        self.events: list[tuple[int, str, Member]] = []  # (now_ms, observer, member as it became)
        self.datagrams = 0
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._order = 0
        self._wake: dict[str, int] = {}

    # ------------------------------------------------------------------------------------- topology
    def add(self, node_id: str, seeds: Iterable[str] = (), meta: bytes = b"") -> Protocol:
        address = (
            self.address_of.get(node_id)
            or f"10.0.{len(self.address_of) // 200}.{len(self.address_of) % 200}:7946"
        )
        self.address_of[node_id] = address
        self.node_at[address] = node_id
        node = Protocol(
            node_id,
            address,
            meta,
            self.config,
            random.Random(self.rng.getrandbits(64)),
            self.now_ms,
            on_change=lambda m, observer=node_id: self.events.append((self.now_ms, observer, m)),
        )
        self.nodes[node_id] = node
        self._wake.pop(node_id, None)
        for seed in seeds:
            self._push_pull(node_id, self.address_of[seed], True)
        self._schedule(node_id)
        return node

    def start_cluster(self, count: int, prefix: str = "n") -> list[str]:
        ids = [f"{prefix}{i}" for i in range(count)]
        self.add(ids[0])
        for node_id in ids[1:]:
            self.add(node_id, seeds=[ids[0]])
        return ids

    def crash(self, node_id: str) -> None:
        self.nodes.pop(node_id)
        self._wake.pop(node_id, None)
        self.paused.pop(node_id, None)

    def pause(self, node_id: str) -> None:
        self.paused.setdefault(node_id, [])

    def resume(self, node_id: str) -> None:
        buffered = self.paused.pop(node_id, [])
        for src_id, src_address, messages in buffered:
            self._receive(node_id, src_id, src_address, messages)
        self._schedule(node_id)

    def partition(self, *groups: Iterable[str]) -> None:
        self.group = {node_id: index for index, members in enumerate(groups) for node_id in members}

    def heal(self) -> None:
        self.group = {}

    def _cut(self, a: str, b: str) -> bool:
        return bool(self.group) and self.group.get(a, -1) != self.group.get(b, -1)

    # ---------------------------------------------------------------------------------------- views
    def state(self, observer: str, node_id: str) -> MemberState | None:
        member = self.nodes[observer].member(node_id)
        return member.state if member is not None else None

    def all_see(
        self, node_id: str, state: MemberState | None, observers: Iterable[str] | None = None
    ) -> bool:
        ids = list(observers) if observers is not None else [n for n in self.nodes if n != node_id]
        return all(self.state(o, node_id) is state for o in ids)

    def converged(self) -> bool:
        ids = list(self.nodes)
        return all(self.state(o, n) is MemberState.ALIVE for o in ids for n in ids)

    def events_where(self, state: MemberState, since_ms: int = 0) -> list[tuple[int, str, Member]]:
        return [e for e in self.events if e[0] >= since_ms and e[2].state is state]

    # ------------------------------------------------------------------------------------------ time
    def run(self, duration_ms: int) -> None:
        end = self.now_ms + duration_ms
        steps = 0
        while self._heap and self._heap[0][0] <= end:
            at, _, callback = heapq.heappop(self._heap)
            self.now_ms = at
            callback()
            steps += 1
            assert steps < 50_000_000, "simulation did not make progress"
        self.now_ms = end

    def run_until(self, predicate: Callable[[], bool], timeout_ms: int, step_ms: int = 10) -> int | None:
        """Advance until ``predicate()``; returns the simulated ms it took, or None after ``timeout_ms``."""
        start = self.now_ms
        while not predicate():
            if self.now_ms - start >= timeout_ms:
                return None
            self.run(step_ms)
        return self.now_ms - start

    def _at(self, at_ms: int, callback: Callable[[], None]) -> None:
        self._order += 1
        heapq.heappush(self._heap, (at_ms, self._order, callback))

    def _schedule(self, node_id: str) -> None:
        node = self.nodes.get(node_id)
        if node is None or node_id in self.paused:
            return
        deadline = max(self.now_ms, node.next_deadline_ms())
        current = self._wake.get(node_id)
        if current is None or deadline < current:
            self._wake[node_id] = deadline
            self._at(deadline, lambda: self._tick(node_id, deadline))

    def _tick(self, node_id: str, deadline: int) -> None:
        if self._wake.get(node_id) != deadline or node_id not in self.nodes or node_id in self.paused:
            return
        del self._wake[node_id]
        self._execute(node_id, self.nodes[node_id].tick(self.now_ms))
        self._schedule(node_id)

    # --------------------------------------------------------------------------------------- traffic
    def _execute(self, src_id: str, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._deliver(src_id, action)
            elif isinstance(action, PushPull):
                self._push_pull(src_id, action.address, action.join)

    def _deliver(self, src_id: str, send: Send) -> None:
        self.datagrams += 1
        dst_id = self.node_at.get(send.address)
        if dst_id is None or self._cut(src_id, dst_id):
            return
        if self.loss and self.rng.random() < self.loss:
            return
        inbound = self.inbound_loss.get(dst_id, 0.0)
        if inbound and self.rng.random() < inbound:
            return
        messages = send.messages
        for keep in self.filters:
            messages = keep(src_id, dst_id, messages)
        src_address = self.address_of[src_id]
        self._at(
            self.now_ms + self.rng.randint(1, 3), lambda: self._receive(dst_id, src_id, src_address, messages)
        )

    def _receive(self, dst_id: str, src_id: str, src_address: str, messages: tuple[Message, ...]) -> None:
        node = self.nodes.get(dst_id)
        if node is None:
            return
        if dst_id in self.paused:
            self.paused[dst_id].append((src_id, src_address, messages))
            return
        self._execute(dst_id, node.handle(src_id, src_address, messages, self.now_ms))
        self._schedule(dst_id)

    def _push_pull(self, src_id: str, address: str, join: bool) -> None:
        src = self.nodes[src_id]
        dst_id = self.node_at.get(address)
        latency = self.rng.randint(1, 3)
        if dst_id is None or dst_id not in self.nodes or dst_id in self.paused or self._cut(src_id, dst_id):
            self._at(self.now_ms + latency, lambda: src.push_pull_failed(address))
            return
        request = src.local_state(join)

        def serve() -> None:
            dst = self.nodes.get(dst_id)
            if dst is None or dst_id in self.paused:
                return
            dst.merge_remote_state(src_id, request, self.now_ms)
            self._schedule(dst_id)
            reply = dst.local_state()

            def answer() -> None:
                if self.nodes.get(src_id) is src:
                    src.merge_remote_state(dst_id, reply, self.now_ms)
                    self._schedule(src_id)

            self._at(self.now_ms + latency, answer)

        self._at(self.now_ms + latency, serve)
