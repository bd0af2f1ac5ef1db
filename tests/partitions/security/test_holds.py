"""What a logged-in user may hold (``partitions.security.holds``), without a loop or a socket: the
per-user cap, the super users' reserve and who gives way to a login, the at-cap idle timeout, and the
budget of request bytes with its per-holder share."""

from __future__ import annotations

import asyncio

import pytest

from partitions.security.holds import ConnectionVerdict, RequestBytes, idle_at_cap, login_admission

IDLE = {"m1": 5.0, "m2": 1.0, "m3": None, "e1": 2.0, "a1": 0.0}  # when each went idle (None: busy)


def admit(user: str, held: dict[str, list[str]]) -> ConnectionVerdict | None:
    return login_admission(user, frozenset({"admin"}), held, 10, 4, 2, IDLE.get)


def test_a_user_past_its_cap_is_refused_and_a_super_user_never() -> None:
    held = {"mallory": ["m1", "m2", "m3", "m4"]}
    refused = admit("mallory", held)
    assert refused == ConnectionVerdict("per_user", "user 'mallory' holds 4 connections (at most 4 per user)")
    assert admit("eve", held) is None
    assert admit("admin", {"admin": ["a1"] * 20, **held}) is None


def test_ordinary_users_leave_the_reserve_and_a_login_takes_the_least_recently_active_idle() -> None:
    held = {"mallory": ["m1", "m2", "m3", "m4"], "eve": ["e1", "e2", "e3", "e4"], "admin": ["a1"]}
    verdict = admit("bob", held)  # 8 of 10 held by ordinary users: the 2 left are the super users'
    assert verdict is not None and verdict.kind == "reserved" and verdict.evict == "m2"
    busy = {"mallory": ["m3", "m3", "m3", "m3"], "eve": ["e2", "e3", "e4", "e5"]}
    refused = admit("bob", busy)  # nothing idle to take: refused
    assert refused is not None and refused.kind == "reserved" and refused.evict is None
    even = {"mallory": ["m1", "m2", "m3"], "eve": ["e1", "e2", "e3"], "bob": ["b1", "b2"]}
    assert admit("bob", even).evict is None  # type: ignore[union-attr]  # no one holds more than bob would


def test_a_user_at_its_cap_loses_its_idle_connections_until_the_timeout_after_it_left_the_cap() -> None:
    pressed: dict[str, float] = {}
    held = {"mallory": ["m1", "m2", "m3", "m4"], "eve": ["e1"], "admin": ["a1"] * 4}
    idle = {"m1": 0.0, "m2": 8.0, "m3": None, "m4": 9.5, "e1": 0.0, "a1": 0.0}.get
    assert idle_at_cap(held, frozenset({"admin"}), 4, 5.0, idle, 10.0, pressed) == ["m1"]
    held["mallory"].remove("m1")  # below its cap now, still pressed for 5 s
    assert idle_at_cap(held, frozenset({"admin"}), 4, 5.0, idle, 14.0, pressed) == ["m2"]
    assert idle_at_cap(held, frozenset({"admin"}), 4, 5.0, idle, 16.0, pressed) == []  # no longer


def test_request_bytes_bound_the_listener_and_each_holder_and_a_large_request_goes_alone() -> None:
    budget = RequestBytes(100, 60)
    assert budget.try_take("User:a", 50) and not budget.try_take("User:a", 20)  # a's share: 60
    assert budget.try_take("User:b", 50) and not budget.try_take("User:c", 1)  # the listener's: 100
    budget.give_back("User:a", 50)
    budget.give_back("User:b", 50)
    assert budget.held == 0 and budget.try_take("User:c", 500)  # larger than both: alone
    assert not budget.try_take("User:d", 1)
    with pytest.raises(RuntimeError):
        budget.give_back("User:d", 1)


def test_take_waits_for_room_and_is_woken_by_a_give_back() -> None:
    async def scenario() -> list[str]:
        budget, order = RequestBytes(100, 100), []
        await budget.take("User:a", 80)

        async def second() -> None:
            await budget.take("User:b", 40)
            order.append("b in")

        waiting = asyncio.ensure_future(second())
        await asyncio.sleep(0)  # the second caller reaches take() and waits: one loop turn, not a time
        order.append("a out")
        budget.give_back("User:a", 80)
        await waiting
        assert budget.waited_total == 1 and budget.held == 40
        return order

    assert asyncio.run(scenario()) == ["a out", "b in"]


def test_empty_bodies_of_one_holder_hold_nothing_and_give_back_nothing() -> None:
    budget = RequestBytes(total_max=100, per_holder_max=10)
    assert budget.try_take("address:127.0.0.1", 0) and budget.try_take("address:127.0.0.1", 0)
    budget.give_back("address:127.0.0.1", 0)
    budget.give_back("address:127.0.0.1", 0)  # two empty POSTs of one caller answered: no KeyError
    assert budget.held == 0 and budget.holding("address:127.0.0.1") == 0
