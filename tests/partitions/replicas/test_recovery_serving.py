"""The leader replication throttle (``partitions.replicas.recovery_serving``) on a fake clock: answers to
peers' recoveries of listed replicas carry at most a second's worth, are held while the node's throttle is
in debt (up to a second) and sent without batches past that, all throttled partitions sharing one bucket;
the others are untouched; a change of the rate or its removal applies at the next answer."""

from __future__ import annotations

import pytest

from partitions.replicas.recovery_serving import DELAY_MAX_S, Grant, RecoveryServing


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def serving(rates: dict[tuple[str, int], int | None], clock: Clock) -> RecoveryServing:
    return RecoveryServing(
        lambda topic, partition: rates.get((topic, partition)), lambda: clock.now, clock.sleep
    )


async def test_an_answer_not_listed_is_not_throttled() -> None:
    clock = Clock()
    throttle = serving({}, clock)
    grant = await throttle.admit("t", 0, 4 << 20)
    assert grant == Grant(4 << 20, False)
    throttle.served(grant, 4 << 20)
    assert throttle.metrics() == {
        "recovery_served_throttled_bytes": 0,
        "recovery_served_throttled_seconds": 0,
        "recovery_served_throttled_refused": 0,
    }
    assert clock.sleeps == []


async def test_throttled_answers_share_the_nodes_leader_rate() -> None:
    clock = Clock()
    rate = 1000
    throttle = serving({("t", 0): rate, ("u", 3): rate}, clock)
    served = 0
    for topic, partition in [("t", 0), ("u", 3)] * 10:
        grant = await throttle.admit(topic, partition, 4 << 20)
        assert grant.throttled and 0 < grant.max_bytes <= rate, "at most one second's worth"
        throttle.served(grant, grant.max_bytes)
        served += grant.max_bytes
    assert throttle.throttled_bytes == served == 20 * rate
    # one bucket for both partitions: every byte past the first second's waited for at the rate (the
    # last answer's before the next one)
    assert throttle.bucket is not None
    owed_s = throttle.bucket.take(0, clock.now)
    assert owed_s == pytest.approx(1.0)
    assert (
        throttle.delayed_s
        == pytest.approx(sum(clock.sleeps))
        == pytest.approx((served - rate) / rate - owed_s)
    )
    assert throttle.refused == 0


async def test_past_the_longest_delay_the_answer_carries_nothing() -> None:
    clock = Clock()
    throttle = serving({("t", 0): 100}, clock)
    grant = await throttle.admit("t", 0, 1 << 20)
    throttle.served(grant, 1000)  # a batch larger than a second's worth goes whole: 9 s of debt
    assert await throttle.admit("t", 0, 1 << 20) == Grant(0, True)
    assert clock.sleeps == [] and throttle.refused == 1
    clock.now += 9 - DELAY_MAX_S / 2
    again = await throttle.admit("t", 0, 1 << 20)
    assert again.max_bytes == 100 and clock.sleeps == [pytest.approx(DELAY_MAX_S / 2)]


async def test_a_change_of_the_rate_applies_to_the_next_answer_and_a_removal_lifts_it() -> None:
    clock = Clock()
    rates: dict[tuple[str, int], int | None] = {("t", 0): 100}
    throttle = serving(rates, clock)
    throttle.served(await throttle.admit("t", 0, 1 << 20), 600)  # 5 s of debt at 100/s
    assert (await throttle.admit("t", 0, 1 << 20)).max_bytes == 0
    rates[("t", 0)] = 1000  # kafka-configs raises it: 500 of debt is half a second
    assert (await throttle.admit("t", 0, 1 << 20)).max_bytes == 1000
    assert clock.sleeps == [pytest.approx(0.5)]
    throttle.served(Grant(1000, True), 50_000)  # deep in debt again
    del rates[("t", 0)]  # --verify removes the throttle
    assert await throttle.admit("t", 0, 1 << 20) == Grant(1 << 20, False)
    assert len(clock.sleeps) == 1
