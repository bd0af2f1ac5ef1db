"""Partition replicas that cannot open or replay (pure: no clock, no I/O; time comes in as ``now_s``).

A replica fails when its log or Raft journal cannot be opened (a corrupt segment), or when its Raft core
stops while applying entries (a replayed entry differs from the batch already on disk, a disk error). Both
are one state: the node closes the replica, reports it with one error message (health, partition state,
describe, metrics, and to the other nodes in its gossip metadata), and retries it with a doubling backoff.
A retried replica stays reported until it has run for ``SETTLE_S`` without stopping, so a replica that
fails again a moment after each reopening is reported as failed all along instead of flapping.

The wire form (``rows``) leaves the node out: a node gossips its own failures. ``digest`` names a list's
content, so a peer fetches a list that did not fit the gossip metadata only when the digest it holds
differs from the published one (no version to order, none reset by a restart).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import msgpack

RETRY_MIN_S = 1.0  # a failed replica is retried after this, doubling up to RETRY_MAX_S
RETRY_MAX_S = 60.0
SETTLE_S = 10.0  # a retried replica that ran this long without stopping is no longer failed
ERROR_CHARS_MAX = 300  # an error message is cut to this (it travels in gossip metadata)
NO_FAILURES_DIGEST = 0


@dataclass(frozen=True, slots=True)
class ReplicaFailure:
    node: str
    topic: str
    partition: int
    error: str  # "<error type>: <message>", at most ERROR_CHARS_MAX characters
    attempts: int  # failed opens or replays in a row


@dataclass(frozen=True, slots=True)
class _Entry:
    failure: ReplicaFailure
    retry_at_s: float
    opened_at_s: float | None = None  # reopened then, and has not stopped since


def describe_error(error: BaseException) -> str:
    """The one message a failed replica is reported with, bounded for gossip."""
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= ERROR_CHARS_MAX else text[: ERROR_CHARS_MAX - 3] + "..."


class FailedReplicas:
    """This node's failed replicas by Raft group id. Used on the node's event loop only."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self._entries: dict[str, _Entry] = {}

    def record(self, group_id: str, topic: str, partition: int, error: BaseException, now_s: float) -> float:
        """The replica of ``group_id`` could not open, or its core stopped: returns the delay before it may
        be retried (doubling with every failure in a row)."""
        before = self._entries.get(group_id)
        attempts = 1 if before is None else before.failure.attempts + 1
        delay_s = min(RETRY_MAX_S, RETRY_MIN_S * 2.0 ** min(attempts - 1, 32))
        failure = ReplicaFailure(self.node_id, topic, partition, describe_error(error), attempts)
        self._entries[group_id] = _Entry(failure, now_s + delay_s)
        return delay_s

    def may_open(self, group_id: str, now_s: float) -> bool:
        """False while a failed replica waits for its retry."""
        entry = self._entries.get(group_id)
        return entry is None or entry.opened_at_s is not None or entry.retry_at_s <= now_s

    def opened(self, group_id: str, now_s: float) -> None:
        """A replica opened; if it had failed, it is on probation until it has run ``SETTLE_S``."""
        entry = self._entries.get(group_id)
        if entry is not None:
            self._entries[group_id] = _Entry(entry.failure, entry.retry_at_s, now_s)

    def settle(self, running: Collection[str], now_s: float) -> bool:
        """Forget retried replicas that are still running ``SETTLE_S`` after they reopened; True if any."""
        settled = [
            group_id
            for group_id, entry in self._entries.items()
            if entry.opened_at_s is not None and entry.opened_at_s + SETTLE_S <= now_s and group_id in running
        ]
        for group_id in settled:
            del self._entries[group_id]
        return bool(settled)

    def keep_only(self, group_ids: Collection[str]) -> None:
        """Forget replicas this node no longer holds (the topic was deleted or the partition moved away)."""
        for group_id in [g for g in self._entries if g not in group_ids]:
            del self._entries[group_id]

    def next_retry_s(self) -> float | None:
        """When the earliest replica waiting for a retry may be opened again (None: none waits)."""
        waiting = [e.retry_at_s for e in self._entries.values() if e.opened_at_s is None]
        return min(waiting) if waiting else None

    def get(self, group_id: str) -> ReplicaFailure | None:
        entry = self._entries.get(group_id)
        return None if entry is None else entry.failure

    def failures(self) -> list[ReplicaFailure]:
        return sorted((e.failure for e in self._entries.values()), key=lambda f: (f.topic, f.partition))

    def __len__(self) -> int:
        return len(self._entries)


def rows(failures: Sequence[ReplicaFailure]) -> list[list[object]]:
    """The wire form of one node's failures (the node is the sender)."""
    return [[f.topic, f.partition, f.error, f.attempts] for f in failures]


def from_rows(node: str, value: object) -> list[ReplicaFailure]:
    """Parse ``rows``; ValueError names what is malformed."""
    if not isinstance(value, list):
        raise ValueError(f"replica failures must be a list, got {type(value).__name__}")
    failures = []
    for row in value:
        if (
            not isinstance(row, list)
            or len(row) != 4
            or not isinstance(row[0], str)
            or not _natural(row[1])
            or not isinstance(row[2], str)
            or not _natural(row[3])
        ):
            raise ValueError(f"malformed replica failure {str(row)[:80]!r}")
        failures.append(ReplicaFailure(node, row[0], row[1], row[2], row[3]))
    return failures


def digest(failures: Sequence[ReplicaFailure]) -> int:
    """A 63-bit name of a failure list's content; ``NO_FAILURES_DIGEST`` for none."""
    if not failures:
        return NO_FAILURES_DIGEST
    packed = msgpack.packb(sorted(rows(failures)), use_bin_type=True)
    return int.from_bytes(hashlib.blake2b(packed, digest_size=8).digest(), "big") >> 1 or 1


def _natural(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
