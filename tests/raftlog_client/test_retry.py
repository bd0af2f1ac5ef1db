"""The one retry rule of the clients (``raftlog_client.retry``), on a fake clock: what is retried, how
long the waits are, and when each bound ends the attempts."""

from __future__ import annotations

import random

import pytest

from raftlog_client.retry import Attempts, RetryRule


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def attempts(
    clock: Clock | None = None, servers: int = 3, repeatable: bool = False, **rule: object
) -> Attempts:
    given = RetryRule(**{"retries": 8, "budget_s": None, "backoff_s": 0.1, "backoff_max_s": 2.0, **rule})  # type: ignore[arg-type]
    return Attempts(
        given, servers=servers, repeatable=repeatable, rng=random.Random(1), clock=clock or Clock()
    )


def test_503_is_retried_504_only_when_repeatable_other_errors_never() -> None:
    assert attempts().after_error_answer(503, None) is not None
    assert attempts().after_error_answer(504, None) is None
    assert attempts(repeatable=True).after_error_answer(504, None) is not None
    for status in (400, 404, 409, 416, 500):
        assert attempts(repeatable=True).after_error_answer(status, None) is None


def test_waits_grow_with_jitter_up_to_the_cap_and_honour_retry_after() -> None:
    rule = attempts(retries=20)
    waits = [rule.after_error_answer(503, None) for _ in range(10)]
    assert all(w is not None for w in waits)
    assert 0.05 <= waits[0] <= 0.1 and 0.1 <= waits[1] <= 0.2 and 0.2 <= waits[2] <= 0.4  # type: ignore[operator]
    assert max(w for w in waits if w is not None) <= 2.0
    assert attempts().after_error_answer(503, "1") == 1.0  # Retry-After: 1 outlasts the first backoff
    assert attempts().after_error_answer(503, "60") == 2.0  # but never past backoff_max_s


def test_connection_failures_try_every_server_at_once_then_back_off() -> None:
    rule = attempts(servers=3)
    assert [rule.after_unreachable(sent=False) for _ in range(2)] == [0.0, 0.0]
    third = rule.after_unreachable(sent=False)
    assert third is not None and third > 0
    assert attempts().after_unreachable(sent=True) is None  # sent, not repeatable: outcome unknown
    assert attempts(repeatable=True).after_unreachable(sent=True) == 0.0


def test_an_untrusted_certificate_is_given_up_on_once_every_server_showed_one() -> None:
    rule = attempts(servers=3, budget_s=600.0)
    assert rule.after_unreachable(sent=False, untrusted=True) == 0.0  # the next server may be trusted
    assert rule.after_unreachable(sent=False, untrusted=True) == 0.0
    assert rule.after_unreachable(sent=False, untrusted=True) is None  # no server is: time will not mend it
    mixed = attempts(servers=2, budget_s=600.0)
    assert mixed.after_unreachable(sent=False, untrusted=True) == 0.0
    assert mixed.after_unreachable(sent=False) is not None  # one was down, not untrusted: keep trying
    assert mixed.after_unreachable(sent=False, untrusted=True) is not None
    assert mixed.after_unreachable(sent=False, untrusted=True) is None


def test_retries_bound_the_count() -> None:
    rule = attempts(retries=2)
    assert rule.after_error_answer(503, None) is not None
    assert rule.after_error_answer(503, None) is not None
    assert rule.after_error_answer(503, None) is None


def test_a_time_budget_bounds_the_attempts_and_names_itself() -> None:
    clock = Clock()
    rule = attempts(clock, retries=None, budget_s=1.0)
    assert rule.after_error_answer(503, None) is not None
    clock.now += 0.95
    assert rule.after_error_answer(503, None) is None  # the next attempt would start after the budget
    failed = rule.unavailable("GET /topics", "127.0.0.1:9: refused")
    assert str(failed) == "GET /topics: no usable answer within 1.0 s (127.0.0.1:9: refused)"


def test_some_bound_is_needed() -> None:
    with pytest.raises(ValueError, match="needs a bound"):
        attempts(retries=None, budget_s=None)
    with pytest.raises(ValueError, match="needs a bound"):
        RetryRule(budget_s=0)
    with pytest.raises(ValueError, match="must be >= 0"):
        RetryRule(retries=-1)
