"""The one retry rule of every client in this package, asyncio and blocking: which failures are worth
another attempt, how long to wait before it, and when to give up. Pure: no I/O; the wall clock is read
only through ``clock``.

- An error answer 503 (nothing was done) is retried; 504 (outcome unknown) only for a ``repeatable``
  request (a read, an offset commit, an idempotent produce). Every other error answer is final.
- A connection that failed before the request left is retried on the next server (the caller moves on);
  one that failed after it left (a timeout, a lost connection: outcome unknown) only when ``repeatable``.
- The wait: none while connection failures in a row have not yet tried every server; otherwise
  exponential backoff (``backoff_s`` doubling up to ``backoff_max_s``) with jitter, and at least the
  answer's ``Retry-After`` (itself at most ``backoff_max_s``).
- Giving up: after ``retries`` retries, or when the next attempt would start more than ``budget_s``
  after the first (each bound is optional; at least one is given); with ``unreachable_rounds``, also
  once every server refused a connection that many times in a row (a command line fails fast when no
  server runs, rather than backing off for seconds); and once every server in a row presented a
  certificate the client does not trust (a wrong CA or host name is no failure that time mends: each
  server is tried once, as one may be between two certificates, and then the caller is told).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from raftlog_client.errors import Unavailable

RETRIABLE_STATUSES = (503, 504)
_EXPONENT_MAX = 30  # 2**30 * backoff_s is past any backoff_max_s; a larger power only risks overflow


@dataclass(frozen=True, slots=True)
class RetryRule:
    """How one client retries: at most ``retries`` retries and ``budget_s`` seconds from the first attempt
    (either may be None, not both), waits of ``backoff_s`` doubling up to ``backoff_max_s``, and with
    ``unreachable_rounds``, at most that many rounds of every server refusing a connection in a row."""

    retries: int | None = 8
    budget_s: float | None = None
    backoff_s: float = 0.05
    backoff_max_s: float = 2.0
    unreachable_rounds: int | None = None

    def __post_init__(self) -> None:
        if (self.retries is not None and self.retries < 0) or self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ValueError("retries, backoff_s and backoff_max_s must be >= 0")
        if (self.budget_s is not None and self.budget_s <= 0) or (
            self.retries is None and self.budget_s is None
        ):
            raise ValueError("a retry rule needs a bound: retries, a time budget > 0 s, or both")


class Attempts:
    """The attempts of one request under ``rule``; each ``after_*`` returns the wait before the next one,
    or None."""

    def __init__(
        self,
        rule: RetryRule,
        *,
        servers: int,
        repeatable: bool,
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if servers < 1:
            raise ValueError("attempts need a server")
        self.rule = rule
        self.servers = servers
        self.repeatable = repeatable
        self._rng = rng
        self._clock = clock
        self._started = clock()
        self.made = 0  # attempts that failed so far
        self._unreachable_in_a_row = 0
        self._untrusted_in_a_row = 0

    def after_error_answer(self, status: int, retry_after: str | None) -> float | None:
        """After an answer with ``status`` >= 400; None: that answer is final."""
        self.made += 1
        self._unreachable_in_a_row = self._untrusted_in_a_row = 0
        if status != 503 and not (status == 504 and self.repeatable):
            return None
        return self._within_bounds(self._backoff(retry_after))

    def after_retriable_records(self) -> float | None:
        """After an answer whose records failed with retriable error codes (an idempotent produce)."""
        self.made += 1
        self._unreachable_in_a_row = self._untrusted_in_a_row = 0
        return self._within_bounds(self._backoff(None))

    def after_unreachable(self, sent: bool, untrusted: bool = False) -> float | None:
        """After a connection failure, before (``sent`` False) or after the request left; ``untrusted``:
        the server's certificate was not trusted (before the request left)."""
        self.made += 1
        self._unreachable_in_a_row += 1
        self._untrusted_in_a_row = self._untrusted_in_a_row + 1 if untrusted else 0
        if sent and not self.repeatable:
            return None
        if self._untrusted_in_a_row >= self.servers:
            return None
        rounds = self.rule.unreachable_rounds
        if not sent and rounds is not None and self._unreachable_in_a_row >= rounds * self.servers:
            return None
        wait = 0.0 if self._unreachable_in_a_row < self.servers else self._backoff(None)
        return self._within_bounds(wait)

    def unavailable(self, request: str, problem: str) -> Unavailable:
        """The error to raise when connection failures used up the budget."""
        if self.rule.budget_s is not None:
            bound = f"within {self.rule.budget_s:.1f} s"
        else:
            bound = f"in {self.made} attempt{'s' if self.made != 1 else ''}"
        return Unavailable(f"{request}: no usable answer {bound} ({problem})")

    def _backoff(self, retry_after: str | None) -> float:
        exponent = min(self.made - 1, _EXPONENT_MAX)
        rule = self.rule
        delay = min(rule.backoff_max_s, rule.backoff_s * 2.0**exponent) * (0.5 + self._rng.random() / 2)
        if retry_after is not None and retry_after.strip().isdigit():
            delay = max(delay, min(float(retry_after), rule.backoff_max_s))
        return delay

    def _within_bounds(self, wait: float) -> float | None:
        retries, budget_s = self.rule.retries, self.rule.budget_s
        if retries is not None and self.made > retries:
            return None
        if budget_s is not None and self._clock() + wait - self._started > budget_s:
            return None
        return wait
