"""The driver's round ticks exactly the cores that need it: one made active at once, one whose timed duty is
due, the groups the transport names; never an idle one before its time, never one that was removed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

import pytest
from waiting import wait_for

from raftlog.consensus.driver import Driver
from raftlog.consensus.liveness import Liveness


class FakeCore:
    """What the driver uses of a RaftCore: doTick, needs_tick, next_timer, on_activity, serving, urgent,
    ticked_first, _poller, liveness, read_stall_s, defer_sync, sync_deferred, acknowledges and
    finish_sync."""

    def __init__(self, driver: Driver, name: str, timer_in_s: float = 3600.0, routine: bool = True) -> None:
        self._poller = driver.poller
        self.node_id = name
        self.timer_in_s = timer_in_s
        self.routine = routine  # a heartbeat (True) or an election deadline (False)
        self.on_activity: Callable[[], None] | None = None
        self.ticks: list[float] = []
        self.pending_work = 0  # ticks still wanted right after this one (needs_tick)
        self.quiet = False  # an idle group's replica: no idle ticks, only its own rare timer
        self.ticked = threading.Event()
        self.liveness: Liveness | None = None
        self.read_stall_s = 0.375
        self.serving = True  # a leader, or a follower connected to its leader (False: electing)
        self.urgent = False  # a write waits on its next tick (RaftCore.urgent)
        self.ticked_first = False  # the controller's replica: the head of every round it is ready in
        self.defer_sync = False  # set by the driver (RaftCore.defer_sync)
        self.sync_deferred = False  # its last tick left a sync for finish_sync
        self.syncs = False  # this fake's ticks leave a sync (a journal append) when deferring
        self.acknowledges = False  # acknowledgements wait for that sync (a follower's append)
        self.log: list[str] | None = None  # where the ticks and syncs of the fakes of a test go, in order

    def doTick(self, time_to_wait: float) -> None:
        self.ticks.append(time.monotonic())
        if self.pending_work:
            self.pending_work -= 1
        self.sync_deferred = self.defer_sync and self.syncs
        if self.log is not None:
            self.log.append(f"tick {self.node_id}")
        self.ticked.set()

    def finish_sync(self) -> None:
        assert self.sync_deferred, f"{self.node_id}: finish_sync without a deferred sync"
        self.sync_deferred = False
        if self.log is not None:
            self.log.append(f"sync {self.node_id}")

    def needs_tick(self) -> bool:
        return self.pending_work > 0

    def next_timer(self) -> tuple[float, bool]:
        return time.monotonic() + self.timer_in_s, self.routine


@pytest.fixture
def driver() -> Iterator[Driver]:
    driver = Driver(name="schedule-test", idle_tick_ms=60_000, poll_max_ms=1000)
    driver.start()
    yield driver
    driver.stop()


def add(driver: Driver, core: FakeCore, group_id: str | None = None) -> None:
    driver.add(core, group_id=group_id)  # type: ignore[arg-type]  # a stand-in for RaftCore
    assert core.ticked.wait(5), f"{core.node_id}: not ticked once added"
    core.ticked.clear()


def test_an_active_core_is_ticked_at_once(driver: Driver) -> None:
    core = FakeCore(driver, "active")  # its timer is an hour away
    add(driver, core)
    assert core.on_activity is not None
    core.on_activity()
    assert core.ticked.wait(5), "an active core waited for its timer"


def test_a_core_due_by_its_timer_is_ticked(driver: Driver) -> None:
    core = FakeCore(driver, "timed", timer_in_s=0.3)
    add(driver, core)
    assert core.ticked.wait(5), "a core whose timer fell due was not ticked"
    core.timer_in_s = 3600.0
    ticks = len(core.ticks)
    time.sleep(0.5)  # a negative window: rounds go by, the idle core is not ticked in them
    assert len(core.ticks) <= ticks + 1, "an idle core is ticked on every round"


def test_a_quiet_core_gets_no_idle_ticks_only_its_own_timer() -> None:
    driver = Driver(name="quiet-test", idle_tick_ms=100, poll_max_ms=50)
    driver.start()
    try:
        busy, quiet = FakeCore(driver, "idle-but-awake"), FakeCore(driver, "quiet")
        quiet.quiet = True
        add(driver, busy)
        add(driver, quiet)
        paced = len(busy.ticks) + 4
        # an idle core that is not quiet gets a tick per idle_tick_ms: four of them since quiet came in,
        # the rounds in which the quiet one would have had its idle ticks too
        wait_for(lambda: len(busy.ticks) >= paced, "four idle ticks of the core not quiet", every_s=0.01)
        assert len(quiet.ticks) == 1, f"a quiet core was ticked by the idle pace: {quiet.ticks}"
        quiet.timer_in_s = 0.2  # its own rare tick
        assert quiet.on_activity is not None
        quiet.on_activity()  # woken (a proposal, a message): ticked at once, then at its timer
        wait_for(lambda: len(quiet.ticks) >= 3, "the woken core ticked, then at its timer", every_s=0.01)
    finally:
        driver.stop()


def test_left_over_work_is_ticked_in_the_next_rounds(driver: Driver) -> None:
    core = FakeCore(driver, "busy")
    add(driver, core)
    ticks = len(core.ticks)
    core.pending_work = 3
    assert core.on_activity is not None
    core.on_activity()
    wait_for(lambda: len(core.ticks) >= ticks + 3, "three ticks for the left-over work", every_s=0.01)
    assert core.pending_work == 0


def test_a_removed_core_is_never_ticked(driver: Driver) -> None:
    core = FakeCore(driver, "removed", timer_in_s=0.2)
    add(driver, core)
    activity = core.on_activity
    assert activity is not None
    driver.remove(core)
    past_due = time.monotonic() + 0.5  # its timed tick was due within 0.3 s (0.2 s rounded up to 0.1 s)
    ticks = len(core.ticks)
    activity()  # a proposal racing the removal
    keeper = FakeCore(driver, "keeper", timer_in_s=0.05)
    add(driver, keeper)  # keeps rounds going past the removed core's due time
    wait_for(lambda: keeper.ticks[-1] > past_due, "rounds past the removed core's due time", every_s=0.01)
    assert len(core.ticks) == ticks, "a removed core was ticked"


def test_inbound_groups_are_ticked_and_only_they() -> None:
    pending: set[str] = set()
    lock = threading.Lock()

    def take_ready_groups() -> set[str]:
        with lock:
            ready = set(pending)
            pending.clear()
            return ready

    driver = Driver(name="inbound-test", idle_tick_ms=60_000, poll_max_ms=20)
    driver.watch_inbound(take_ready_groups, check_interval_ms=5)
    driver.start()
    try:
        cores = [FakeCore(driver, f"g{i}") for i in range(200)]
        for i, core in enumerate(cores):
            add(driver, core, group_id=f"g{i}")
        before = [len(core.ticks) for core in cores]
        with lock:
            pending.add("g7")
        assert cores[7].ticked.wait(5), "a group with inbound messages was not ticked"
        time.sleep(0.2)  # a negative window: rounds go by without ticking the idle cores
        after = [len(core.ticks) for core in cores]
        ticked = [i for i in range(len(cores)) if after[i] != before[i]]
        assert ticked == [7], f"rounds ticked idle cores too: {ticked}"
    finally:
        driver.stop()


@pytest.fixture
def grid_driver() -> Iterator[Driver]:
    """A driver on a 400 ms timer grid (a node's), idle ticks out of the way."""
    driver = Driver(name="grid-test", idle_tick_ms=60_000, poll_max_ms=1000, timer_grid_ms=400)
    driver.start()
    yield driver
    driver.stop()


def timed_cores(driver: Driver, timers_s: list[float], routine: bool, ticks: int) -> list[FakeCore]:
    """Cores with these timed duties, each ticked ``ticks`` times; their timers are then put far away."""
    cores = [FakeCore(driver, f"g{i}", timer_in_s=t, routine=routine) for i, t in enumerate(timers_s)]
    for core in cores:
        add(driver, core)
    wait_for(lambda: all(len(c.ticks) >= ticks for c in cores), f"{ticks} ticks of every core", every_s=0.01)
    for core in cores:
        core.timer_in_s = 3600.0
    return cores


def test_timed_ticks_are_rounded_up_to_the_timer_grid(grid_driver: Driver) -> None:
    cores = timed_cores(
        grid_driver, [0.3 + 0.02 * i for i in range(4)], routine=True, ticks=3
    )  # due over 60 ms
    for core in cores:
        timed = core.ticks[1:3]
        # each timed tick right after a step of the 400 ms grid (a 100 ms grid would put 3 in 4 elsewhere)
        assert all(t % 0.4 < 0.095 for t in timed), core.ticks
        # due 300-360 ms after the previous tick: rounded up, never earlier
        gaps = [later - earlier for earlier, later in pairwise(core.ticks[:3])]
        assert all(0.3 <= gap < 0.85 for gap in gaps), core.ticks


def test_election_deadlines_keep_their_spread_instead_of_the_timer_grid(grid_driver: Driver) -> None:
    expected = [0.3, 0.35, 0.4, 0.45]
    cores = timed_cores(grid_driver, expected, routine=False, ticks=2)
    for core, expected_s in zip(cores, expected, strict=True):
        # fired when due (at most the 10 ms deadline grid and scheduling late), not at a 400 ms step
        gap = core.ticks[1] - core.ticks[0]
        assert expected_s <= gap < expected_s + 0.09, (expected_s, core.ticks)


def test_a_config_whose_heartbeats_rounded_to_the_grid_miss_the_election_timeout_is_refused() -> None:
    from raftlog.consensus.config import CoreConfig

    assert CoreConfig.for_node().heartbeat_interval_ms == 400
    CoreConfig.for_node().to_syncobj_conf()
    with pytest.raises(ValueError, match="timer_grid_ms"):
        CoreConfig(heartbeat_period_ms=300, timer_grid_ms=600).to_syncobj_conf()  # 600 x 3 >= 1500


class SlowCore(FakeCore):
    def doTick(self, time_to_wait: float) -> None:
        time.sleep(0.005)
        super().doTick(time_to_wait)


def test_a_round_with_many_ready_cores_is_cut_short_so_other_work_runs_in_between(driver: Driver) -> None:
    cores = [SlowCore(driver, f"slow{i}") for i in range(60)]  # 60 x 5 ms: 300 ms of ticks
    for core in cores:
        add(driver, core)
    ticked_before_call: list[int] = []
    for core in cores:
        assert core.on_activity is not None
        core.on_activity()  # all ready in the same round
    done = driver.submit(lambda: ticked_before_call.append(sum(len(c.ticks) > 1 for c in cores)))
    done.result(timeout=5)
    wait_for(lambda: all(len(c.ticks) >= 2 for c in cores), "every ready core ticked", every_s=0.01)
    assert ticked_before_call[0] < len(cores), "one round ticked every ready core before anything else ran"
    assert driver.rounds_cut >= 1
    firsts = sorted(cores, key=lambda c: c.ticks[1])
    assert all(len(c.ticks) == 2 for c in firsts), "a core was ticked twice while others waited"


def test_a_serving_group_waits_behind_no_queue_of_elections_and_the_elections_still_advance(
    driver: Driver,
) -> None:
    """A node stopped: the groups it led elect anew on a survivor, each tick an fsync, and the driver
    carries what a round did not reach into the next; then a produce reaches each group with a live
    leader. Those serving cores are not queued behind the carried elections (in plain order they came
    after all of them); the electing cores still get half of each round's time, so none waits for the serving
    ones to be done."""
    electing = [SlowCore(driver, f"electing{i}") for i in range(60)]  # 60 x 5 ms: several rounds
    serving = [SlowCore(driver, f"serving{i}") for i in range(20)]
    for core in electing + serving:
        add(driver, core)
    for core in electing:
        core.serving = False
    cut = driver.rounds_cut
    for core in electing:
        assert core.on_activity is not None
        core.on_activity()  # the storm: every election ready at once
    wait_for(lambda: driver.rounds_cut > cut, "a round cut short, carrying elections", every_s=0.001)
    for core in serving:
        assert core.on_activity is not None
        core.on_activity()  # a produce on each serving group, while elections are carried
    everyone = electing + serving
    wait_for(lambda: all(len(c.ticks) >= 2 for c in everyone), "every ready core ticked", every_s=0.01)
    ticked = [c.node_id for c in sorted(everyone, key=lambda c: c.ticks[1])]
    last_serving = max(ticked.index(c.node_id) for c in serving)
    electing_untouched = sum(ticked.index(c.node_id) > last_serving for c in electing)
    assert electing_untouched > 0, f"the serving cores waited for every election: {ticked}"
    # from the round the serving cores joined, the two kinds alternate: about as many elections ticked
    # among the serving ones as serving cores, not none
    # from the round the serving cores joined, the elections go on among them: how many depends on how
    # long each tick really took (the round shares its time, ``RoundOrder``; with given costs the share
    # is exact, tested there), so what is checked here is that they did not stand still
    joined = min(ticked.index(c.node_id) for c in serving)
    electing_among = sum(joined < ticked.index(c.node_id) < last_serving for c in electing)
    assert electing_among >= 1, f"the elections stood still for the serving cores: {ticked}"


class OrderCore:
    def __init__(self, name: str, serving: bool, urgent: bool = False) -> None:
        self.name, self.serving, self.urgent = name, serving, urgent


def given(order: Any, costs: dict[str, float] | None = None) -> list[str]:
    """The names ``order`` gives, each core taking ``costs[name]`` seconds (default 1) to tick."""
    names = []
    while (core := order.next()) is not None:
        names.append(core.name)
        order.took((costs or {}).get(core.name, 1.0))
    return names


def test_a_round_takes_the_first_cores_then_shares_its_time_between_the_fresh_serving_and_the_rest() -> None:
    from raftlog.consensus.driver import RoundOrder

    carried = [OrderCore("c1", True), OrderCore("c2", False), OrderCore("c3", True)]  # carried: the rest
    fresh = {OrderCore("s1", True), OrderCore("e1", False)}
    controller = OrderCore("controller", False)
    # equal costs: one for one, each queue in its order, the fresh electing core after the carried
    assert given(RoundOrder([controller], carried, fresh)) == ["controller", "s1", "c1", "c2", "c3", "e1"]
    assert given(RoundOrder([], carried[:2], set())) == ["c1", "c2"]


def test_cheap_serving_ticks_go_as_many_as_fit_in_one_costly_election_tick() -> None:
    """An election's tick fsyncs a term and a vote (10 ms on a slow disk); a serving tick with its sync on a
    sync thread costs a tenth of a millisecond. Sharing time, the serving ticks do not each wait for an
    election's fsync, as they did alternating one for one; the elections still get half the time."""
    from raftlog.consensus.driver import RoundOrder

    electing = [OrderCore(f"e{i}", False) for i in range(10)]
    serving = {OrderCore(f"s{i}", True) for i in range(200)}
    costs = {core.name: 0.010 for core in electing} | {core.name: 0.0001 for core in serving}
    names = given(RoundOrder([], electing, serving), costs)
    assert names.index("e1") > 100, f"serving ticks waited for each election's fsync: {names[:20]}"
    last_serving = max(names.index(core.name) for core in serving)
    assert sum(names.index(e.name) < last_serving for e in electing) >= 1, "the elections stood still"
    order = RoundOrder([], electing, serving)
    given(order, costs)
    assert order.spent == pytest.approx([0.0, 0.02, 0.1])  # no write waited; serving, electing
    assert order.left() == []


def carried_catch_up(driver: Driver) -> list[SlowCore]:
    """60 serving cores of 5 ms each (300 ms, several rounds) made ready at once, as a returning node's
    catch-up wakes them; returns once a round was cut short, carrying the rest."""
    catching_up = [SlowCore(driver, f"catching-up{i}") for i in range(60)]
    for core in catching_up:
        add(driver, core)
    cut = driver.rounds_cut
    for core in catching_up:
        assert core.on_activity is not None
        core.on_activity()
    wait_for(lambda: driver.rounds_cut > cut, "a round cut short, carrying the catch-up", every_s=0.001)
    return catching_up


def test_after_a_reconnect_woke_every_group_a_produce_waits_behind_none_of_them(driver: Driver) -> None:
    """A node came back: every group leading a replica on it woke at once to send it what it missed, all of
    them serving, a tick each with a read of the journal; the driver carries them from round to round.
    A produce on another group then is ticked in the next round's first places, not after the queue."""
    producing = SlowCore(driver, "producing")
    add(driver, producing)
    catching_up = carried_catch_up(driver)
    assert producing.on_activity is not None
    producing.on_activity()
    everyone = [*catching_up, producing]
    wait_for(lambda: all(len(c.ticks) >= 2 for c in everyone), "every ready core ticked", every_s=0.01)
    later = sum(c.ticks[1] > producing.ticks[1] for c in catching_up)
    assert later > 0, "the produce waited for the whole catch-up"


def test_the_controllers_core_is_ticked_ahead_of_a_storm_and_of_every_fresh_core(driver: Driver) -> None:
    """A node came back under thousands of partitions: their groups' catch-up fills the rounds, and a
    produce's group is as "serving" as every one of them. The controller's replica (``ticked_first``)
    made ready with such fresh cores is ticked at the head of the next round: its followers keep hearing
    its leader however long the storm (in CI they did not, and granted a restarted node's pre-vote)."""
    fresh = [SlowCore(driver, f"fresh{i}") for i in range(20)]
    controller = SlowCore(driver, "controller")
    controller.ticked_first = True
    for core in [*fresh, controller]:
        add(driver, core)
    catching_up = carried_catch_up(driver)

    def ready_together() -> None:  # on the driver thread, between two rounds: one round takes them all
        for core in [*fresh, controller]:
            assert core.on_activity is not None
            core.on_activity()

    driver.call(ready_together)
    everyone = [*catching_up, *fresh, controller]
    wait_for(lambda: all(len(c.ticks) >= 2 for c in everyone), "every ready core ticked", every_s=0.01)
    assert controller.ticks[1] < min(c.ticks[1] for c in fresh), "a fresh core went ahead of the controller"
    later = sum(c.ticks[1] > controller.ticks[1] for c in catching_up)
    assert later > 0, "the controller waited for the whole catch-up"


def test_a_carried_serving_core_made_ready_again_joins_the_fresh_serving_ones_and_is_given_once() -> None:
    """A node came back: the other nodes' leaders all woke to catch it up, more than a round ticks, and a
    produce's group was carried among them. Its next produce (or acknowledgement) makes it ready again:
    it leaves the carried for the fresh serving queue instead of waiting for its place. A carried core
    ready again that does not serve (an election) keeps its place among the carried."""
    from raftlog.consensus.driver import RoundOrder

    probe, electing = OrderCore("probe", True), OrderCore("electing", False)
    carried = [OrderCore(f"catch-up{i}", True) for i in range(50)] + [probe, electing]
    names = given(RoundOrder([], carried, {probe, electing}))
    assert names.index("probe") == 0, names[:5]
    assert names.count("probe") == 1 and names.count("electing") == 1
    assert names.index("electing") > names.index("catch-up49"), "the electing core lost its place"


def test_a_cut_rounds_cores_left_over_go_on_one_for_one() -> None:
    from raftlog.consensus.driver import RoundOrder

    order = RoundOrder([], [OrderCore("c1", False), OrderCore("c2", False)], {OrderCore("s1", True)})
    assert order.next().name == "s1"  # type: ignore[union-attr]
    order.took(1.0)
    assert [c.name for c in order.left()] == ["c1", "c2"]
    order = RoundOrder(
        [], [OrderCore("c1", False), OrderCore("c2", False)], {OrderCore(f"s{i}", True) for i in range(3)}
    )
    left = order.left()
    assert [c.serving for c in left] == [True, False, True, False, True], [c.name for c in left]
    assert [c.name for c in left if not c.serving] == ["c1", "c2"]


def test_a_core_a_write_waits_on_heads_the_round_among_a_thousand_fresh_serving_ones() -> None:
    """A node came back under thousands of partitions: every group leading a replica there is ready again
    each round to catch it up, all of them serving, fresh in no order but the set's. A produce's leader
    with the proposal queued, and its follower with the entries arrived, each head the next round
    instead of waiting for a place among them (on CI's machine, one produce waited 10 s, the rest 2 s).
    An urgent core carried from a cut round heads it too."""
    from raftlog.consensus.driver import RoundOrder

    catching_up = {OrderCore(f"catch-up{i}", True) for i in range(1000)}
    leader, follower = OrderCore("leader", True, urgent=True), OrderCore("follower", True, urgent=True)
    names = given(RoundOrder([], [], catching_up | {leader, follower}))
    assert sorted(names[:3:2]) == ["follower", "leader"], names[:5]  # one for one with the catch-up
    assert len(names) == 1002 and len(set(names)) == 1002
    carried = [OrderCore(f"carried{i}", False) for i in range(10)] + [leader]
    names = given(RoundOrder([], carried, catching_up))
    assert names[0] == "leader", names[:5]
    assert names.count("leader") == 1


def test_writes_never_starve_the_serving_or_the_electing_cores_each_gets_a_third() -> None:
    """However many writes wait, the catch-up (heartbeats that keep followers from standing for election)
    and the elections each still get a third of the round's time."""
    from raftlog.consensus.driver import RoundOrder

    writes = {OrderCore(f"w{i}", True, urgent=True) for i in range(300)}
    serving = {OrderCore(f"s{i}", True) for i in range(300)}
    electing = [OrderCore(f"e{i}", False) for i in range(300)]
    order = RoundOrder([], electing, writes | serving)
    names = []
    while len(names) < 90 and (core := order.next()) is not None:
        names.append(core.name)
        order.took(0.001)
    assert [sum(n[0] == kind for n in names) for kind in "wse"] == [30, 30, 30], names[:12]
    assert order.spent == pytest.approx([0.03, 0.03, 0.03])
    left = order.left()
    assert len(left) == 810 and [c.name[0] for c in left[:6]] == ["w", "s", "e", "w", "s", "e"]


def test_a_round_ticks_every_ready_core_before_their_syncs_and_a_followers_sync_goes_first() -> None:
    """Two groups ready in one round, each appending to its journal: neither's sends and answers wait for
    the other's fsync (the syncs run after every tick of the round), and the follower's sync, which a
    leader on another node waits for, runs before the leader's own."""
    driver = Driver(name="two-phase-test", idle_tick_ms=60_000, poll_max_ms=1000)
    log: list[str] = []
    leader, follower = FakeCore(driver, "leader"), FakeCore(driver, "follower")
    for core in (leader, follower):
        core.syncs, core.log = True, log
    follower.acknowledges = True
    driver.add(leader)  # type: ignore[arg-type]  # a stand-in for RaftCore
    driver.add(follower)  # type: ignore[arg-type]
    assert leader.defer_sync and follower.defer_sync, "the driver did not ask its cores to defer syncs"
    driver.start()
    try:
        assert leader.ticked.wait(5) and follower.ticked.wait(5)
        deadline = time.monotonic() + 5
        while len(log) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        driver.stop()
    assert sorted(log[:2]) == ["tick follower", "tick leader"], f"a sync ran between the round's ticks: {log}"
    assert log[2:4] == ["sync follower", "sync leader"], f"syncs not after the ticks, follower first: {log}"
