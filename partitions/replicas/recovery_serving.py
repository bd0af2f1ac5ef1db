"""The leader side of Kafka's replication throttle: what a node serves to its peers' recoveries
(``PeerService.read_batches``) of replicas listed in their topic's ``leader.replication.throttled.replicas``
on this node, together at most ``leader.replication.throttled.rate`` bytes/s (Kafka's leader
``ReplicationQuotaManager``, one per broker). The rate is read at each answer
(``partitions.replication_throttles.leader_rate``), so a change applies to the next one and a removal
lifts it.

An answer under the throttle carries at most one second's worth, is delayed while the node's throttle
is in debt, up to ``DELAY_MAX_S``, and past that is answered without batches (as Kafka's leader answers
a throttled partition empty while its quota is exceeded): the recovering replica asks another peer or
asks again after its backoff. Only that answer waits; nothing else a node serves is held by it.
Event loop only; clock and sleep injectable for tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from partitions.replicas.recovery import TokenBucket, throttle_bucket

DELAY_MAX_S = 1.0  # the longest a throttled answer is held (a peer call waits 15 s)

# (topic, partition) -> the leader replication throttle of this node's replica in bytes/s (None: none)
LeaderRate = Callable[[str, int], int | None]


@dataclass(frozen=True, slots=True)
class Grant:
    """What one answer to a peer's recovery may carry: ``max_bytes`` (0: nothing now) and whether it is
    charged to the throttle."""

    max_bytes: int
    throttled: bool


@dataclass(eq=False)
class RecoveryServing:
    """The node's leader replication throttle: ``admit`` before reading an answer, ``served`` after."""

    leader_rate: LeaderRate
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    bucket: TokenBucket | None = field(default=None, init=False)
    throttled_bytes: int = field(default=0, init=False)  # served under the throttle
    delayed_s: float = field(default=0.0, init=False)  # answers held for it
    refused: int = field(default=0, init=False)  # answers sent without batches for it

    async def admit(self, topic: str, partition: int, max_bytes: int) -> Grant:
        rate = self.leader_rate(topic, partition)
        if rate is None:
            return Grant(max_bytes, False)
        self.bucket = throttle_bucket(rate, self.clock(), self.bucket)
        wait_s = self.bucket.take(0, self.clock())
        if wait_s > DELAY_MAX_S:
            self.refused += 1
            return Grant(0, True)
        if wait_s > 0:
            await self.sleep(wait_s)
            self.delayed_s += wait_s
        return Grant(max(1, min(max_bytes, int(self.bucket.burst))), True)

    def served(self, grant: Grant, size: int) -> None:
        """An answer of ``size`` bytes went out under ``grant``: charged to the throttle."""
        if grant.throttled and self.bucket is not None and size:
            self.bucket.take(size, self.clock())
            self.throttled_bytes += size

    def metrics(self) -> dict[str, float]:
        return {
            "recovery_served_throttled_bytes": self.throttled_bytes,
            "recovery_served_throttled_seconds": round(self.delayed_s, 3),
            "recovery_served_throttled_refused": self.refused,
        }
