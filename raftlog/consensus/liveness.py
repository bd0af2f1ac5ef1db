"""When the thread that drives a node's Raft groups last stood still: what a leader's reads rest on.

A leader answers reads from its own state only while no other leader can have been elected (RaftCore,
"Reads"). Its followers stand for election only when they stop hearing it, so what makes that true is that
its driver thread keeps running: reading their acknowledgements, sending its heartbeats (and, for a quiet
group, its node connection's pings). A thread that stood still (its process paused by SIGSTOP, its
machine's CPU taken away) may have been deposed meanwhile, and what it reads first on waking (the
acknowledgements of its old heartbeats, still in its sockets) looks fresh although it is not. So:

* :meth:`Liveness.running` (the driver, at the start of each round) and :meth:`Liveness.waiting` (before
  it sleeps in its poll, with the time it means to sleep) say when the thread looked at its sockets last
  and by when it means to look again. A round that starts more than ``stall_s`` after that time, or that
  ran for more than ``stall_s`` itself, is a stall: ``stalls`` counts them, and a leader's reads need a
  new confirmation after each (a no-op of its term committed after it).
* :meth:`Liveness.standing_still` tells another thread (a read on the event loop, which may run before
  the driver does after a pause) that the driver is overdue now, before the driver has seen it itself.

Monotonic seconds on the driver's clock, which keeps running while the process is stopped. Written by the
driver thread only; read from any (``stalls`` is written before ``due_at``, and readers read ``due_at``
first, so a reader that sees the new ``due_at`` sees the stall counted). Pure: no threads, no clock of
its own.
"""

from __future__ import annotations

import math


class Liveness:
    def __init__(self, now: float, stall_s: float = math.inf) -> None:
        """``stall_s``: how long the thread may stand still before it is a stall; the driver lowers it to
        the shortest of its cores' (``RaftCore.read_stall_s``)."""
        self.stall_s = stall_s
        self.due_at = now  # by when the thread is to look at its sockets again
        self._round_at = now  # when the current round started
        self.stalls = 0
        self.stalled_at = -math.inf  # when the last stall was noticed (for logs and tests)

    def running(self, now: float) -> None:
        """The driver starts a round at ``now``."""
        if now - self.due_at > self.stall_s:
            self._stalled(now)
        self._round_at = now
        self.due_at = now

    def waiting(self, now: float, wait_s: float) -> None:
        """The driver ends its round at ``now`` and sleeps in its poll for at most ``wait_s`` (what arrives
        wakes it sooner)."""
        if now - self._round_at > self.stall_s:
            self._stalled(now)
        self.due_at = now + max(0.0, wait_s)

    def standing_still(self, now: float) -> bool:
        """The driver is overdue by more than ``stall_s`` at ``now``: stopped, or not scheduled."""
        return now - self.due_at > self.stall_s

    def lower_stall_s(self, stall_s: float) -> None:
        if stall_s <= 0:
            raise ValueError(f"stall_s must be positive, got {stall_s}")
        self.stall_s = min(self.stall_s, stall_s)

    def _stalled(self, now: float) -> None:
        self.stalled_at = now
        self.stalls += 1
