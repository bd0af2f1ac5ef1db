"""The I/O edge: one :class:`Gossip` per node process drives a :class:`~membership.protocol.Protocol` with
asyncio UDP datagrams and TCP push-pull connections on the same port.

Everything protocol-related is decided in the pure core; this module only authenticates and decodes
packets (``wire``), runs the actions the core returns, keeps one timer armed at the core's next deadline,
and delivers change notifications to subscribers after each step (never re-entrantly). Loops are bounded
by ``asyncio.timeout`` and a ``closed`` flag, never ``wait_for`` (python/cpython#86296 on 3.11).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import logging
import os
import random
import time
from collections.abc import Callable, Iterable

from membership import wire
from membership.errors import (
    InvalidAddress,
    MembershipError,
    MetadataTooLarge,
    NotStarted,
    Oversized,
    Replayed,
    Unauthenticated,
    WireError,
)
from membership.model import GossipConfig, Member, MemberState
from membership.protocol import Action, Protocol, PushPull, Send
from raftlog import admission
from raftlog.addresses import normalize_host

log = logging.getLogger("membership")
TIMER_GRID_MS = 50  # at most; probe_timeout_ms / 10 when that is smaller
SEEN_HOSTS_MAX = 4096  # source hosts of authenticated packets remembered as known members' hosts

IO_STAT_NAMES = (
    "packets_in",
    "packets_out",
    "bytes_in",
    "bytes_out",
    "auth_failures",
    "malformed",
    "oversized",
    "replays",
    "send_errors",
    "fault_drops",
    "push_pulls_served",
    "push_pulls_refused",
    "push_pulls_refused_address",
    "push_pulls_evicted",
    "push_pull_first_frame_timeouts",
    "subscriber_errors",
)


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (IPv6 as ``"[::1]:port"``) -> (host, port); raises :class:`InvalidAddress`."""
    if not isinstance(address, str) or ":" not in address:
        raise InvalidAddress(address)
    host, _, port_text = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidAddress(address)
    return host, int(port_text)


def format_address(host: str, port: int) -> str:
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]:{port}"
    return f"{host}:{port}"


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, owner: Gossip) -> None:
        self._owner = owner

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        self._owner._on_datagram(data, addr)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable from a stopped peer, and the like: expected, counted.
        self._owner._io_stats["send_errors"] += 1


class Gossip:
    """SWIM membership for one node. Create, ``await start()``, ``await join(seeds)``; see README."""

    def __init__(
        self,
        node_id: str,
        bind_address: str,
        secret: bytes,
        meta: bytes = b"",
        config: GossipConfig | None = None,
        seed: int | None = None,
        advertise_address: str | None = None,
    ) -> None:
        if not isinstance(node_id, str) or not node_id or len(node_id) > wire.ID_CHARS_MAX:
            raise ValueError(f"node_id must be a non-empty string of at most {wire.ID_CHARS_MAX} characters")
        if not isinstance(secret, bytes) or not secret:
            raise ValueError("secret must be non-empty bytes (the cluster secret)")
        self.config = config or GossipConfig()
        self.node_id = node_id
        self._bind = parse_address(bind_address)
        self._advertise = advertise_address
        if advertise_address is not None:
            parse_address(advertise_address)
        self.address = bind_address
        self._secret = secret
        self._meta = meta
        self._seed = seed
        self._rng = random.Random(seed)
        self._protocol: Protocol | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._server: asyncio.Server | None = None
        self._subscribers: list[Callable[[Member], None]] = []
        self._pending_changes: list[Member] = []
        self._io_stats: dict[str, int] = dict.fromkeys(IO_STAT_NAMES, 0)
        self._replay = wire.ReplayGuard()
        self._packet_number = time.time_ns() // 1000
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms = 0
        self._tasks: set[asyncio.Task[object]] = set()
        self._resolved: dict[str, tuple[str, int]] = {}
        self._fault_loss = 0.0
        self._fault_blocked: frozenset[str] = frozenset()
        self._closed = False
        # inbound push-pull connections still waiting for their first frame: writer -> (host, since)
        self._pending: dict[asyncio.StreamWriter, tuple[str, float]] = {}
        self._seed_hosts: set[str] = set()
        self._seen_hosts: set[str] = set()  # sources of authenticated datagrams and push-pull requests
        self._clock_offset_s = 0.0
        self._timer_grid_ms = max(1, min(TIMER_GRID_MS, self.config.probe_timeout_ms // 10))
        if len(meta) > self.config.meta_bytes_max:
            raise MetadataTooLarge(len(meta), self.config.meta_bytes_max)

    # ------------------------------------------------------------------------------------------- public

    @property
    def incarnation(self) -> int:
        return self._protocol.me.incarnation if self._protocol is not None else 0

    @property
    def started(self) -> bool:
        return self._protocol is not None and not self._closed

    async def start(self) -> None:
        if self._protocol is not None or self._closed:
            raise MembershipError(f"gossip {self.node_id}: start() may be called only once")
        loop = asyncio.get_running_loop()
        self._clock_offset_s = time.time() - loop.time()
        host, port = self._bind
        attempts = 20 if port == 0 else 1
        for attempt in range(attempts):
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _Datagrams(self), local_addr=(host, port)
            )
            actual_port = int(transport.get_extra_info("sockname")[1])
            try:
                self._server = await asyncio.start_server(self._serve_push_pull, host, actual_port)
            except OSError:
                transport.close()
                if attempt + 1 == attempts:
                    raise
                continue
            self._transport = transport
            break
        self.address = self._advertise or format_address(host, actual_port)
        self._protocol = Protocol(
            self.node_id,
            self.address,
            self._meta,
            self.config,
            self._rng,
            self._now_ms(),
            on_change=self._pending_changes.append,
        )
        self._after_step([])
        log.info("gossip %s listening on %s", self.node_id, self.address)

    async def join(self, seeds: list[str], timeout_s: float = 5.0) -> int:
        """Push-pull with every seed concurrently; returns how many answered. Unreachable seeds are logged."""
        protocol = self._require_started()
        if isinstance(seeds, str):
            raise InvalidAddress(seeds)
        for seed in seeds:
            parse_address(seed)
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        targets = [s for s in dict.fromkeys(seeds) if s != self.address]
        self._seed_hosts.update(normalize_host(parse_address(s)[0]) for s in targets)
        if not targets:
            return 0
        del protocol
        results = await asyncio.gather(*(self._push_pull(seed, True, timeout_s) for seed in targets))
        answered = sum(1 for ok in results if ok)
        if answered < len(targets):
            log.warning("gossip %s: %d of %d seeds answered", self.node_id, answered, len(targets))
        return answered

    async def leave(self, timeout_s: float = 2.0) -> None:
        """Broadcast LEFT and wait (at most ``timeout_s``) until it was sent its full retransmit count.
        A no-op before ``start()`` or after ``stop()``: there is nothing to leave."""
        protocol = self._protocol
        if protocol is None or self._closed:
            return
        protocol.leave(self._now_ms())
        self._after_step(protocol.tick(self._now_ms()))
        try:
            async with asyncio.timeout(timeout_s):
                while not protocol.leave_done and not self._closed:
                    await asyncio.sleep(0.02)
        except TimeoutError:
            log.warning("gossip %s: leave broadcast not fully sent within %.1fs", self.node_id, timeout_s)

    async def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._transport is not None:
            self._transport.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(OSError):
                await self._server.wait_closed()

    def set_meta(self, meta: bytes) -> None:
        if self._protocol is None:
            if len(meta) > self.config.meta_bytes_max:
                raise MetadataTooLarge(len(meta), self.config.meta_bytes_max)
            self._meta = meta
            return
        self._protocol.set_meta(meta, self._now_ms())
        self._after_step([])

    def members(self) -> list[Member]:
        if self._protocol is None:
            return [Member(self.node_id, self.address, 0, MemberState.ALIVE, self._meta, 0)]
        return self._protocol.members()

    def member(self, node_id: str) -> Member | None:
        if self._protocol is None:
            return self.members()[0] if node_id == self.node_id else None
        return self._protocol.member(node_id)

    def subscribe(self, callback: Callable[[Member], None]) -> None:
        """``callback(member)`` runs on the event loop after every change: join, meta update, state change,
        and removal (reaping) — for a removal it gets the last record and ``member(node_id)`` is None."""
        self._subscribers.append(callback)

    def stats(self) -> dict[str, int]:
        out = dict(self._io_stats)
        protocol = self._protocol
        if protocol is None:
            return out
        out.update(protocol.stats)
        counts = dict.fromkeys(MemberState, 0)
        for member in protocol.members():
            counts[member.state] += 1
        for state, count in counts.items():
            out[f"members_{state.value}"] = count
        out["awareness"] = protocol.awareness
        out["incarnation"] = protocol.me.incarnation
        out["pending_broadcasts"] = protocol.pending_broadcasts()
        return out

    def set_fault(self, loss: float = 0.0, blocked: Iterable[str] = ()) -> None:
        """Test hook: drop this fraction of outgoing datagrams, and all traffic (UDP both ways, outgoing
        push-pull) with the ``blocked`` addresses."""
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f"loss must be in [0, 1], got {loss}")
        self._fault_loss = loss
        self._fault_blocked = frozenset(blocked)

    # ------------------------------------------------------------------------------------------ engine

    def _require_started(self) -> Protocol:
        if self._protocol is None or self._closed:
            raise NotStarted(f"gossip {self.node_id} is not running")
        return self._protocol

    def _now_ms(self) -> int:
        """The event loop's monotonic clock, shifted to read like the wall clock at start: monotonic for
        every timer, and roughly the same on every member (NTP), which the aligned probe schedule uses."""
        return int((asyncio.get_running_loop().time() + self._clock_offset_s) * 1000)

    def _next_packet_number(self) -> int:
        self._packet_number += 1
        return self._packet_number

    def _after_step(self, actions: list[Action]) -> None:
        """Run the core's actions, deliver buffered notifications, re-arm the timer."""
        for action in actions:
            if isinstance(action, Send):
                self._send(action)
            elif isinstance(action, PushPull):
                self._spawn(
                    self._push_pull(action.address, action.join, self.config.push_pull_timeout_ms / 1000)
                )
        if self._pending_changes:
            changes = list(self._pending_changes)
            self._pending_changes.clear()
            for member in changes:
                for callback in list(self._subscribers):
                    try:
                        callback(member)
                    except Exception:
                        self._io_stats["subscriber_errors"] += 1
                        log.exception("gossip %s: subscriber %r failed on %s", self.node_id, callback, member)
        self._arm_timer()

    def _arm_timer(self) -> None:
        if self._closed or self._protocol is None:
            return
        deadline_ms = self._protocol.next_deadline_ms()
        if self._timer is not None:
            # re-arm when the deadline moved earlier, or much later (an ack made the probe's indirect
            # deadline moot): cheaper than a spurious wake-up of the event loop
            if self._timer_at_ms <= deadline_ms <= self._timer_at_ms + 20:
                return
            self._timer.cancel()
        self._timer_at_ms = deadline_ms
        # rounded up to a 50 ms grid (in wall-anchored ms, so the same grid on every member) so timers
        # share event-loop iterations; relays nack 100 ms before the prober needs it, which covers it
        grid_ms = self._timer_grid_ms
        when_ms = -(-deadline_ms // grid_ms) * grid_ms
        self._timer = asyncio.get_running_loop().call_at(
            when_ms / 1000 - self._clock_offset_s, self._on_timer
        )

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed or self._protocol is None:
            return
        now_ms = max(self._now_ms(), self._timer_at_ms)
        self._after_step(self._protocol.tick(now_ms))

    def _spawn(self, coroutine: object) -> None:
        task: asyncio.Task[object] = asyncio.get_running_loop().create_task(coroutine)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _resolve(self, address: str) -> tuple[str, int]:
        resolved = self._resolved.get(address)
        if resolved is None:
            if len(self._resolved) >= 4096:
                self._resolved.clear()
            resolved = self._resolved[address] = parse_address(address)
        return resolved

    def _send(self, action: Send) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        if action.address in self._fault_blocked or (
            self._fault_loss and self._rng.random() < self._fault_loss
        ):
            self._io_stats["fault_drops"] += 1
            return
        data = wire.encode_datagram(
            self._secret,
            self.node_id,
            self.address,
            self._next_packet_number(),
            action.messages,
            salt=os.urandom(wire.SALT_BYTES),
        )
        try:
            destination = self._resolve(action.address)
        except InvalidAddress:
            self._io_stats["send_errors"] += 1
            log.warning("gossip %s: cannot send to invalid address %r", self.node_id, action.address)
            return
        transport.sendto(data, destination)
        self._io_stats["packets_out"] += 1
        self._io_stats["bytes_out"] += len(data)

    def _on_datagram(self, data: bytes, addr: tuple[str | object, int]) -> None:
        protocol = self._protocol
        if self._closed or protocol is None:
            return
        self._io_stats["packets_in"] += 1
        self._io_stats["bytes_in"] += len(data)
        if self._fault_blocked and format_address(str(addr[0]), int(addr[1])) in self._fault_blocked:
            self._io_stats["fault_drops"] += 1
            return
        now_ms = self._now_ms()
        try:
            datagram = wire.decode_datagram(
                self._secret, data, self.config.udp_bytes_max, self.config.meta_bytes_max
            )
            self._replay.check(datagram.sender_id, wire.KIND_DATAGRAM, datagram.packet_number, now_ms)
        except WireError as error:
            self._count_rejection(error, f"datagram from {addr!r}")
            return
        self._remember_host(str(addr[0]))
        self._after_step(
            protocol.handle(datagram.sender_id, datagram.sender_address, datagram.messages, now_ms)
        )

    def _count_rejection(self, error: WireError, what: str) -> None:
        if isinstance(error, Unauthenticated):
            self._io_stats["auth_failures"] += 1
        elif isinstance(error, Oversized):
            self._io_stats["oversized"] += 1
        elif isinstance(error, Replayed):
            self._io_stats["replays"] += 1
        else:
            self._io_stats["malformed"] += 1
        log.debug("gossip %s: rejected %s: %s", self.node_id, what, error)

    # --------------------------------------------------------------------------------------- push-pull

    async def _read_frame(self, reader: asyncio.StreamReader) -> bytes:
        prefix = await reader.readexactly(wire.FRAME_PREFIX.size)
        (length,) = wire.FRAME_PREFIX.unpack(prefix)
        if length > self.config.push_pull_bytes_max:
            raise Oversized(f"push-pull frame of {length} bytes exceeds {self.config.push_pull_bytes_max}")
        return await reader.readexactly(length)

    async def _push_pull(self, address: str, join: bool, timeout_s: float) -> bool:
        protocol = self._protocol
        if protocol is None or self._closed:
            return False
        if address in self._fault_blocked:
            self._io_stats["fault_drops"] += 1
            protocol.push_pull_failed(address)
            return False
        writer: asyncio.StreamWriter | None = None
        try:
            host, port = self._resolve(address)
            async with asyncio.timeout(timeout_s):
                reader, writer = await asyncio.open_connection(host, port)
                number = self._next_packet_number()
                writer.write(
                    wire.encode_push_pull(
                        self._secret,
                        wire.KIND_PUSH_PULL_REQUEST,
                        self.node_id,
                        self.address,
                        number,
                        protocol.local_state(join),
                        salt=os.urandom(wire.SALT_BYTES),
                    )
                )
                await writer.drain()
                frame = await self._read_frame(reader)
            response = wire.decode_push_pull(
                self._secret, frame, self.config.meta_bytes_max, wire.KIND_PUSH_PULL_RESPONSE
            )
            if response.in_reply_to != number:
                raise Replayed(f"push-pull response answers {response.in_reply_to}, not our request {number}")
            self._replay.check(
                response.sender_id, wire.KIND_PUSH_PULL_RESPONSE, response.packet_number, self._now_ms()
            )
        except WireError as error:
            self._count_rejection(error, f"push-pull response from {address}")
            protocol.push_pull_failed(address)
            return False
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as error:
            protocol.push_pull_failed(address)
            log.log(
                logging.WARNING if join else logging.DEBUG,
                "gossip %s: push-pull with %s failed: %r",
                self.node_id,
                address,
                error,
            )
            return False
        finally:
            if writer is not None:
                writer.close()
        if self._closed:
            return False
        protocol.merge_remote_state(response.sender_id, response.body, self._now_ms())
        self._after_step([])
        return True

    def _remember_host(self, host: str) -> None:
        """``host`` sent an authenticated packet: a member lives there (bounded; forgotten when full)."""
        host = normalize_host(host)
        if host not in self._seen_hosts:
            if len(self._seen_hosts) >= SEEN_HOSTS_MAX:
                self._seen_hosts.clear()
            self._seen_hosts.add(host)

    def _known_hosts(self) -> dict[str, int]:
        """How many known members live at each host: the hosts in the member table's addresses, the
        seeds', and the sources of authenticated packets (at least one member each)."""
        known: collections.Counter[str] = collections.Counter()
        if self._protocol is not None:
            for member in self._protocol.members():
                if member.node_id != self.node_id:
                    with contextlib.suppress(InvalidAddress):
                        known[normalize_host(parse_address(member.address)[0])] += 1
        for host in self._seed_hosts | self._seen_hosts:
            known[host] = max(known[host], 1)
        return known

    def _admit_push_pull(self, host: str, writer: asyncio.StreamWriter) -> bool:
        """Whether a push-pull connection from ``host`` may wait for its first frame (closing the oldest
        one waiting from a known member's host if that makes room); see :mod:`raftlog.admission`."""
        config = self.config
        known = self._known_hosts()
        by_host = collections.Counter(h for h, _ in self._pending.values())
        outsiders = sum(count for h, count in by_host.items() if h not in known)
        verdict = admission.admit(
            host,
            by_host,
            outsiders,
            known,
            config.push_pull_pending_per_address_max,
            config.push_pull_pending_max,
        )
        if verdict is admission.Admission.REFUSE_ADDRESS_FULL:
            self._io_stats["push_pulls_refused_address"] += 1
        elif verdict is admission.Admission.REFUSE_POOL_FULL:
            self._io_stats["push_pulls_refused"] += 1
        else:
            if verdict is admission.Admission.ADMIT_EVICTING_OLDEST:
                oldest = min(
                    (w for w, (h, _) in self._pending.items() if h == host), key=lambda w: self._pending[w][1]
                )
                del self._pending[oldest]
                self._io_stats["push_pulls_evicted"] += 1
                oldest.close()  # its reader sees EOF; its task ends
            self._pending[writer] = (host, time.monotonic())
            return True
        log.debug("gossip %s: push-pull from %s refused: %s", self.node_id, host, verdict.value)
        return False

    async def _serve_push_pull(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            protocol = self._protocol
            if protocol is None or self._closed:
                return
            peer = writer.get_extra_info("peername")
            host = normalize_host(str(peer[0])) if peer else ""
            if not self._admit_push_pull(host, writer):
                return
            first_frame_s = self.config.push_pull_first_frame_timeout_ms / 1000
            async with asyncio.timeout(self.config.push_pull_timeout_ms / 1000):
                try:
                    async with asyncio.timeout(first_frame_s):
                        frame = await self._read_frame(reader)
                except TimeoutError:
                    self._io_stats["push_pull_first_frame_timeouts"] += 1
                    raise
                request = wire.decode_push_pull(
                    self._secret, frame, self.config.meta_bytes_max, wire.KIND_PUSH_PULL_REQUEST
                )
                self._pending.pop(writer, None)
                self._replay.check(
                    request.sender_id, wire.KIND_PUSH_PULL_REQUEST, request.packet_number, self._now_ms()
                )
                self._remember_host(host)
                protocol.merge_remote_state(request.sender_id, request.body, self._now_ms())
                self._after_step([])
                self._io_stats["push_pulls_served"] += 1
                writer.write(
                    wire.encode_push_pull(
                        self._secret,
                        wire.KIND_PUSH_PULL_RESPONSE,
                        self.node_id,
                        self.address,
                        self._next_packet_number(),
                        protocol.local_state(),
                        in_reply_to=request.packet_number,
                        salt=os.urandom(wire.SALT_BYTES),
                    )
                )
                await writer.drain()
        except WireError as error:
            self._count_rejection(error, "push-pull request")
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as error:
            log.debug("gossip %s: push-pull request failed: %r", self.node_id, error)
        finally:
            self._pending.pop(writer, None)
            writer.close()
            if task is not None:
                self._tasks.discard(task)


__all__ = ["Gossip", "format_address", "parse_address"]
