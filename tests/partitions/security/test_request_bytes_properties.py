"""``RequestBytes`` under any interleaving of takes, give-backs, arrivals and cancellations (hypothesis):
what it counts is what was taken and not given back, a kind's pool never passes its room but for a
request alone in it, a waiting request that fits is never left waiting (the turns make no one wait for
nothing), and once every holder gave its bytes back every waiter has been served."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from partitions.security.holds import BEFORE_LOGIN, ORDINARY, SUPER_USER, RequestBytes, holder_kinds

HOLDERS = ("User:a", "User:b", "User:c", "User:admin", "address:10.0.0.1", "address:10.0.0.2")
KINDS = holder_kinds({"admin"}, login_required=True)

actions = st.sampled_from(("take", "give_back", "arrive", "cancel"))
steps = st.lists(st.tuples(actions, st.sampled_from(HOLDERS), st.integers(1, 70)), max_size=60)


def _check(budget: RequestBytes, taken: dict[str, list[int]]) -> None:
    assert budget.held == sum(sum(sizes) for sizes in taken.values())
    for holder in HOLDERS:
        assert budget.holding(holder) == sum(taken.get(holder, ()))
    of_kind = {kind: [size for h, sizes in taken.items() if KINDS(h) == kind for size in sizes]
               for kind in (ORDINARY, SUPER_USER, BEFORE_LOGIN)}  # fmt: skip
    largest = max((size for sizes in taken.values() for size in sizes), default=0)
    assert budget.held <= budget.total_max + largest, "the budget, and at most one request let in alone"
    for kind in (ORDINARY, BEFORE_LOGIN):  # past their room only a request alone in it
        assert sum(of_kind[kind]) <= budget.room(kind) or len(of_kind[kind]) == 1, (kind, of_kind[kind])
    for holder, queue in budget._waiting.items():
        assert not any(budget.fits(holder, waiter.size) for waiter in queue), "a waiter that fits waits"


@settings(max_examples=300, deadline=None)
@given(steps)
def test_what_is_counted_is_what_is_held_and_no_one_waits_for_nothing(
    script: list[tuple[str, str, int]],
) -> None:
    async def run() -> None:
        budget = RequestBytes(200, 80, super_user_reserve=30, before_login_reserve=20, kind_of=KINDS)
        taken: dict[str, list[int]] = {}
        waiting: list[tuple[str, int, asyncio.Task[None]]] = []
        cut: list[str] = []

        async def take(holder: str, size: int) -> None:
            await budget.take(holder, size)
            taken.setdefault(holder, []).append(size)

        for action, holder, size in script:
            if action == "take":
                waiting.append((holder, size, asyncio.ensure_future(take(holder, size))))
            elif action == "give_back" and taken.get(holder):
                budget.give_back(holder, taken[holder].pop(0))
            elif action == "arrive" and taken.get(holder):
                budget.arriving(holder, taken[holder][-1], cut.append)
            elif action == "cancel" and waiting:
                waiting.pop(size % len(waiting))[2].cancel()
            for _ in range(3):
                await asyncio.sleep(0)  # the granted waiters run on
            waiting = [w for w in waiting if not w[2].done()]
            _check(budget, taken)
        for _ in range(len(script) + 1):  # everyone gives back, again as waiters get in: all are served
            for holder, sizes in list(taken.items()):
                while sizes:
                    budget.give_back(holder, sizes.pop(0))
            for _ in range(3):
                await asyncio.sleep(0)
            _check(budget, taken)
        assert all(w[2].done() for w in waiting), "a waiter left waiting with nothing held"
        assert not budget._waiting and budget.held == sum(map(sum, taken.values()))

    asyncio.run(run())
