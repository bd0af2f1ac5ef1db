"""What a logged-in user may hold (``partitions.security.holds``), without a loop or a socket: the
per-user cap, the super users' reserve and who gives way to a login (a fair share each when the room is
full), the at-cap idle timeout, and the budget of request bytes with its per-holder share, its reserves,
its turns and the room made for a holder below its share."""

from __future__ import annotations

import asyncio

import pytest

from partitions.security.holds import (
    BEFORE_LOGIN,
    CONNECTIONS_PER_USER_MAX_DEFAULT,
    ORDINARY,
    REQUEST_BYTES_BEFORE_LOGIN_RESERVE_DEFAULT,
    REQUEST_BYTES_MAX_DEFAULT,
    REQUEST_BYTES_PER_USER_MAX_DEFAULT,
    REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT,
    SUPER_USER,
    SUPER_USER_RESERVE_DEFAULT,
    ConnectionVerdict,
    RequestBytes,
    arrival_overdue,
    idle_at_cap,
    login_admission,
)

MiB = 1024 * 1024
ACTIVE = {"m1": 5.0, "m2": 1.0, "m3": 3.0, "e1": 2.0, "a1": 0.0}  # when each was last active


def admit(user: str, held: dict[str, list[str]]) -> ConnectionVerdict | None:
    return login_admission(user, frozenset({"admin"}), held, 10, 4, 2, ACTIVE.get)


def test_a_user_past_its_cap_is_refused_and_a_super_user_never() -> None:
    held = {"mallory": ["m1", "m2", "m3", "m4"]}
    refused = admit("mallory", held)
    assert refused == ConnectionVerdict("per_user", "user 'mallory' holds 4 connections (at most 4 per user)")
    assert admit("eve", held) is None
    assert admit("admin", {"admin": ["a1"] * 20, **held}) is None


def test_ordinary_users_leave_the_reserve_and_a_login_takes_the_least_recently_active() -> None:
    held = {"mallory": ["m1", "m2", "m3", "m4"], "eve": ["e1", "e2", "e3", "e4"], "admin": ["a1"]}
    verdict = admit("bob", held)  # 8 of 10 held by ordinary users: the 2 left are the super users'
    assert verdict is not None and verdict.kind == "reserved" and verdict.evict == "m2"
    even = {"mallory": ["m1", "m2", "m3"], "eve": ["e1", "e2", "e3"], "bob": ["b1", "b2"]}
    refused = admit("bob", even)  # a share is 8 // 3 = 2: bob holds his
    assert refused is not None and refused.evict is None and "a fair share 2 each" in refused.why


def test_a_user_over_its_share_loses_a_busy_connection_to_a_login_below_its_share() -> None:
    busy = {"mallory": ["m1", "m2", "m3", "m4"], "eve": ["e2", "e3", "e4", "e5"]}
    never_idle = {"m1": 5.0, "m2": 1.0, "m3": 3.0, "m4": 4.0, "e2": 0.5}.get  # a request of each in flight
    verdict = login_admission("bob", frozenset({"admin"}), busy, 10, 4, 2, never_idle)
    assert verdict is not None and verdict.evict == "m2", "its least recently active, busy or not"
    at_share = {"mallory": ["m1", "m2", "m3", "m4", "m5"], "eve": ["e1"], "bob": ["b1", "b2"]}
    refused = login_admission("bob", frozenset(), at_share, 10, 6, 2, never_idle)  # a share: 8 // 3 = 2
    assert refused is not None and refused.evict is None, "a user at its share takes no one's connection"
    being_cut = {"m2": None, "m1": None, "m3": None, "m4": None}  # each closed already: not chosen twice
    assert login_admission("bob", frozenset(), busy, 10, 4, 2, lambda c: being_cut.get(c, 9.0)).evict is None


def test_with_the_defaults_two_users_holding_490_busy_connections_each_let_a_third_in() -> None:
    room = 1000 - SUPER_USER_RESERVE_DEFAULT  # --kafka-connections-max's default
    assert room <= 2 * CONNECTIONS_PER_USER_MAX_DEFAULT, "two users below their cap fill the room"
    held = {"mallory": [f"m{i}" for i in range(490)], "eve": [f"e{i}" for i in range(490)]}
    active = {connection: float(index) for index, connection in enumerate([*held["mallory"], *held["eve"]])}
    verdict = login_admission(
        "bob", frozenset({"admin"}), held, 1000, CONNECTIONS_PER_USER_MAX_DEFAULT, SUPER_USER_RESERVE_DEFAULT,
        active.get,
    )  # fmt: skip
    assert verdict is not None and verdict.evict == "m0", verdict  # the least recently active of the first


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


def test_a_give_back_in_the_turn_a_waiting_request_was_cancelled_grants_it_nothing_and_goes_on() -> None:
    """A waiting request cancelled (its client gone, its handler's timeout) stays queued until its task
    runs again; a give_back in between must pass it by. It tried to grant it and raised InvalidStateError
    from the give_back, answering the request that gave back 500 (seen in a whole run of the suite)."""

    async def scenario() -> None:
        budget = RequestBytes(100, 100)
        await budget.take("User:a", 80)
        waiting = asyncio.ensure_future(budget.take("User:b", 40))
        after = asyncio.ensure_future(budget.take("User:c", 30))
        await asyncio.sleep(0)  # both reach take() and wait: one loop turn, not a time
        waiting.cancel()  # its future is cancelled now, its task resumes only at the next turn
        budget.give_back("User:a", 80)  # in the same turn
        await after  # the next one waiting was granted instead
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert budget.held == 30 and budget.holding("User:b") == 0

    asyncio.run(scenario())


def test_empty_bodies_of_one_holder_hold_nothing_and_give_back_nothing() -> None:
    budget = RequestBytes(total_max=100, per_holder_max=10)
    assert budget.try_take("address:127.0.0.1", 0) and budget.try_take("address:127.0.0.1", 0)
    budget.give_back("address:127.0.0.1", 0)
    budget.give_back("address:127.0.0.1", 0)  # two empty POSTs of one caller answered: no KeyError
    assert budget.held == 0 and budget.holding("address:127.0.0.1") == 0


def _kinds(holder: str) -> str:
    if holder == "User:admin":
        return SUPER_USER
    return BEFORE_LOGIN if holder.startswith("address:") else ORDINARY


def test_super_users_and_frames_before_login_have_their_own_reserves() -> None:
    budget = RequestBytes(100, 60, super_user_reserve=10, before_login_reserve=10, kind_of=_kinds)
    assert budget.room(ORDINARY) == 80
    assert budget.try_take("User:a", 60) and budget.try_take("User:b", 20)  # ordinary users' room: full
    assert not budget.try_take("User:c", 1)
    assert budget.try_take("User:admin", 10), "the admin takes its reserve"
    assert budget.try_take("address:10.0.0.1", 4) and budget.try_take("address:10.0.0.2", 6)
    assert not budget.try_take("address:10.0.0.3", 1), "a login's frames take only their own reserve"
    assert not budget.try_take("User:admin", 1) and budget.held == 100
    budget.give_back("User:b", 20)
    assert budget.try_take("User:admin", 15), "the admin takes ordinary users' room left too"
    assert not budget.try_take("User:c", 6), "and what it holds of it is not left to them"
    assert budget.try_take("User:c", 5)


def test_a_holder_with_many_waiting_requests_takes_its_turn_with_the_others() -> None:
    async def scenario() -> list[str]:
        budget, order = RequestBytes(100, 100), []
        await budget.take("User:x", 100)

        async def one(holder: str, index: int) -> None:
            await budget.take(holder, 10)
            order.append(f"{holder[5:]}{index}")

        waiting = [asyncio.ensure_future(one("User:a", i)) for i in range(5)]
        await asyncio.sleep(0)  # a's five wait first
        waiting.append(asyncio.ensure_future(one("User:b", 0)))
        await asyncio.sleep(0)
        for _ in range(6):  # room for one request at a time
            budget.give_back("User:x", 10)
            await asyncio.sleep(0)
        await asyncio.gather(*waiting)
        return order

    assert asyncio.run(scenario()) == ["a0", "b0", "a1", "a2", "a3", "a4"]


def test_a_holder_below_its_share_has_room_made_by_cutting_the_newest_arrival_of_the_one_holding_most() -> (
    None
):
    async def scenario() -> None:
        budget = RequestBytes(300, 100)
        cut: list[str] = []
        for holder, sizes in (("User:a", (60, 40)), ("User:b", (100,)), ("User:c", (90,))):
            for index, size in enumerate(sizes):
                await budget.take(holder, size)
                budget.arriving(holder, size, lambda why, name=f"{holder}#{index}": cut.append(name))
        assert budget.held == 290 and not cut, "no one waits: nothing is cut"
        waiting = asyncio.ensure_future(budget.take("User:d", 20))  # a fair share is 300 // 4 = 75
        await asyncio.sleep(0)
        assert cut == ["User:b#0"], "the newest arrival of the holder holding most above its share"
        assert not waiting.done() and budget.cut_total == 1
        budget.give_back("User:b", 100)  # its door closes it
        await waiting
        assert budget.holding("User:d") == 20
        greedy = asyncio.ensure_future(budget.take("User:c", 100))  # above its share: it waits, cuts no one
        await asyncio.sleep(0)
        assert cut == ["User:b#0"] and not greedy.done()
        greedy.cancel()

    asyncio.run(scenario())


def test_with_the_defaults_three_users_100_mib_prefixes_keep_neither_the_admin_nor_a_login_waiting() -> None:
    budget = RequestBytes(
        REQUEST_BYTES_MAX_DEFAULT, REQUEST_BYTES_PER_USER_MAX_DEFAULT,
        REQUEST_BYTES_SUPER_USER_RESERVE_DEFAULT, REQUEST_BYTES_BEFORE_LOGIN_RESERVE_DEFAULT, _kinds,
    )  # fmt: skip
    taken = [budget.try_take(user, 100 * MiB) for user in ("User:a", "User:b", "User:c")]
    assert taken == [True, True, False], "ordinary users' room (224 MiB) takes two"
    assert budget.try_take("User:c", budget.room(ORDINARY) - 200 * MiB)  # the third fills it to the byte
    assert not budget.try_take("User:d", 1)
    assert budget.try_take("User:admin", 64 * 1024), "the admin's Metadata goes in at once"
    assert budget.try_take("address:10.0.0.9", 512 * 1024), "so does a login's largest frame"


def test_a_request_whose_bytes_stop_loses_its_room_after_the_grace_whatever_its_size() -> None:
    grace_s, rate = 10.0, MiB
    assert not arrival_overdue(100 * MiB, 0, grace_s, grace_s, rate)
    assert arrival_overdue(100 * MiB, 0, grace_s + 0.01, grace_s, rate), "not at 10 s + 100 s as before"
    assert not arrival_overdue(100 * MiB, 50 * MiB, grace_s + 50, grace_s, rate), "coming at the rate: kept"
    assert arrival_overdue(100 * MiB, 50 * MiB, grace_s + 51, grace_s, rate), "then stopped: cut"
    assert not arrival_overdue(MiB, None, grace_s + 0.99, grace_s, rate), "not known before whole: the end"
    assert arrival_overdue(MiB, None, grace_s + 1.01, grace_s, rate)
