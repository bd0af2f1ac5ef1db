"""The pure SWIM + Lifeguard state machine: no sockets, no clock, no event loop.

The caller feeds it authenticated messages (:meth:`Protocol.handle`), push-pull states
(:meth:`Protocol.merge_remote_state`) and the passage of time (:meth:`Protocol.tick` at or after
:meth:`Protocol.next_deadline_ms`); it answers with :class:`Send` and :class:`PushPull` actions for the I/O
edge to carry out. Time is ``now_ms`` on any monotonic clock; randomness comes from the given
``random.Random``, so a seeded run is reproducible.

Modelled on hashicorp/memberlist (``state.go``, ``suspicion.go``, ``awareness.go``, ``queue.go``):

* probing: round-robin over a shuffled list; ping, then after ``probe_timeout`` (scaled by awareness)
  ping-req through ``indirect_checks`` members, which nack if the target does not answer; the probe fails
  at ``probe_interval`` (scaled). A failed probe makes the target SUSPECT at its known incarnation.
* Lifeguard local health (awareness 0..max-1): -1 per successful probe, +1 per missing nack (or +1 if no
  indirect probe was possible), +1 per refutation; probe interval and timeout are multiplied by
  awareness+1.
* Lifeguard suspicion: starts at max = suspicion_max_timeout_mult * min, where
  min = suspicion_mult * max(1, log10(n)) * probe_interval; shrinks towards min as
  k = suspicion_mult - 2 independent confirmations arrive (log-scaled, as memberlist).
* incarnations: only a member raises its own. Alive(i) beats suspect/dead(j) iff i > j; suspect/dead at
  i >= j beats alive. A claim about ourselves that is not alive, or an alive claim newer than ours, is
  refuted with incarnation max(ours, claimed) + 1.
* dissemination: alive/suspect/dead broadcasts piggyback on every datagram and on a gossip round
  (gossip_nodes members every gossip_interval, including recently dead ones); each is sent at most
  retransmit_mult * ceil(log10(n + 1)) times; a newer broadcast about a member replaces the older one.
* anti-entropy: push-pull of the full table with a random alive member every push_pull_interval (scaled
  above 32 members), with a random DEAD member every reconnect_interval (Serf's reconnect, heals
  partitions), with seeds on join, and with any sender we do not know or believe dead (the join fix).
  A remote "dead" is merged as "suspect" so the accused can refute.
* leave broadcasts dead(self, from=self), which every member records as LEFT; DEAD and LEFT members are
  removed from the table after dead_member_reap_ms.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from membership import wire
from membership.errors import MetadataTooLarge
from membership.messages import (
    Ack,
    Alive,
    Broadcast,
    Dead,
    MemberRecord,
    Message,
    Nack,
    Ping,
    PingRequest,
    PushPullBody,
    Suspect,
)
from membership.model import (
    GossipConfig,
    Member,
    MemberState,
    push_pull_scale,
    retransmit_limit,
    suspicion_timeout_ms,
)
from raftlog.errors import check

NEVER = 2**62
RELAYS_MAX = 1024
UNKNOWN_PULLS_MAX = 1024
HOUSEKEEPING_PROBES = 5  # reaping and join-fix rate-limit expiry run every 5 probe intervals
STAT_NAMES = (
    "probes",
    "acks",
    "nacks",
    "probe_failures",
    "indirect_probes",
    "relayed_pings",
    "suspicions",
    "confirmations",
    "refutations",
    "deaths",
    "leaves",
    "joins",
    "reaped",
    "push_pulls",
    "push_pull_failures",
    "unknown_sender_push_pulls",
    "broadcasts_sent",
    "misdirected_pings",
    "corrections",
)


@dataclass(frozen=True, slots=True)
class Send:
    """Send these messages to ``address`` in one datagram (already within udp_bytes_max)."""

    address: str
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class PushPull:
    """Exchange full state with ``address`` over TCP: send :meth:`Protocol.local_state`, merge the reply."""

    address: str
    join: bool


Action = Send | PushPull


class _Suspicion:
    __slots__ = ("confirmers", "deadline_ms", "incarnation", "k", "max_ms", "min_ms", "start_ms")

    def __init__(self, incarnation: int, from_id: str, k: int, min_ms: int, max_ms: int, now_ms: int) -> None:
        self.incarnation = incarnation
        self.confirmers = {from_id}
        self.k = k
        self.min_ms = min_ms
        self.max_ms = max_ms
        self.start_ms = now_ms
        self.deadline_ms = now_ms + (max_ms if k > 0 else min_ms)

    def confirm(self, from_id: str) -> bool:
        """memberlist ``suspicion.Confirm``: returns whether this was a new, independent confirmation."""
        confirmations = len(self.confirmers) - 1
        if confirmations >= self.k or from_id in self.confirmers:
            return False
        self.confirmers.add(from_id)
        fraction = math.log(confirmations + 2) / math.log(self.k + 1)
        timeout = max(self.min_ms, int(self.max_ms - fraction * (self.max_ms - self.min_ms)))
        self.deadline_ms = self.start_ms + timeout
        return True


@dataclass(eq=False, slots=True)
class _Probe:
    sequence: int
    target_id: str
    indirect_ms: int
    deadline_ms: int
    indirect_sent: bool = field(default=False, init=False)
    expected_nacks: int = field(default=0, init=False)
    nacks: int = field(default=0, init=False)
    done: bool = field(default=False, init=False)


@dataclass(eq=False, slots=True)
class _Relay:
    requester_address: str
    requester_sequence: int
    want_nack: bool
    expire_ms: int


class _Queued:
    __slots__ = ("message", "order", "size", "transmits")

    def __init__(self, message: Broadcast, order: int) -> None:
        self.message = message
        self.order = order
        self.size = wire.message_size(message)
        self.transmits = 0


class Broadcasts:
    """What this node has to tell the others, one latest message per member it is about: piggybacked on
    every datagram while room is left, least sent and newest first, each dropped after ``limit`` sends
    (memberlist's TransmitLimitedQueue)."""

    def __init__(self, stats: dict[str, int]) -> None:
        self._queue: dict[str, _Queued] = {}
        self._order = 0
        self._stats = stats  # counts "broadcasts_sent"

    def __len__(self) -> int:
        return len(self._queue)

    def __contains__(self, node_id: str) -> bool:
        return node_id in self._queue

    def put(self, message: Broadcast) -> None:
        """Queue ``message``, replacing what was queued about the same member."""
        self._order += 1
        self._queue[message.node_id] = _Queued(message, self._order)

    def drop(self, node_id: str) -> None:
        self._queue.pop(node_id, None)

    def take(self, budget: int, limit: int) -> list[Broadcast]:
        """Messages that fit in ``budget`` bytes; one sent ``limit`` times is dropped."""
        if not self._queue:
            return []
        taken: list[Broadcast] = []
        for queued in sorted(self._queue.values(), key=lambda q: (q.transmits, -q.order)):
            if queued.size + 1 > budget:
                continue
            budget -= queued.size
            taken.append(queued.message)
            queued.transmits += 1
            if queued.transmits >= limit:
                del self._queue[queued.message.node_id]
        self._stats["broadcasts_sent"] += len(taken)
        return taken


class Protocol:
    """One member's SWIM state machine. Not thread-safe; drive it from a single task."""

    def __init__(
        self,
        node_id: str,
        address: str,
        meta: bytes,
        config: GossipConfig,
        rng: random.Random,
        now_ms: int,
        on_change: Callable[[Member], None] | None = None,
    ) -> None:
        if len(meta) > config.meta_bytes_max:
            raise MetadataTooLarge(len(meta), config.meta_bytes_max)
        self.node_id = node_id
        self.address = address
        self.config = config
        self._rng = rng
        self._on_change = on_change
        # each member's row, replaced whole when it changes (the rows handed out are never changed)
        self._members: dict[str, Member] = {
            node_id: Member(node_id, address, 0, MemberState.ALIVE, meta, now_ms)
        }
        self.awareness = 0
        self.leaving = False
        self.stats: dict[str, int] = dict.fromkeys(STAT_NAMES, 0)
        self._sequence = rng.getrandbits(32)
        self._probe: _Probe | None = None
        self._probe_order: list[str] = []
        self._probe_index = 0
        self._probe_phase_ms = rng.randrange(config.probe_interval_ms)
        self._next_probe_ms = (now_ms // config.probe_interval_ms + 1) * config.probe_interval_ms
        self._next_probe_ms += self._probe_phase_ms
        self._probe_first: list[str] = []
        self._probed: set[str] = set()
        self._next_gossip_ms = now_ms
        self._next_push_pull_ms = now_ms + rng.randrange(config.push_pull_interval_ms)
        self._next_reconnect_ms = now_ms + rng.randrange(config.reconnect_interval_ms)
        self._next_housekeeping_ms = now_ms + HOUSEKEEPING_PROBES * config.probe_interval_ms
        self._relays: dict[int, _Relay] = {}
        self._suspicions: dict[str, _Suspicion] = {}
        self._unknown_pulls: dict[str, int] = {}
        self._corrections: list[Alive] = []
        self._overhead = wire.datagram_overhead(node_id, address)
        self._broadcasts = Broadcasts(self.stats)
        self._broadcasts.put(Alive(node_id, address, 0, meta))

    # ------------------------------------------------------------------------------------------- queries

    @property
    def me(self) -> Member:
        """This node's own row: its incarnation, its metadata, whether it is leaving."""
        return self._members[self.node_id]

    def members(self) -> list[Member]:
        return list(self._members.values())

    def member(self, node_id: str) -> Member | None:
        return self._members.get(node_id)

    def live_count(self) -> int:
        """Members (including us) that are ALIVE or SUSPECT: the n of the log(n) formulas."""
        return sum(1 for e in self._members.values() if e.state in (MemberState.ALIVE, MemberState.SUSPECT))

    def pending_broadcasts(self) -> int:
        return len(self._broadcasts)

    @property
    def leave_done(self) -> bool:
        """After :meth:`leave`: our LEFT broadcast was sent its full retransmit count (or no one is left)."""
        others = any(
            e.state in (MemberState.ALIVE, MemberState.SUSPECT)
            for e in self._members.values()
            if e.node_id != self.node_id
        )
        return self.leaving and (self.node_id not in self._broadcasts or not others)

    def next_deadline_ms(self) -> int:
        deadline = min(self._next_push_pull_ms, self._next_reconnect_ms)
        if self.leaving:  # otherwise housekeeping rides on the probe tick, which fires every interval
            deadline = min(deadline, self._next_housekeeping_ms)
        probe = self._probe
        if probe is not None and not probe.done:
            deadline = min(deadline, probe.deadline_ms if probe.indirect_sent else probe.indirect_ms)
        elif not self.leaving:
            deadline = min(deadline, self._next_probe_ms)
        if self._broadcasts:
            deadline = min(deadline, self._next_gossip_ms)
        for relay in self._relays.values():
            deadline = min(deadline, relay.expire_ms)
        for suspicion in self._suspicions.values():
            deadline = min(deadline, suspicion.deadline_ms)
        return deadline

    # -------------------------------------------------------------------------------------------- inputs

    def handle(
        self, sender_id: str, sender_address: str, messages: Iterable[Message], now_ms: int
    ) -> list[Action]:
        """Process one authenticated datagram from ``sender_id`` (its gossip endpoint ``sender_address``)."""
        out: list[Action] = []
        if sender_id == self.node_id:
            return out
        self._corrections = []
        for message in messages:
            if isinstance(message, Ping):
                self._on_ping(sender_address, message, out)
            elif isinstance(message, Ack):
                self._on_ack(message, out)
            elif isinstance(message, Nack):
                self._on_nack(message)
            elif isinstance(message, PingRequest):
                self._on_ping_request(sender_address, message, now_ms, out)
            elif isinstance(message, Alive):
                self._on_alive(message, now_ms)
            elif isinstance(message, Suspect):
                self._on_suspect(message, now_ms)
            else:
                self._on_dead(message, now_ms)
        if self._corrections:
            self._send_corrections(sender_address, out)
        self._pull_if_unknown(sender_id, sender_address, now_ms, out)
        return out

    def _accused(self, claim: Suspect | Dead) -> Member | None:
        """The member a suspect or dead claim is about; None when we do not know it, or when the claim is
        older than what we know. The sender of an older claim about a member we know ALIVE is answered
        with our newer alive record (unless that member is us, leaving).

        Not in memberlist. Without it, a member that missed a refutation (every copy of the alive broadcast
        lost) keeps its suspicion until it expires; the suspect, or anyone who saw the refutation, now
        tells it directly the next time it repeats the stale claim (see also ``_probe_next``).
        """
        entry = self._members.get(claim.node_id)
        if entry is None or claim.incarnation >= entry.incarnation:
            return entry
        leaving_self = entry.node_id == self.node_id and self.leaving
        if entry.state is MemberState.ALIVE and not leaving_self and len(self._corrections) < 4:
            self._corrections.append(Alive(entry.node_id, entry.address, entry.incarnation, entry.meta))
        return None

    def _send_corrections(self, address: str, out: list[Action]) -> None:
        budget = self.config.udp_bytes_max - self._overhead
        chosen: list[Message] = []
        for alive in dict.fromkeys(self._corrections):
            size = wire.message_size(alive)
            if size <= budget:
                chosen.append(alive)
                budget -= size
        self._corrections = []
        self.stats["corrections"] += len(chosen)
        self._send(address, chosen, out)

    def local_state(self, join: bool = False) -> PushPullBody:
        records = tuple(
            MemberRecord(e.node_id, e.address, e.incarnation, e.state, e.meta) for e in self._members.values()
        )
        return PushPullBody(join, records)

    def merge_remote_state(self, sender_id: str, body: PushPullBody, now_ms: int) -> None:
        """memberlist ``mergeState``; a remote DEAD becomes SUSPECT so the accused can still refute."""
        self.stats["push_pulls"] += 1
        for record in body.members:
            if record.state is MemberState.ALIVE:
                self._on_alive(Alive(record.node_id, record.address, record.incarnation, record.meta), now_ms)
            elif record.state is MemberState.LEFT:
                self._on_dead(Dead(record.node_id, record.incarnation, record.node_id), now_ms)
            else:
                self._on_suspect(Suspect(record.node_id, record.incarnation, sender_id), now_ms)

    def push_pull_failed(self, address: str) -> None:
        self.stats["push_pull_failures"] += 1

    def set_meta(self, meta: bytes, now_ms: int) -> None:
        if len(meta) > self.config.meta_bytes_max:
            raise MetadataTooLarge(len(meta), self.config.meta_bytes_max)
        if self.leaving:  # an alive broadcast now would undo our leave
            self._replace(self.me, meta=meta)
            return
        me = self._replace(self.me, incarnation=self.me.incarnation + 1, meta=meta)
        self._broadcasts.put(Alive(self.node_id, self.address, me.incarnation, meta))
        self._next_gossip_ms = now_ms
        self._notify(me)

    def leave(self, now_ms: int) -> None:
        if self.leaving:
            return
        self.leaving = True
        me = self._set_state(self.me, MemberState.LEFT, now_ms)
        self._broadcasts.put(Dead(self.node_id, me.incarnation, self.node_id))
        self._next_gossip_ms = now_ms
        self._notify(me)

    def tick(self, now_ms: int) -> list[Action]:
        out: list[Action] = []
        self._tick_probe(now_ms, out)
        if self._relays:
            for sequence, relay in list(self._relays.items()):
                if now_ms >= relay.expire_ms:
                    del self._relays[sequence]
                    if relay.want_nack:
                        self._send(relay.requester_address, [Nack(relay.requester_sequence)], out)
        for node_id, suspicion in list(self._suspicions.items()):
            if now_ms >= suspicion.deadline_ms:
                del self._suspicions[node_id]
                entry = self._members.get(node_id)
                if entry is not None and entry.state is MemberState.SUSPECT:
                    self._on_dead(Dead(node_id, entry.incarnation, self.node_id), now_ms)
        if now_ms >= self._next_gossip_ms:
            self._next_gossip_ms = now_ms + self.config.gossip_interval_ms
            if self._broadcasts:
                self._gossip(now_ms, out)
        if now_ms >= self._next_push_pull_ms:
            interval = push_pull_scale(self.config.push_pull_interval_ms, self.live_count())
            self._next_push_pull_ms = now_ms + interval
            alive = [
                e
                for e in self._members.values()
                if e.node_id != self.node_id and e.state is MemberState.ALIVE
            ]
            if alive and not self.leaving:
                out.append(PushPull(self._rng.choice(alive).address, False))
        if now_ms >= self._next_reconnect_ms:
            self._next_reconnect_ms = now_ms + self.config.reconnect_interval_ms
            dead = [e for e in self._members.values() if e.state is MemberState.DEAD]
            if dead and not self.leaving:
                out.append(PushPull(self._rng.choice(dead).address, False))
        if now_ms >= self._next_housekeeping_ms:
            self._next_housekeeping_ms = now_ms + HOUSEKEEPING_PROBES * self.config.probe_interval_ms
            self._housekeeping(now_ms)
        return out

    # ----------------------------------------------------------------------------------------- probing

    def _next_sequence(self) -> int:
        self._sequence = (self._sequence + 1) & 0xFFFFFFFF
        return self._sequence

    def _next_target(self, now_ms: int) -> Member | None:
        while self._probe_first:  # members we just started suspecting on someone else's word
            entry = self._members.get(self._probe_first.pop(0))
            if entry is not None and entry.state in (MemberState.ALIVE, MemberState.SUSPECT):
                return entry
        if self.config.aligned_probes:
            return self._aligned_target(now_ms)
        for _ in range(len(self._probe_order) + 2):
            if self._probe_index >= len(self._probe_order):
                self._probe_order = [
                    e.node_id
                    for e in self._members.values()
                    if e.node_id != self.node_id and e.state in (MemberState.ALIVE, MemberState.SUSPECT)
                ]
                self._rng.shuffle(self._probe_order)
                self._probe_index = 0
                if not self._probe_order:
                    return None
            entry = self._members.get(self._probe_order[self._probe_index])
            self._probe_index += 1
            if entry is not None and entry.state in (MemberState.ALIVE, MemberState.SUSPECT):
                return entry
        return None

    def _aligned_target(self, now_ms: int) -> Member | None:
        """Round-robin on a cluster-wide schedule (not in memberlist).

        All live members sorted by node id form a ring of n; in probe slot s (now_ms // probe_interval)
        the member at position p probes position p + 1 + (s mod (n - 1)). For one slot that map has no
        fixed point and is a bijection, so with consistent views every member is probed exactly once per
        slot, by a different prober each slot; with memberlist's independent shuffles the gap between
        two probes of a member is exponential (mean one interval, p99 ~4.6 intervals), which is most of
        the tail of crash detection. Each member still covers everyone once per n - 1 probes
        (``_probed``), also when awareness makes it skip slots. Members' clocks only need to agree to
        well within a probe interval (NTP); if they do not, the schedule degrades to random order.
        """
        ring = sorted(
            e.node_id for e in self._members.values() if e.state in (MemberState.ALIVE, MemberState.SUSPECT)
        )
        if self.me.state is not MemberState.ALIVE or len(ring) < 2:
            return None
        count = len(ring)
        position = ring.index(self.node_id)
        slot = now_ms // self.config.probe_interval_ms
        offset = 1 + slot % (count - 1)
        if len(self._probed) >= count - 1:
            self._probed.clear()
        for step in range(count - 1):
            node_id = ring[(position + 1 + (offset - 1 + step) % (count - 1)) % count]
            if node_id not in self._probed:
                self._probed.add(node_id)
                return self._members[node_id]
        self._probed.clear()
        node_id = ring[(position + offset) % count]
        self._probed.add(node_id)
        return self._members[node_id]

    def _tick_probe(self, now_ms: int, out: list[Action]) -> None:
        probe = self._probe
        if probe is not None and not probe.done:
            target = self._members.get(probe.target_id)
            if target is None or target.state not in (MemberState.ALIVE, MemberState.SUSPECT):
                self._probe = None  # the target died or left meanwhile: nothing to conclude
            elif now_ms >= probe.deadline_ms:
                self._probe_failed(probe, target, now_ms)
            elif now_ms >= probe.indirect_ms and not probe.indirect_sent:
                self._send_indirect(probe, target, out)
        if self._probe is not None and not self._probe.done:
            return
        if self.leaving or now_ms < self._next_probe_ms:
            return
        scale = self.awareness + 1
        interval = self.config.probe_interval_ms
        if self.config.aligned_probes:  # keep a fixed phase inside the slot, so no drift across slots
            self._next_probe_ms = (now_ms // interval + scale) * interval + self._probe_phase_ms
        else:
            self._next_probe_ms = now_ms + interval * scale
        target = self._next_target(now_ms)
        if target is None:
            self._probe = None
            return
        sequence = self._next_sequence()
        self._probe = _Probe(
            sequence,
            target.node_id,
            now_ms + self.config.probe_timeout_ms * scale,
            now_ms + self.config.probe_interval_ms * scale,
        )
        self.stats["probes"] += 1
        messages: list[Message] = [Ping(sequence, target.node_id)]
        if target.state is MemberState.SUSPECT:  # let the accused refute at once
            messages.append(Suspect(target.node_id, target.incarnation, self.node_id))
        self._send(target.address, messages, out)

    def _send_indirect(self, probe: _Probe, target: Member, out: list[Action]) -> None:
        probe.indirect_sent = True
        peers = [
            e
            for e in self._members.values()
            if e.node_id not in (self.node_id, target.node_id) and e.state is MemberState.ALIVE
        ]
        chosen = self._rng.sample(peers, min(len(peers), self.config.indirect_checks))
        probe.expected_nacks = len(chosen)
        for peer in chosen:
            self.stats["indirect_probes"] += 1
            self._send(peer.address, [PingRequest(probe.sequence, target.node_id, target.address, True)], out)

    def _probe_failed(self, probe: _Probe, target: Member, now_ms: int) -> None:
        self._probe = None
        self.stats["probe_failures"] += 1
        delta = max(0, probe.expected_nacks - probe.nacks) if probe.expected_nacks > 0 else 1
        self._apply_awareness(delta)
        self._on_suspect(Suspect(target.node_id, target.incarnation, self.node_id), now_ms)

    def _apply_awareness(self, delta: int) -> None:
        self.awareness = max(0, min(self.awareness + delta, self.config.awareness_max_multiplier - 1))

    def _on_ping(self, sender_address: str, ping: Ping, out: list[Action]) -> None:
        if ping.target_id != self.node_id:
            self.stats["misdirected_pings"] += 1
            return
        self._send(sender_address, [Ack(ping.sequence)], out)

    def _on_ack(self, ack: Ack, out: list[Action]) -> None:
        relay = self._relays.pop(ack.sequence, None)
        if relay is not None:
            self._send(relay.requester_address, [Ack(relay.requester_sequence)], out)
            return
        probe = self._probe
        if probe is not None and probe.sequence == ack.sequence and not probe.done:
            probe.done = True
            self.stats["acks"] += 1
            self._apply_awareness(-1)

    def _on_nack(self, nack: Nack) -> None:
        probe = self._probe
        if probe is not None and probe.sequence == nack.sequence and not probe.done:
            probe.nacks += 1
            self.stats["nacks"] += 1

    def _on_ping_request(
        self, sender_address: str, request: PingRequest, now_ms: int, out: list[Action]
    ) -> None:
        if len(self._relays) >= RELAYS_MAX:
            return  # bounded: a flood of ping-reqs cannot grow the table
        sequence = self._next_sequence()
        # Lifeguard: nack after 80% of the probe timeout, so the nack reaches the requester before its
        # probe deadline (ping-req sent at probe_timeout, deadline at probe_interval = 2 * probe_timeout)
        expire_ms = now_ms + self.config.probe_timeout_ms * 4 // 5
        self._relays[sequence] = _Relay(sender_address, request.sequence, request.want_nack, expire_ms)
        self.stats["relayed_pings"] += 1
        self._send(request.target_address, [Ping(sequence, request.target_id)], out)

    # ------------------------------------------------------------------------------------ state changes

    def _notify(self, entry: Member) -> None:
        if self._on_change is not None:
            self._on_change(entry)

    def _replace(self, entry: Member, **changes: object) -> Member:
        """The member's row with ``changes``, in place of ``entry`` in the table."""
        changed = replace(entry, **changes)  # type: ignore[arg-type]
        self._members[entry.node_id] = changed
        return changed

    def _set_state(self, entry: Member, state: MemberState, now_ms: int, **changes: object) -> Member:
        """``entry`` with ``changes`` and in ``state`` (since ``now_ms`` if that is new)."""
        if entry.state is not state:
            changes.update(state=state, state_changed_ms=now_ms)
        return self._replace(entry, **changes) if changes else entry

    def _refute(self, accused_incarnation: int) -> None:
        if self.leaving:
            return
        me = self._replace(self.me, incarnation=max(self.me.incarnation, accused_incarnation) + 1)
        self.stats["refutations"] += 1
        self._apply_awareness(1)
        self._broadcasts.put(Alive(self.node_id, self.address, me.incarnation, me.meta))

    def _on_alive(self, alive: Alive, now_ms: int) -> None:
        if alive.node_id == self.node_id:
            me = self.me
            stale = alive.incarnation > me.incarnation or (
                alive.incarnation == me.incarnation and (alive.meta != me.meta or alive.address != me.address)
            )
            if stale:  # e.g. what a previous run of this node said: outbid it
                self._refute(alive.incarnation)
            return
        entry = self._members.get(alive.node_id)
        if entry is None:
            entry = Member(
                alive.node_id, alive.address, alive.incarnation, MemberState.ALIVE, alive.meta, now_ms
            )
            self._members[alive.node_id] = entry
            position = self._rng.randint(0, len(self._probe_order))
            self._probe_order.insert(position, alive.node_id)
            if position < self._probe_index:
                self._probe_index += 1
            self.stats["joins"] += 1
            self._broadcasts.put(alive)
            self._notify(entry)
            return
        if alive.incarnation <= entry.incarnation:
            return
        self._suspicions.pop(alive.node_id, None)
        was_live = entry.state in (MemberState.ALIVE, MemberState.SUSPECT)
        changes = {"incarnation": alive.incarnation, "address": alive.address, "meta": alive.meta}
        entry = self._set_state(entry, MemberState.ALIVE, now_ms, **changes)
        if not was_live:
            position = self._rng.randint(0, len(self._probe_order))
            self._probe_order.insert(position, alive.node_id)
            if position < self._probe_index:
                self._probe_index += 1
        self._broadcasts.put(alive)
        self._notify(entry)

    def _on_suspect(self, suspect: Suspect, now_ms: int) -> None:
        entry = self._accused(suspect)
        if entry is None:
            return
        if entry.node_id == self.node_id:
            self._refute(suspect.incarnation)
            return
        if entry.state is MemberState.SUSPECT:
            suspicion = self._suspicions.get(suspect.node_id)
            if suspicion is not None and suspicion.confirm(suspect.from_id):
                self.stats["confirmations"] += 1
                self._broadcasts.put(suspect)
            return
        if entry.state is not MemberState.ALIVE:
            return
        entry = self._set_state(entry, MemberState.SUSPECT, now_ms, incarnation=suspect.incarnation)
        self.stats["suspicions"] += 1
        self._broadcasts.put(suspect)
        live = self.live_count()
        k = self.config.suspicion_mult - 2
        if live - 2 < k:
            k = 0
        min_ms = suspicion_timeout_ms(self.config, live)
        max_ms = self.config.suspicion_max_timeout_mult * min_ms
        if suspect.from_id != self.node_id:
            self._probe_next(suspect.node_id)
        self._suspicions[suspect.node_id] = _Suspicion(
            suspect.incarnation, suspect.from_id, k, min_ms, max_ms, now_ms
        )
        self._notify(entry)

    def _on_dead(self, dead: Dead, now_ms: int) -> None:
        entry = self._accused(dead)
        if entry is None:
            return
        if entry.state in (MemberState.DEAD, MemberState.LEFT):
            return
        if entry.node_id == self.node_id:
            self._refute(dead.incarnation)
            return
        self._suspicions.pop(dead.node_id, None)
        left = dead.from_id == dead.node_id
        state = MemberState.LEFT if left else MemberState.DEAD
        entry = self._set_state(entry, state, now_ms, incarnation=dead.incarnation)
        self.stats["leaves" if left else "deaths"] += 1
        if self._probe is not None and self._probe.target_id == dead.node_id:
            self._probe = None
        self._broadcasts.put(dead)
        self._notify(entry)

    def _probe_next(self, node_id: str) -> None:
        """Not in memberlist: a member we just started suspecting on someone else's word is our next probe
        target. Our ping carries the suspicion, so the suspect refutes to us directly (or, if it already
        refuted, corrects us), and if it really is down our failed probe is an independent confirmation."""
        if node_id not in self._probe_first and len(self._probe_first) < RELAYS_MAX:
            self._probe_first.append(node_id)

    def _pull_if_unknown(self, sender_id: str, sender_address: str, now_ms: int, out: list[Action]) -> None:
        """The join fix: push-pull with a sender we do not know or believe dead (rate-limited per address)."""
        entry = self._members.get(sender_id)
        if entry is not None and entry.state is not MemberState.DEAD:
            return
        if self.leaving or not self.config.push_pull_unknown_senders:
            return
        last_ms = self._unknown_pulls.get(sender_address)
        if last_ms is not None and now_ms - last_ms < 5 * self.config.probe_interval_ms:
            return
        if len(self._unknown_pulls) >= UNKNOWN_PULLS_MAX:
            return
        self._unknown_pulls[sender_address] = now_ms
        self.stats["unknown_sender_push_pulls"] += 1
        out.append(PushPull(sender_address, False))

    def _housekeeping(self, now_ms: int) -> None:
        window_ms = 5 * self.config.probe_interval_ms
        for address in [a for a, t in self._unknown_pulls.items() if now_ms - t >= window_ms]:
            del self._unknown_pulls[address]
        reap = [
            e
            for e in self._members.values()
            if e.node_id != self.node_id
            and e.state in (MemberState.DEAD, MemberState.LEFT)
            and now_ms - e.state_changed_ms >= self.config.dead_member_reap_ms
        ]
        for entry in reap:
            del self._members[entry.node_id]
            self._broadcasts.drop(entry.node_id)
            self.stats["reaped"] += 1
            self._notify(entry)

    # ---------------------------------------------------------------------------------- dissemination

    def _send(self, address: str, messages: list[Message], out: list[Action]) -> None:
        budget = self.config.udp_bytes_max - self._overhead - sum(wire.message_size(m) for m in messages)
        if budget < 0:
            limit = self.config.udp_bytes_max
            check(False, f"messages for {address} exceed udp_bytes_max={limit}: {messages}")
        messages.extend(self._broadcasts.take(budget, retransmit_limit(self.config, self.live_count())))
        out.append(Send(address, tuple(messages)))

    def _gossip(self, now_ms: int, out: list[Action]) -> None:
        candidates = [
            e
            for e in self._members.values()
            if e.node_id != self.node_id
            and (
                e.state in (MemberState.ALIVE, MemberState.SUSPECT)
                or (
                    e.state is MemberState.DEAD
                    and now_ms - e.state_changed_ms < self.config.gossip_to_the_dead_ms
                )
            )
        ]
        for entry in self._rng.sample(candidates, min(len(candidates), self.config.gossip_nodes)):
            budget = self.config.udp_bytes_max - self._overhead
            broadcasts = self._broadcasts.take(budget, retransmit_limit(self.config, self.live_count()))
            if not broadcasts:
                break
            out.append(Send(entry.address, tuple(broadcasts)))
