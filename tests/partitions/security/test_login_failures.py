"""Failed logins counted per address and per user name (``LoginFailures``), and a wrong password costing
the same work whether its user exists or not (``Verifier``): without a clock or a socket."""

from __future__ import annotations

import pytest

from partitions.security import users
from partitions.security.login_failures import LoginFailures, LoginLimits
from partitions.security.users import Verifier, make_credential


def test_an_address_is_refused_past_its_bound_until_its_window_ends() -> None:
    failures = LoginFailures(LoginLimits(per_address_max=3, per_user_max=100, window_s=60))
    assert not failures.failed("10.0.0.1", "alice", 0.0)
    assert not failures.failed("10.0.0.1", "bob", 1.0)
    assert failures.retry_after_s("10.0.0.1", "carol", 2.0) is None
    assert failures.failed("10.0.0.1", "carol", 2.0)  # the third: the bound is reached
    assert failures.retry_after_s("10.0.0.1", "alice", 3.0) == 57.0  # whoever it claims to be
    assert failures.retry_after_s("10.0.0.2", "alice", 3.0) is None  # another address may
    assert failures.retry_after_s("10.0.0.1", None, 59.9) == pytest.approx(0.1)
    assert failures.retry_after_s("10.0.0.1", "alice", 60.0) is None  # the window ended
    assert (failures.failed_total, failures.refused_total) == (3, 2)


def test_a_user_guessed_from_many_addresses_is_refused_past_its_bound() -> None:
    failures = LoginFailures(LoginLimits(per_address_max=2, per_user_max=5, window_s=10))
    for i in range(5):
        failures.failed(f"10.0.1.{i}", "alice", float(i))
    assert failures.retry_after_s("10.0.9.9", "alice", 5.0) == 5.0
    assert failures.retry_after_s("10.0.9.9", "bob", 5.0) is None


def test_memory_is_bounded_whatever_the_addresses() -> None:
    failures = LoginFailures(LoginLimits(keys_max=100))
    for i in range(10_000):
        failures.failed(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", f"user{i}", 0.0)
    assert failures.remembered() == 100


def test_an_unknown_user_costs_one_password_check_as_a_known_one_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    known = {"alice": (make_credential("SCRAM-SHA-256", "right"),)}
    verifier = Verifier()
    checked: list[tuple[str, int]] = []
    real = users.password_matches

    def counting(credential: users.ScramCredential, password: str) -> bool:
        checked.append((credential.mechanism, credential.iterations))
        return real(credential, password)

    monkeypatch.setattr(users, "password_matches", counting)
    assert not verifier.verify(known, "alice", "wrong")
    assert not verifier.verify(known, "mallory", "wrong")
    assert checked[0] == checked[1]  # the same PBKDF2 (mechanism, iterations) for both


def test_loopback_clients_meet_only_the_user_bound_unless_bounded() -> None:
    failures = LoginFailures(LoginLimits(per_address_max=2, per_user_max=5, window_s=10))
    for i in range(4):
        failures.failed("127.0.0.1", f"user{i}", 0.0)
    assert failures.retry_after_s("127.0.0.1", "alice", 1.0) is None  # local tools share the address
    assert failures.retry_after_s("::1", None, 1.0) is None
    bounded = LoginFailures(LoginLimits(per_address_max=2, window_s=10, loopback_bounded=True))
    bounded.failed("127.0.0.1", None, 0.0)
    bounded.failed("127.0.0.1", None, 0.0)
    assert bounded.retry_after_s("127.0.0.1", None, 1.0) == 9.0
