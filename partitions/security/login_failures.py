"""Failed logins counted per client address and per user name, so that passwords and tokens cannot be
guessed at the speed PBKDF2 allows (some hundreds a second per node): after ``per_address_max`` failures
from one address, or ``per_user_max`` for one name (from anywhere: a guesser with many addresses), within
``window_s``, further attempts of that address or name are refused unchecked until the window ends
(``retry_after_s``). The per-user bound is the higher one, so that a stranger failing on purpose locks a
user out only by failing from many addresses, and that one's own address is refused first. Loopback
addresses are exempt from the per-address bound unless ``loopback_bounded``: every local tool and test
shares one, and a local guesser still meets the per-user bound.

Pure: no clock, no lock, no I/O; the time comes in as ``now_s``. Each door (``api/auth.py``,
``kafka_api/sasl_apis.py``) holds one per node: failures are this node's, never replicated. Memory is
bounded: at most ``keys_max`` addresses and names are remembered, the least recently failed forgotten
first (a guesser who fills the table only forgets its own counts sooner than the window would).
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from dataclasses import dataclass

FAILURES_PER_ADDRESS_MAX_DEFAULT = 10
FAILURES_PER_USER_MAX_DEFAULT = 30
FAILURE_WINDOW_S_DEFAULT = 60.0
KEYS_MAX_DEFAULT = 100_000  # (kind, text) keys: ~20 MiB at worst
LOG_INTERVAL_S = 60.0  # a door logs failed logins at most once per interval (``log_due``)


@dataclass(frozen=True, slots=True)
class LoginLimits:
    per_address_max: int = FAILURES_PER_ADDRESS_MAX_DEFAULT
    per_user_max: int = FAILURES_PER_USER_MAX_DEFAULT
    window_s: float = FAILURE_WINDOW_S_DEFAULT
    keys_max: int = KEYS_MAX_DEFAULT
    loopback_bounded: bool = False  # the per-address bound applies to loopback clients too

    def __post_init__(self) -> None:
        if self.per_address_max < 1 or self.per_user_max < 1 or self.keys_max < 2:
            raise ValueError(f"login limits: bounds must be >= 1 (keys_max >= 2): {self}")
        if self.window_s <= 0:
            raise ValueError(f"login limits: window_s {self.window_s} must be > 0")


class LoginFailures:
    """Failed logins per address and per user name in fixed windows; refusals while over a bound."""

    def __init__(self, limits: LoginLimits = LoginLimits()) -> None:
        self.limits = limits
        self._windows: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()  # key -> (start, n)
        self.failed_total = 0  # failed logins counted (``/metrics``)
        self.refused_total = 0  # attempts refused unchecked while over a bound
        self._logged_at_s: float | None = None
        self._logged_total = 0  # failed_total when the last line was due

    def _count(self, key: tuple[str, str], now_s: float) -> tuple[float, int]:
        start, count = self._windows.get(key, (now_s, 0))
        if now_s - start >= self.limits.window_s:
            return now_s, 0
        return start, count

    def _bounds(self, address: str, user: str | None) -> list[tuple[tuple[str, str], int]]:
        bounds = []
        if self.limits.loopback_bounded or not _is_loopback(address):
            bounds.append((("address", address), self.limits.per_address_max))
        if user is not None:
            bounds.append((("user", user), self.limits.per_user_max))
        return bounds

    def retry_after_s(self, address: str, user: str | None, now_s: float) -> float | None:
        """Seconds until this address (and this user name, when one is given) may try again; None when
        it may now. A refusal is counted; the caller answers it without checking anything."""
        wait = 0.0
        for key, bound in self._bounds(address, user):
            start, count = self._count(key, now_s)
            if count >= bound:
                wait = max(wait, start + self.limits.window_s - now_s)
        if wait <= 0:
            return None
        self.refused_total += 1
        return wait

    def failed(self, address: str, user: str | None, now_s: float) -> bool:
        """Count one failed login; whether it reached a bound (the next attempt is refused)."""
        self.failed_total += 1
        reached = False
        for key, bound in self._bounds(address, user):
            start, count = self._count(key, now_s)
            self._windows[key] = (start, count + 1)
            self._windows.move_to_end(key)
            reached = reached or count + 1 >= bound
        while len(self._windows) > self.limits.keys_max:
            self._windows.popitem(last=False)
        return reached

    def log_due(self, now_s: float) -> int | None:
        """How many failures a log line should report now (those since the last line), or None while the
        last line is younger than ``LOG_INTERVAL_S``: a guesser gets a line a minute, not one a try."""
        if self._logged_at_s is not None and now_s - self._logged_at_s < LOG_INTERVAL_S:
            return None
        self._logged_at_s = now_s
        since, self._logged_total = self.failed_total - self._logged_total, self.failed_total
        return since

    def remembered(self) -> int:
        """How many addresses and names are counted now (bounded by ``keys_max``)."""
        return len(self._windows)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
