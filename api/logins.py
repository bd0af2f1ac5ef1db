"""Failed logins on the HTTP door (HTTP Basic, a user's token, the admin token): counted in the node's
``partitions.security.login_failures.LoginFailures`` (which the Kafka listener's SASL shares), refused while
over a bound (``TooManyLoginFailures``: 429 with Retry-After, nothing checked), and logged at most once a
minute with how many failures the line stands for (and at most once a minute for a failure that starts
refusals)."""

from __future__ import annotations

import logging

from api.errors import TooManyLoginFailures
from api.http_limits import QuietLog
from partitions.security.login_failures import LoginFailures

log = logging.getLogger("api.auth")


class Logins:
    """Failed logins on this door: counted (``partitions.security.login_failures``), refused while over a
    bound (``TooManyLoginFailures``: 429 with Retry-After, nothing checked), and logged at most once a
    minute with how many failures the line stands for (a failure that starts refusals: its own line, as
    rare)."""

    def __init__(self, failures: LoginFailures) -> None:
        self.failures = failures
        self._quiet = QuietLog()

    def check(self, host: str, user: str | None, now_s: float) -> None:
        wait = self.failures.retry_after_s(host, user, now_s)
        if wait is not None:
            raise TooManyLoginFailures(wait)

    def failed(self, host: str, user: str | None, now_s: float, why: str) -> None:
        reached = self.failures.failed(host, user, now_s)
        # a failure that starts refusals has lines of its own: a guesser is named even amid typos
        count = self._quiet.record("reached" if reached else "failed", now_s)
        if count is not None:
            log.warning(
                "HTTP login failed from %s%s: %s%s (%d failed logins since the last such line)",
                host, "" if user is None else f" as {user!r}", why,
                "; its further attempts are refused for a while" if reached else "", count,
            )  # fmt: skip
