"""A Kafka listener's connections, as ``kafka_api.server`` keeps them: the counts of what it refused and cut
(``Stats``), an open connection's state (``Connection``), a request's bytes held in the listener's budget
(``Held``), an answer to come in request order (``Answer``), why reading ended (``Close``), and the frames'
I/O: a frame read into one buffer as it comes (``read_frame``), an answer written a slice at a time
(``write_out``)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

from kafka_api.door import Door
from kafka_api.limits import Clock
from partitions.security.holds import RequestBytes

log = logging.getLogger("kafka_api.server")  # the listener's lines, under its name


@dataclass(slots=True)
class Stats:
    refused_connections: int = 0  # over ``connections_max``
    refused_per_address: int = 0  # over ``connections_per_address_max``
    refused_connection_rate: int = 0  # past its address's ``connection_creation_rate`` quota (KIP-612)
    refused_unauthenticated: int = 0  # over ``unauthenticated_connections_max``
    cut_unauthenticated: int = 0  # the oldest of the address holding most, for a newcomer from another
    cut_for_newcomer: int = 0  # at ``connections_max``, without login: the same, of all its connections
    refused_frames_before_auth: int = 0  # over ``frame_bytes_before_auth_max``
    cut_login_timeout: int = 0
    cut_frame_timeout: int = 0
    cut_idle_timeout: int = 0
    cut_credential_gone: int = 0  # its user deleted, its token revoked or expired, its password changed
    refused_per_user: int = 0  # a login past ``connections_per_user_max``
    refused_reserved: int = 0  # an ordinary user's login when the room left is ``super_user_reserve``'s
    cut_for_login: int = 0  # the least recently active idle one of the user holding most, for a login
    cut_idle_at_cap: int = 0  # a user at its cap: idle past ``idle_at_cap_timeout_s``
    cut_over_share: int = 0  # a frame arriving, for a holder below its share of request bytes waiting

    def count(self, kind: str) -> None:
        setattr(self, _STAT_OF[kind], getattr(self, _STAT_OF[kind]) + 1)


_STAT_OF = {
    "connections": "refused_connections",
    "per_address": "refused_per_address",
    "connection_rate": "refused_connection_rate",
    "unauthenticated": "refused_unauthenticated",
    "evicted": "cut_unauthenticated",
    "evicted_at_bound": "cut_for_newcomer",
    "frame_before_auth": "refused_frames_before_auth",
    "login_timeout": "cut_login_timeout",
    "frame_timeout": "cut_frame_timeout",
    "idle_timeout": "cut_idle_timeout",
    "credential_gone": "cut_credential_gone",
    "per_user": "refused_per_user",
    "reserved": "refused_reserved",
    "for_login": "cut_for_login",
    "idle_at_cap": "cut_idle_at_cap",
    "over_share": "cut_over_share",
}


class Throttled:
    """Log lines of one kind at most once per interval, saying how many were left out since the last."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._next_s: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def log(self, level: int, kind: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next_s.get(kind, 0.0):
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return
        self._next_s[kind] = now + self._interval_s
        left_out = self._left_out.pop(kind, 0)
        if left_out:
            message += f" ({left_out} more like it in the last {self._interval_s:g} s not logged)"
        log.log(level, message, *args)


@dataclass(slots=True, eq=False)
class Connection:
    """An open connection as the listener keeps it: its door, client address, times and, once the
    listener cut it, why."""

    door: Door
    address: str
    clock: Clock
    writer: asyncio.StreamWriter
    receiver: asyncio.Task[Any] | None = None
    cut: tuple[str, str] | None = None  # (kind, why)
    in_flight: int = 0  # requests read and not yet answered
    reading: bool = False  # a request's size came: its bytes are awaited, or room for them
    active_s: float = 0.0  # when a request last came or was answered
    muted_until_s: float = 0.0  # throttled by a client quota: nothing is read before (monotonic)
    # set while no answer waits for the client to read what the transport holds: nothing is read meanwhile
    answers_read: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    produces: int = 0  # Produces read whose answer is not yet written out (acks=0: not yet handled)
    # set while ``produces`` is 0: a draining listener closes the connection then (``kafka_api.draining``)
    produces_answered: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.produces_answered.set()

    def read_a_produce(self) -> None:
        self.produces += 1
        self.produces_answered.clear()

    def answered_a_produce(self) -> None:
        self.produces -= 1
        if self.produces == 0:
            self.produces_answered.set()

    def idle_since_s(self) -> float | None:
        """Since when nothing of the connection is being read or answered; None while something is (or
        once it is cut: it is not chosen again)."""
        busy = self.in_flight or self.reading or self.cut is not None
        return None if busy else self.active_s

    def last_active_s(self) -> float | None:
        """When a request last came or was answered, busy or not; None once it is cut (not chosen again)."""
        return None if self.cut is not None else self.active_s


@dataclass(slots=True)
class Held:
    """A request's bytes taken from the listener's budget, given back once (by its handler's end once
    ``handed`` to it)."""

    budget: RequestBytes
    holder: str
    size: int
    handed: bool = False
    given_back: bool = False

    def give_back(self) -> None:
        if not self.given_back:
            self.given_back = True
            self.budget.give_back(self.holder, self.size)


@dataclass(frozen=True, slots=True)
class Answer:
    """A request's answer to come, in request order: the handler's future, whether the answer is
    encoded on a worker thread (``OFF_LOOP_FRAME_BYTES``) and, for a large answer, the future settled once
    it is written out (``kafka_api.answers``)."""

    correlation_id: int
    future: asyncio.Future[Any]
    off_loop: bool = False
    written: asyncio.Future[None] | None = None
    produce: bool = False  # a Produce's: a draining listener waits for it (``Connection.produces``)


# What a connection's transport buffers of its answers, beyond which the sender waits for the client to
# read (and the receiver reads nothing, as Kafka mutes a connection whose answer is not sent): an answer
# is written a slice at a time, so at most this plus a slice of it is ever copied into the buffer
WRITE_BUFFER_HIGH_BYTES = 256 * 1024
WRITE_SLICE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Close:
    """Why a connection's reading ended ("": the client closed its side), whether what it asked before
    is answered first, and how long the connection then stays open: a client that failed to authenticate
    reads its answer before the connection closes (some, kafka-python among them, take a close that
    arrives with the answer for a lost connection), and a client guessing passwords waits a little."""

    why: str
    answer_first: bool
    linger_s: float = 0.0
    kind: str = "protocol"  # for the throttled log line and, for a limit, its count in ``Stats``


async def write_out(
    writer: asyncio.StreamWriter, frame: list[bytes | bytearray | memoryview], answers_read: asyncio.Event
) -> None:
    """An answer's frame into the transport a slice at a time (never copied whole), waiting after each
    while the transport holds more than its high-water mark; ``answers_read`` is clear meanwhile."""
    transport = writer.transport
    for part in frame:
        view = memoryview(part)
        for start in range(0, len(view), WRITE_SLICE_BYTES):
            writer.write(view[start : start + WRITE_SLICE_BYTES])
            if transport.get_write_buffer_size() > WRITE_BUFFER_HIGH_BYTES:
                answers_read.clear()
                try:
                    await writer.drain()
                finally:
                    answers_read.set()
    await writer.drain()  # a closed connection's error, as the whole frame's drain raised it


READ_CHUNK_BYTES = 1024 * 1024


async def read_frame(reader: asyncio.StreamReader, size: int, clock: Clock) -> bytes | memoryview:
    """``size`` bytes. A large frame is gathered from the reader's small buffer into one buffer of its
    size, handed on read-only (kio reads from it as it would from bytes): ``readexactly`` grows its own
    buffer to the frame's size and then copies it twice, three times the frame's bytes at its end. What
    came of a large frame is told to ``clock`` as it comes (its bytes must keep coming: ``overdue``), and
    its buffer made once its first bytes came, so a frame announced and never sent holds no memory."""
    if size <= READ_CHUNK_BYTES:
        return await reader.readexactly(size)
    clock.frame_received = 0
    chunk = await reader.read(READ_CHUNK_BYTES)
    if not chunk:
        raise asyncio.IncompleteReadError(b"", size)
    buffer = bytearray(size)  # once its first bytes came: a frame that never comes holds none
    view = memoryview(buffer)
    try:
        view[: len(chunk)] = chunk
        filled = clock.frame_received = len(chunk)
        while filled < size:
            chunk = await reader.read(min(size - filled, READ_CHUNK_BYTES))
            if not chunk:
                raise asyncio.IncompleteReadError(b"", size)
            view[filled : filled + len(chunk)] = chunk
            filled = clock.frame_received = filled + len(chunk)
    except BaseException:
        # a frame cut or broken off gives its memory back now, not when the collector finds the traceback
        # that refers to this call (a reference cycle: freed only by a collection, which large buffers do
        # not set off)
        view.release()
        del buffer[:]
        raise
    return view.toreadonly()


def settle(answer: asyncio.Future[Any], task: asyncio.Task[Any]) -> None:
    """``answer`` as ``task`` ended, unless it is settled already."""
    if answer.done():
        return
    if not task.done() or task.cancelled():
        answer.cancel()
    elif task.exception() is not None:
        answer.set_exception(task.exception())  # type: ignore[arg-type]
    else:
        answer.set_result(task.result())


def ended_as(task: asyncio.Task[str]) -> str | None:
    """What a finished task returned; None while it runs, or when it was cancelled or raised (logged: a
    bug, since the sender answers every failure it expects)."""
    if not task.done() or task.cancelled():
        return None
    failure = task.exception()
    if failure is not None:
        log.error("Kafka: a connection's sender failed", exc_info=failure)
        return None
    return task.result()
