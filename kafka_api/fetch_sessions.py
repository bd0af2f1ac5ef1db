"""Incremental fetch sessions (KIP-227) as Kafka's ``FetchSessionCache`` keeps them: a pure state machine,
time passed in, no sockets or loop.

A Fetch with session epoch 0 is a full one: it names every partition it wants, and its answer holds every
one of them and the id of a new session (0 when none could be made), which remembers the partitions with
what was asked (offset, bytes, leader epoch) and what was answered (high watermark, log start and last
stable offsets). The client's next Fetch names that id and epoch 1, then 2, ...: it names only the
partitions whose offset changed, the ones to add and the ones to forget, and its answer holds only the
partitions with something new (records, a changed offset, an error), so a consumer of many idle partitions
sends and gets a few bytes. An epoch of -1 is a full fetch that wants no session (the one named, if any,
is closed). A session id unknown is ``FETCH_SESSION_ID_NOT_FOUND``, an epoch other than the session's
``INVALID_FETCH_SESSION_EPOCH``, a session made by names (v7-12) used by ids (v13+) or back
``FETCH_SESSION_TOPIC_ID_ERROR``: the client then starts over with a full fetch.

Sessions belong to the node (one cache shared by its connections, as Kafka's broker has one), bounded by
``sessions_max`` (Kafka's ``max.incremental.fetch.session.cache.slots``, 1000): a new one past it takes the
place of the least recently used if that one is idle past ``eviction_ms`` (2 minutes, Kafka's), else of
the smallest (fewer partitions than the newcomer) that has lived past ``eviction_ms``, else it is not made
(id 0: the client fetches in full). A client opening sessions without end therefore replaces its own, and
a session in use past its first two minutes is never taken by a smaller newcomer. A partition that returned
records moves to the end of its session's order, so the partitions read first (``fetch.py`` stops reading
at the answer's bytes) take turns.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

NO_SESSION = 0
INITIAL_EPOCH = 0  # a full fetch that opens a session
FINAL_EPOCH = -1  # a full fetch that wants none
SESSIONS_MAX = 1000  # Kafka's max.incremental.fetch.session.cache.slots
EVICTION_MS = 120_000  # Kafka's: a session idle this long, or this old, may give way to a new one
INT32_MAX = 2**31 - 1

Key = tuple[str | uuid.UUID, int]  # (topic name, or its id from v13, partition)


@dataclass(slots=True)
class Wanted:
    """What a fetch asks of one partition."""

    offset: int
    max_bytes: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class Answered:
    """What an answer said of one partition: what the next incremental answer compares with."""

    records: bool
    error: bool
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int


@dataclass(slots=True)
class _Cached:
    wanted: Wanted
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1


@dataclass(slots=True)
class FetchSession:
    id: int
    uses_topic_ids: bool
    partitions: dict[Key, _Cached]
    created_ms: int
    last_used_ms: int
    epoch: int = 1


@dataclass(slots=True)
class FetchContext:
    """One Fetch's view of its session: the partitions to read, in order, or the error that answers it."""

    partitions: list[tuple[Key, Wanted]]
    error: ErrorCode = ErrorCode.none
    session: FetchSession | None = None  # incremental: the session it reads
    opens: bool = False  # full, epoch 0: a session is made from its answer
    request_epoch: int = FINAL_EPOCH
    uses_topic_ids: bool = False

    @property
    def incremental(self) -> bool:
        return self.session is not None


def next_epoch(epoch: int) -> int:
    """Kafka's: 1 after 0, wrapping from the largest int32 to 1 (0 and -1 are the full fetches')."""
    return 1 if epoch < 0 or epoch >= INT32_MAX else epoch + 1


@dataclass(slots=True)
class FetchSessions:
    """A node's fetch sessions (Kafka's ``FetchSessionCache``), bounded by ``sessions_max``."""

    sessions_max: int = SESSIONS_MAX
    eviction_ms: int = EVICTION_MS
    rng: random.Random = field(default_factory=random.Random)
    sessions: dict[int, FetchSession] = field(default_factory=dict)
    full_fetches: int = 0  # answered in full (a session opened or not, or none wanted)
    incremental_fetches: int = 0  # answered from a session
    session_errors: int = (
        0  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR
    )
    evictions: int = 0

    def counts(self) -> dict[str, int]:
        """For the node's /metrics."""
        return {
            "sessions": len(self.sessions),
            "full_fetches": self.full_fetches,
            "incremental_fetches": self.incremental_fetches,
            "session_errors": self.session_errors,
            "evictions": self.evictions,
        }

    def open(
        self,
        session_id: int,
        epoch: int,
        uses_topic_ids: bool,
        wanted: Sequence[tuple[Key, Wanted]],
        forgotten: Iterable[Key],
        now_ms: int,
    ) -> FetchContext:
        """The context of a Fetch naming ``session_id`` at ``epoch``, which asks for ``wanted`` and
        forgets ``forgotten`` (v13+: keyed by topic id, ``uses_topic_ids``)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                self.sessions.pop(session_id, None)  # a full fetch closes the session it names
            self.full_fetches += 1
            # a partition named twice is read and answered once, as the last naming asks (Kafka's
            # FetchRequest.fetchData is a LinkedHashMap: first place, last value)
            return FetchContext(
                list(dict(wanted).items()),
                opens=epoch == INITIAL_EPOCH,
                request_epoch=epoch,
                uses_topic_ids=uses_topic_ids,
            )
        session = self.sessions.get(session_id)
        error = ErrorCode.none
        if session is None:
            error = ErrorCode.fetch_session_id_not_found
        elif session.epoch != epoch:
            error = ErrorCode.invalid_fetch_session_epoch
        elif session.uses_topic_ids != uses_topic_ids:
            error = ErrorCode.fetch_session_topic_id_error
        if session is None or error != ErrorCode.none:
            self.session_errors += 1
            return FetchContext([], error=error, request_epoch=epoch)
        for key, asked in wanted:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = _Cached(asked)
            else:
                cached.wanted = asked
        for key in forgotten:
            session.partitions.pop(key, None)
        if not session.partitions:  # nothing left: closed, answered as a sessionless fetch
            del self.sessions[session.id]
            self.full_fetches += 1
            return FetchContext([], request_epoch=FINAL_EPOCH, uses_topic_ids=uses_topic_ids)
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        self.incremental_fetches += 1
        parts = [(key, cached.wanted) for key, cached in session.partitions.items()]
        return FetchContext(parts, session=session, request_epoch=epoch, uses_topic_ids=uses_topic_ids)

    def close(
        self, context: FetchContext, answered: dict[Key, Answered], now_ms: int
    ) -> tuple[ErrorCode, int, list[Key]]:
        """The answer's error, session id and the partitions it holds, in order, once ``answered`` was
        read for ``context``: a full fetch's every partition (and its new session's id), an incremental
        one's partitions with something new. The session remembers what it answered."""
        if context.session is None:
            session_id = NO_SESSION
            if context.opens:
                session_id = self._create(context, answered, now_ms)
            return ErrorCode.none, session_id, list(answered)
        session = context.session
        if session.epoch != next_epoch(context.request_epoch) or self.sessions.get(session.id) is not session:
            # another fetch of the same epoch went first (a duplicate), or the session is gone
            return ErrorCode.invalid_fetch_session_epoch, session.id, []
        keys = []
        for key, answer in answered.items():
            cached = session.partitions.get(key)
            if cached is None:
                continue
            changed = (
                answer.records
                or answer.error
                or cached.high_watermark != answer.high_watermark
                or cached.log_start_offset != answer.log_start_offset
                or cached.last_stable_offset != answer.last_stable_offset
            )
            if not changed:
                continue
            keys.append(key)
            cached.high_watermark = -1 if answer.error else answer.high_watermark
            cached.log_start_offset = answer.log_start_offset
            cached.last_stable_offset = answer.last_stable_offset
            if answer.records:  # to the end: the others are read first next time
                del session.partitions[key]
                session.partitions[key] = cached
        return ErrorCode.none, session.id, keys

    def _create(self, context: FetchContext, answered: dict[Key, Answered], now_ms: int) -> int:
        size = len(context.partitions)
        if len(self.sessions) >= self.sessions_max and not self._evict(size, now_ms):
            return NO_SESSION
        session_id = self.rng.randint(1, INT32_MAX)
        while session_id in self.sessions:
            session_id = self.rng.randint(1, INT32_MAX)
        partitions = {}
        for key, asked in context.partitions:
            answer = answered.get(key)
            cached = _Cached(asked)
            if answer is not None and not answer.error:
                cached.high_watermark = answer.high_watermark
                cached.log_start_offset = answer.log_start_offset
                cached.last_stable_offset = answer.last_stable_offset
            partitions[key] = cached
        self.sessions[session_id] = FetchSession(
            session_id, context.uses_topic_ids, partitions, now_ms, now_ms
        )
        return session_id

    def _evict(self, size: int, now_ms: int) -> bool:
        """Room for a session of ``size`` partitions: Kafka's rule (the module's docstring)."""
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        victim: FetchSession | None = None
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            victim = stalest
        else:
            old = [s for s in self.sessions.values() if now_ms - s.created_ms > self.eviction_ms]
            smallest = min(old, key=lambda s: (len(s.partitions), s.id), default=None)
            if smallest is not None and len(smallest.partitions) < size:
                victim = smallest
        if victim is None:
            return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True
