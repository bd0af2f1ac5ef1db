"""The Kafka listener's pure connection rules (``kafka_api.limits``), without a loop or a socket: when a
connection is cut (login, frame and idle deadlines) and whether a new one is admitted (node-wide,
per-address and unauthenticated caps, and the oldest unauthenticated connection of the address holding
most given up for a newcomer from another); and ``Security.credential_gone``, which cuts a connection
whose user, token or password is gone."""

from __future__ import annotations

import pytest

from kafka_api.limits import Clock, Limits, Refusal, admission, overdue
from kafka_api.security import Security, Session
from partitions.security.tokens import ApiToken
from partitions.security.users import make_credential

LIMITS = Limits(
    connections_max=10, connections_per_address_max=4, unauthenticated_connections_max=6,
    login_timeout_s=10, idle_timeout_s=600, frame_timeout_s=10, frame_rate_min_bytes_per_s=1024 * 1024,
)  # fmt: skip


def test_a_connection_not_authenticated_is_cut_at_the_login_deadline_only_when_login_is_required() -> None:
    clock = Clock(opened_s=100.0)
    assert overdue(clock, 110.0, LIMITS, login_required=True) is None
    assert overdue(clock, 110.1, LIMITS, login_required=True) == (
        "login_timeout", "not authenticated within the login timeout (10 s)"
    )  # fmt: skip
    assert overdue(clock, 1000.0, LIMITS, login_required=False) is None
    clock.authenticated = True
    assert overdue(clock, 1000.0, LIMITS, login_required=True) is None


def test_a_frame_has_its_timeout_plus_a_second_per_mib_once_its_first_byte_came() -> None:
    clock = Clock(opened_s=0.0, authenticated=True, frame_since_s=50.0, frame_bytes=20 * 1024 * 1024)
    assert overdue(clock, 79.9, LIMITS, login_required=True) is None  # 10 s + 20 s for 20 MiB
    late = overdue(clock, 80.1, LIMITS, login_required=True)
    assert late is not None and late[0] == "frame_timeout"
    dribbled = Clock(opened_s=0.0, authenticated=True, frame_since_s=50.0, frame_bytes=0)  # size unknown yet
    assert overdue(dribbled, 60.1, LIMITS, login_required=True) is not None


def test_an_idle_connection_is_cut_at_the_idle_deadline_and_not_while_it_is_busy() -> None:
    waiting = Clock(opened_s=0.0, authenticated=True, idle_since_s=10.0)
    assert overdue(waiting, 610.0, LIMITS, login_required=False) is None
    assert overdue(waiting, 610.1, LIMITS, login_required=False) == (
        "idle_timeout", "no request within the idle timeout (600 s)"
    )  # fmt: skip
    busy = Clock(opened_s=0.0, authenticated=True)  # answering, not waiting for a request
    assert overdue(busy, 10_000.0, LIMITS, login_required=False) is None


def test_admission_bounds_the_node_one_address_and_those_not_authenticated() -> None:
    assert admission(LIMITS, True, 9, 3, {"a": 3}, "a") is None
    full = admission(LIMITS, True, 10, 0, {}, "b")
    assert full is not None and full.kind == "connections" and full.evict is None
    mine = admission(LIMITS, True, 5, 4, {}, "a")
    assert mine is not None and mine.kind == "per_address" and mine.evict is None
    assert admission(LIMITS, False, 9, 3, {}, "a") is None  # no unauthenticated cap without login


def test_at_the_node_wide_bound_without_login_a_newcomer_takes_from_the_address_holding_most() -> None:
    holders = {"a": 7, "b": 3}
    taken = admission(LIMITS, False, 10, 0, {}, "c", holders)
    assert taken is not None and taken.kind == "connections" and taken.evict == "a"
    assert admission(LIMITS, False, 10, 6, {}, "b", {"a": 7, "b": 6}) == Refusal(
        "connections", "10 connections are open (at most 10)", None
    ), "no address takes from one holding no more than itself would"
    with_login = admission(LIMITS, True, 10, 0, {}, "c", holders)
    assert with_login is not None and with_login.evict is None, "with login and none waiting: refused"
    waiting = admission(LIMITS, True, 10, 0, {"a": 3, "b": 1}, "c", holders)
    assert waiting is not None and waiting.evict == "a", "with login, one not logged in yet gives way"


def test_by_default_no_address_is_bounded_below_the_node() -> None:
    """Kafka leaves max.connections.per.ip unbounded; a client's test suite opens hundreds from one
    machine."""
    limits = Limits()
    assert limits.connections_per_address_max == limits.connections_max
    assert admission(limits, False, limits.connections_max - 1, limits.connections_max - 1, {}, "a") is None


@pytest.mark.parametrize(
    ("waiting", "address", "evict"),
    [
        ({"a": 4, "b": 2}, "c", "a"),  # a newcomer from elsewhere takes the oldest of the biggest holder
        ({"a": 4, "b": 2}, "b", "a"),  # 4 > 2 + 1
        ({"a": 3, "b": 3}, "b", None),  # no one holds more than its fair share: refused
        ({"a": 3, "b": 2, "c": 1}, "a", None),  # the biggest holder cannot take from itself
    ],
)
def test_full_unauthenticated_slots_give_way_to_a_newcomer_from_another_address(
    waiting: dict[str, int], address: str, evict: str | None
) -> None:
    refusal = admission(LIMITS, True, 6, waiting.get(address, 0), waiting, address)
    assert refusal == Refusal("unauthenticated", "6 connections are not authenticated yet (at most 6)", evict)


def test_bad_limits_are_refused_naming_the_limit() -> None:
    with pytest.raises(ValueError, match="login_timeout_s 0"):
        Limits(login_timeout_s=0)
    with pytest.raises(ValueError, match="connections_per_address_max 0"):
        Limits(connections_per_address_max=0)


def test_a_connection_is_cut_once_its_user_token_or_password_is_gone() -> None:
    now_ms = [1_000]
    security = Security(require_auth=True, clock_ms=lambda: now_ms[0])
    credential = make_credential("SCRAM-SHA-256", "first", 4096)
    users = {"ann": (credential,)}
    by_password = Session(user="ann", credentials=(credential,))
    assert security.credential_gone(by_password, users, {}, {}) is None
    assert security.credential_gone(Session(), {}, {}, {}) is None  # anonymous: nothing to re-check
    changed = {"ann": (make_credential("SCRAM-SHA-256", "second", 4096),)}
    assert security.credential_gone(by_password, changed, {}, {}) == "the password of 'ann' changed"
    assert security.credential_gone(by_password, {}, {}, {}) == "user 'ann' was deleted"

    token = ApiToken("0123456789abcdef", "ann", b"h" * 32, "", 0, 2_000)
    by_token = Session(user="ann", token_id=token.token_id)
    assert (
        security.credential_gone(by_token, changed, {token.token_id: token}, {}) is None
    )  # password irrelevant
    assert (
        security.credential_gone(by_token, users, {}, {}) == "the token 0123456789abcdef of 'ann' was revoked"
    )
    now_ms[0] = 2_000
    assert security.credential_gone(by_token, users, {token.token_id: token}, {}) == (
        "the token 0123456789abcdef of 'ann' expired"
    )  # fmt: skip
