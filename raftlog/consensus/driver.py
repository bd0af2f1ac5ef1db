"""One thread drives many Raft cores.

Every RaftCore registered here shares the driver's pysyncobj poller (so one ``poll`` waits on the sockets
of all groups) and is ticked by the driver thread only:

* at once when it has work (a message arrived, a proposal was submitted, acknowledgements are held,
  entries are committed but not applied, a follower is owed more entries);
* at its next timed duty (``RaftCore.next_timer``: a leader's heartbeat, a follower's election deadline);
* and at least every ``idle_tick_ms``, for the rest (stepping down without a quorum, reconnects,
  compaction, tick callbacks), except a quiet core (its group idle: ``RaftCore.quiet``), which is ticked
  only when something wakes it or at its rare timed tick.

A quiet group costs nothing between those ticks. An idle follower of a group that is not quiet costs a
tick per heartbeat it receives, an idle leader a tick per heartbeat period plus those its followers'
replies cause, and the thread sleeps in ``poll`` until the earliest
group is due or something wakes it. A round touches only the cores it ticks: those marked ready (by
``on_activity``, by the transport's inbound groups, or because work was left after their last tick) and
those whose timed tick, kept in a heap, is due; the number of cores driven does not enter its cost.
Everything pysyncobj calls back (apply, proposal callbacks) runs on this thread; ``bridge.py`` hands
results to asyncio.

First: a core configured ``ticked_first`` (the controller) is ticked at the head of every round it is
ready in, before the order of ``RoundOrder``; a round is cut (``ROUND_BUDGET_S``) only after it.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import heapq
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pysyncobj.poller import POLL_EVENT_TYPE, createPoller

from raftlog.consensus.core import RaftCore, poll_transport
from raftlog.consensus.defaults import SYNC_THREAD_MIN_BYTES_DEFAULT
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.journal_files import SyncJob
from raftlog.consensus.liveness import Liveness
from raftlog.errors import InvariantViolation
from raftlog.histogram import Histogram

logger = logging.getLogger(__name__)

FailureHandler = Callable[[RaftCore, BaseException], None]
TIMER_GRID_MS_DEFAULT = 100
HUB_POLL_MAX_S = 0.1  # a driven hub's timers (pings, dials, handshake deadlines) run at least this often
DEADLINE_GRID_S = 0.01  # election deadlines: fine enough to keep their random spread
# A round stops ticking after this long and reads its sockets again; the cores it did not reach go first in
# the next round (sharing the thread's time with the fresh serving ones: ``RoundOrder``). Thousands of groups
# ready at once (every group of a node woken by a reconnect, a storm of elections) took seconds in one
# round, in which nothing was read or sent: peers closed the silent connection (no ping for 3 s), which
# woke every group again.
ROUND_BUDGET_S = 0.05
STALL_TELL_INTERVAL_S = 10.0  # a stall of the thread (``Liveness``) is logged at most this often
T = TypeVar("T")
_REMOVED: Any = object()


# every round of every driver of this process (its calls, receiving, ticking the due cores and flushing,
# up to its poll): a long round holds back every group the driver drives
ROUND_SECONDS = Histogram()


class Driver:
    def __init__(
        self,
        name: str = "raft-driver",
        idle_tick_ms: int = 1000,
        poll_max_ms: int = 1000,
        timer_grid_ms: int = TIMER_GRID_MS_DEFAULT,
        sync_threads: int = 0,
        sync_thread_min_bytes: int = SYNC_THREAD_MIN_BYTES_DEFAULT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``timer_grid_ms``: routine timed ticks (heartbeats, reconnects, idle ticks) are rounded up to this
        grid, so that groups whose duties fall close together tick in one round and their messages to a
        peer go in one frame. A grid at least as long as the heartbeat period sends the heartbeats of all
        groups together (``CoreConfig.timer_grid_ms`` says what the cores were configured for). Election
        deadlines are rounded to ``DEADLINE_GRID_S`` only.

        ``sync_threads``: threads that run the cores' journal syncs (write + fdatasync), so this thread
        goes on ticking other groups, and receiving, while a group's sync waits for the disk; the syncs
        of different groups then also overlap. 0: each tick syncs its own journal at its end. Only syncs
        writing at least ``sync_thread_min_bytes`` go to a thread: a small one is over in about the time
        the hand-off and the wake-up that follows it cost, in CPU, the scarcer resource (measured:
        single-record produce spent 11-18% more servers' CPU per request with every sync on a thread,
        for no better p99; batched 1 KiB produce gained 11% with them; docs/decisions/0009).

        ``clock``: monotonic seconds, the one time source of this driver's schedule and of every core it
        drives (``ReplicaGroup.open`` gives it to them)."""
        if not 0 < poll_max_ms <= idle_tick_ms:
            raise ValueError(f"need 0 < poll_max_ms ({poll_max_ms}) <= idle_tick_ms ({idle_tick_ms})")
        if not 0 < timer_grid_ms <= idle_tick_ms:
            raise ValueError(f"need 0 < timer_grid_ms ({timer_grid_ms}) <= idle_tick_ms ({idle_tick_ms})")
        self._timer_grid_s = timer_grid_ms / 1000
        self.clock = clock
        self.name = name
        self._idle_tick_s = idle_tick_ms / 1000
        self._poll_max_s = poll_max_ms / 1000
        self.poller: Any = createPoller("auto")
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._wake_pending = False
        self._pipe_closed = False
        self.poller.subscribe(self._wake_read, self._on_wake, POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)
        self._lock = threading.Lock()
        self._cores: dict[RaftCore, FailureHandler | None] = {}
        self._ready: set[RaftCore] = set()  # (lock) tick in the next round
        self._first: set[RaftCore] = set()  # (lock) ``core.ticked_first``: head of every round they are in
        self._carried: list[RaftCore] = []  # driver thread: ready cores a round left for the next, in order
        # Driver thread: each core's next timed tick, and a heap of (due, sequence, core) holding it; an
        # entry whose due time is no longer the core's (ticked earlier, or removed) is skipped when popped.
        self._due: dict[RaftCore, float] = {}
        self._timers: list[tuple[float, int, RaftCore]] = []
        self._timer_sequence = 0
        self._cores_by_group: dict[str, set[RaftCore]] = {}
        self._group_of: dict[RaftCore, str] = {}  # the reverse: removing a core looks up only its group
        self._take_ready_groups: Callable[[], set[str]] | None = None
        self._calls: list[Callable[[], None]] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._inbound_wake_fd: int | None = None
        self._hub: MuxHub | None = None  # a hub whose I/O this thread runs (drive_hub)
        if sync_threads < 0 or sync_thread_min_bytes < 0:
            raise ValueError(f"need sync_threads ({sync_threads}) and sync_thread_min_bytes >= 0")
        self._sync_thread_min_bytes = sync_thread_min_bytes
        self._syncer = (
            concurrent.futures.ThreadPoolExecutor(sync_threads, thread_name_prefix=f"{name}-sync")
            if sync_threads
            else None
        )
        # when this thread last stood still (its stalls), which its cores' reads rest on (RaftCore,
        # "Reads"); its stall threshold is the shortest of its cores' ``read_stall_s``
        self.liveness = Liveness(clock())
        self.ticks = 0  # counters for benchmarks
        self.loops = 0
        self.rounds_cut = 0  # rounds that ran out of ROUND_BUDGET_S with cores left over

    # -- any thread ---------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            raise InvariantViolation(f"driver {self.name} started twice")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def add(
        self, core: RaftCore, on_failure: FailureHandler | None = None, group_id: str | None = None
    ) -> None:
        """Drive ``core`` (built with ``poller=driver.poller``); ``on_failure`` runs on the driver thread if
        a tick of this core raises (the core is then dropped). ``group_id`` names the core for
        :meth:`watch_inbound`."""
        if core._poller is not self.poller:
            raise InvariantViolation(f"core {core.node_id} was not built with driver {self.name}'s poller")
        core.on_activity = functools.partial(self._activate, core)
        core.defer_sync = True  # two phases a round: every tick, then their syncs (``_loop``)
        core.liveness = self.liveness
        self.liveness.lower_stall_s(core.read_stall_s)
        if self._hub is not None:
            core.before_sync = self._hub.flush
        if self._syncer is not None:
            core.sync_runner = self._run_sync
            core.sync_runner_min_bytes = self._sync_thread_min_bytes
        with self._lock:
            self._cores[core] = on_failure
            self._ready.add(core)
            if core.ticked_first:
                self._first.add(core)
            if group_id is not None:
                self._cores_by_group.setdefault(group_id, set()).add(core)
                self._group_of[core] = group_id
        self.wake()

    def remove(self, core: RaftCore) -> None:
        with self._lock:
            self._cores.pop(core, None)
            self._ready.discard(core)
            self._first.discard(core)
            group_id = self._group_of.pop(core, None)
            if group_id is not None:
                cores = self._cores_by_group[group_id]
                cores.discard(core)
                if not cores:
                    del self._cores_by_group[group_id]
        core.on_activity = None

    def watch_inbound(
        self,
        take_ready_groups: Callable[[], set[str]],
        check_interval_ms: int = 2,
        wake_fd: int | None = None,
    ) -> None:
        """For a transport that queues inbound messages without waking the driver's poller (MuxHub in
        threaded mode with autoTick=False, e.g. ``driver.watch_inbound(hub.inbox.take_ready,
        wake_fd=hub.inbound_fd())``): the driver asks which groups have inbound messages and ticks them at
        once instead of at their next idle tick. With ``wake_fd`` (readable while messages wait; drained
        by ``take_ready_groups``) the driver sleeps in its poller until then; without it, it checks every
        ``check_interval_ms``. Call before :meth:`start`."""
        if self._thread is not None:
            raise InvariantViolation(f"driver {self.name}: watch_inbound after start")
        if check_interval_ms <= 0:
            raise ValueError(f"check_interval_ms must be positive, got {check_interval_ms}")
        self._take_ready_groups = take_ready_groups
        if wake_fd is None:
            self._poll_max_s = min(self._poll_max_s, check_interval_ms / 1000)
        else:
            self.poller.subscribe(wake_fd, self._on_inbound, POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)
            self._inbound_wake_fd = wake_fd

    def drive_hub(self, hub: MuxHub) -> None:
        """Run ``hub``'s I/O (a MuxHub in polled mode) on this driver's thread: between two rounds the
        thread waits in the hub's own selector (``hub.poll``: one wait, which first writes what the
        ticks queued and then reads what arrived), and :meth:`wake` wakes it there; a core writes its
        queued messages before it fsyncs. No hand-off to an I/O thread per message, and one blocking call
        per round. The cores driven must then talk over the hub only (``MuxTransport``): nothing else
        registered in :attr:`poller` is polled while the hub runs. Call before :meth:`start`, after
        :meth:`watch_inbound` with the hub's ``inbox.take_ready`` (and ``wake_fd=hub.inbound_fd()``, or
        none)."""
        if self._thread is not None:
            raise InvariantViolation(f"driver {self.name}: drive_hub after start")
        wake_fd = self._inbound_wake_fd
        if wake_fd is not None:
            if wake_fd != hub.inbound_fd():
                raise InvariantViolation(
                    f"driver {self.name}: drive_hub with an inbound wake fd ({wake_fd}) not the hub's inbox"
                )
            self.poller.unsubscribe(wake_fd)
            self._inbound_wake_fd = None
        hub.watch_inbox()
        self._hub = hub
        self._poll_max_s = min(self._poll_max_s, HUB_POLL_MAX_S)

    def _on_inbound(self, descriptor: int, event: int) -> None:
        """The transport's wake fd is readable: the next round's ``take_ready_groups`` drains it."""

    def call(self, action: Callable[[], None]) -> None:
        """Run ``action`` on the driver thread before the next round of ticks."""
        with self._lock:
            self._calls.append(action)
        self.wake()

    def submit(self, function: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run ``function`` on the driver thread; its result or exception lands in the returned future.
        Anything that touches the shared poller (building a core binds and registers sockets) goes here,
        so that only the driver thread ever polls or changes what is polled."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(function())
            except BaseException as error:
                future.set_exception(error)

        self.call(run)
        return future

    def _run_sync(self, job: SyncJob, done: Callable[[], None]) -> None:
        """``core.sync_runner``: ``job`` on a sync thread, then ``done`` (which marks the core ready)."""
        if self._syncer is None:
            raise InvariantViolation(f"driver {self.name} has no sync threads")
        job.hand_off(done)
        self._syncer.submit(job.run)

    def _activate(self, core: RaftCore) -> None:
        """``core.on_activity`` (any thread): tick ``core`` in the next round."""
        with self._lock:
            if core not in self._cores:
                return
            self._ready.add(core)
        self.wake()

    def wake(self) -> None:
        if self._wake_pending or self._pipe_closed:
            return
        self._wake_pending = True
        hub = self._hub
        if hub is not None and hub.wake():
            return  # the thread waits in the hub (drive_hub) while the hub runs
        try:
            os.write(self._wake_write, b"x")
        except BlockingIOError:
            logger.debug("driver %s: wake pipe full, a wake-up is already pending", self.name)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise InvariantViolation(f"driver {self.name} did not stop within {timeout_s} s")
        self._pipe_closed = True
        with self._lock:
            for core in self._cores:
                core.on_activity = None
        self.poller.unsubscribe(self._wake_read)
        if self._inbound_wake_fd is not None:
            self.poller.unsubscribe(self._inbound_wake_fd)
            self._inbound_wake_fd = None
        os.close(self._wake_read)
        os.close(self._wake_write)
        if self._syncer is not None:
            self._syncer.shutdown(wait=True)  # a sync still running finishes; its journal waits for it

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    # -- driver thread --------------------------------------------------------------------------------
    def _on_wake(self, descriptor: int, event: int) -> None:
        # Drain first, then re-arm. The other order loses wake-ups: a wake() between re-arming and
        # draining sets _wake_pending and writes a byte that the drain then eats, and every later
        # wake() returns early on _wake_pending, so proposals wait for their group's next timed tick.
        # In this order a wake() between draining and re-arming writes nothing, but the round that
        # follows this poll finds the core in the ready set (added before wake() is called).
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 4096):
                pass
        self._wake_pending = False

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as error:
            logger.critical("driver %s crashed; failing every group it drove", self.name, exc_info=True)
            with self._lock:
                cores = list(self._cores.items())
                self._cores.clear()
            for core, on_failure in cores:
                if on_failure is not None:
                    on_failure(core, error)
            raise

    def _loop(self) -> None:
        liveness = self.liveness
        told_at = -math.inf
        while not self._stopping.is_set():
            self.loops += 1
            started = time.perf_counter()
            stalls, due_at = liveness.stalls, liveness.due_at
            liveness.running(self.clock())
            if liveness.stalls > stalls and liveness.stalled_at - told_at > STALL_TELL_INTERVAL_S:
                told_at = liveness.stalled_at
                logger.info(
                    "driver %s ran %.2f s past its due time (%d stalls): its leaders' reads wait for a new "
                    "confirmation",
                    self.name,
                    liveness.stalled_at - due_at,
                    liveness.stalls,
                )
            with self._lock:
                calls, self._calls = self._calls, []
            for action in calls:
                try:
                    action()
                except Exception:
                    logger.exception("driver %s: a call failed (the driver goes on)", self.name)
            # After the calls: one of them may have removed (and destroyed) a core.
            hub = self._hub
            inbound = self._take_ready_groups() if self._take_ready_groups is not None else ()
            with self._lock:
                ready, self._ready = self._ready, set()
                for group_id in inbound:
                    ready.update(self._cores_by_group.get(group_id, ()))
                firsts = list(self._first)  # (the controller's core, or none)
            now = self.clock()
            self._pop_due(now, ready)
            first = [core for core in firsts if core in ready]
            carried, self._carried = self._carried, []
            ready.difference_update(first)
            order = RoundOrder(first, carried, ready)
            busy = False
            cores = self._cores
            budget_end = now + ROUND_BUDGET_S
            position = 0
            deferred: list[RaftCore] = []
            while (core := order.next()) is not None:
                on_failure = cores.get(core, _REMOVED)
                if on_failure is _REMOVED:
                    continue  # removed by another thread or an earlier tick's failure handler
                began = time.perf_counter()
                self._tick(core, on_failure, now)
                order.took(time.perf_counter() - began)
                if core.sync_deferred:
                    deferred.append(core)
                    if hub is not None:
                        hub.flush()  # its sends leave now, as they did before its sync (``before_sync``)
                elif core.needs_tick() and core in cores:
                    busy = True
                    with self._lock:
                        self._ready.add(core)
                position += 1
                if position % 16 == 0:
                    busy = self._finish_syncs(deferred) or busy
                    deferred = []
                if position % 16 == 0 and self.clock() > budget_end:
                    self._carried = order.left()
                    busy = busy or bool(self._carried)
                    self.rounds_cut += 1
                    break
            busy = self._finish_syncs(deferred) or busy
            if busy:
                wait = 0.0
            else:
                earliest = self._timers[0][0] if self._timers else now + self._poll_max_s
                wait = min(self._poll_max_s, max(0.0, earliest - self.clock()))
            ROUND_SECONDS.observe(time.perf_counter() - started)
            liveness.waiting(self.clock(), wait)
            # The hub writes what the ticks queued, waits, reads what arrived (taken at the top of the
            # next round) and drains a wake(); the flag is cleared after that drain, as _on_wake does.
            if hub is not None and hub.poll(wait):
                self._wake_pending = False
            else:
                poll_transport(self.poller, wait, self.name)

    def _finish_syncs(self, deferred: list[RaftCore]) -> bool:
        """The second phase of a round: the syncs its ticks left (``RaftCore.defer_sync``), in their order,
        each releasing the acknowledgements it makes true and counting the commit it allows; True if a
        core has work left for the next round. Phase one ticked every core first, so no core's sends or
        answers waited for the fsyncs of the cores ticked before it (a follower's append behind its
        node's leader's fsync, a leader's commit behind a follower's, 0.5-1.5 ms each on a busy 2-core
        machine, docs/performance.md); the fsyncs and the CPU are the same. At most 16 ticks are
        deferred before their syncs run, so a round's budget still counts them."""
        busy = False
        cores = self._cores
        deferred.sort(key=lambda core: not core.acknowledges)  # a follower's first: a leader waits on it
        for core in deferred:
            on_failure = cores.get(core, _REMOVED)
            if on_failure is _REMOVED:
                continue  # removed by a later tick's failure handler: it is no longer driven
            try:
                core.finish_sync()
            except Exception as error:
                logger.exception(
                    "driver %s: group replica %s failed; no longer driven", self.name, core.node_id
                )
                self.remove(core)
                self._due.pop(core, None)
                if on_failure is not None:
                    on_failure(core, error)
                continue
            if core.needs_tick() and core in cores:
                busy = True
                with self._lock:
                    self._ready.add(core)
        return busy

    def _pop_due(self, now: float, ready: set[RaftCore]) -> None:
        """Move the cores whose timed tick is due into ``ready``."""
        timers, due_by_core, cores = self._timers, self._due, self._cores
        while timers and timers[0][0] <= now:
            due, _, core = heapq.heappop(timers)
            if due_by_core.get(core) != due:
                continue  # superseded by a later entry for the same core
            del due_by_core[core]
            if core in cores:
                ready.add(core)
        if len(timers) > 2 * len(due_by_core) + 64:  # mostly superseded entries: rebuild
            self._timers = [entry for entry in timers if due_by_core.get(entry[2]) == entry[0]]
            heapq.heapify(self._timers)

    def _schedule(self, core: RaftCore, due: float) -> None:
        if self._due.get(core) == due:
            return  # already queued for that time
        self._due[core] = due
        self._timer_sequence += 1
        heapq.heappush(self._timers, (due, self._timer_sequence, core))

    def _tick(self, core: RaftCore, on_failure: FailureHandler | None, now: float) -> None:
        self.ticks += 1
        try:
            core.doTick(0.0)
        except Exception as error:
            logger.exception("driver %s: group replica %s failed; no longer driven", self.name, core.node_id)
            self.remove(core)
            self._due.pop(core, None)
            if on_failure is not None:
                on_failure(core, error)
            return
        if core not in self._cores:
            self._due.pop(core, None)  # removed while ticking (by a callback it ran)
            return
        # A duty still due after this tick could not be done now (an election with no peer reachable):
        # it is retried at the idle pace rather than on every round. A quiet core (an idle group: see
        # RaftCore, "Quiescence") is left alone until its own rare tick, or until something wakes it.
        idle = now + self._idle_tick_s
        timer, routine = core.next_timer()
        if core.quiet and timer > now:
            due, grid = timer, self._timer_grid_s
        elif timer <= now or timer >= idle:
            due, grid = idle, self._timer_grid_s
        else:
            # Routine duties are rounded up to the timer grid, so those of all groups tick in one round
            # (one wake-up of this thread, one frame per peer); an election deadline only to a fine grid,
            # keeping the randomness that makes split votes rare.
            due, grid = timer, (self._timer_grid_s if routine else DEADLINE_GRID_S)
        self._schedule(core, math.ceil(due / grid) * grid)


class RoundOrder:
    """A round's order: the ``ticked_first`` cores (the controller's), then three queues sharing the
    thread's time equally: the cores a write waits on (``RaftCore.urgent``: entries to acknowledge, or a
    leader's proposals and uncommitted entries), ready since the last round or carried; the other cores
    made ready since the last round (a message, a proposal, a timer) whose groups serve
    (``RaftCore.serving``: a leader, a follower connected to its leader or awaiting its new leader's
    first append); and the rest: the cores carried over from the last round first, then the fresh ones
    standing for election or voting. The next core comes from the queue that has had least of the
    round's time (ties: in that order). A carried core made ready again whose group serves (a message
    came since) leaves its place among the carried for the fresh serving queue.

    Two storms queue hundreds of cores on a node's one driver thread: when a node stops, every group it
    led elects anew on the others (each tick an fsync of a term and a vote); when it comes back, every
    group that leads a replica on it wakes to send it what it missed, and is ready again every round
    while it does. In plain order a produce on a group whose leader never changed waited behind that
    queue on its leader and again on its follower, and timed out at 10 s where an fsync costs 10 ms.
    Alternating one tick for one, a serving core still waited for an election's 10 ms fsync per serving
    core ahead of it: a new leader's first append, acknowledged 3 s late, deposed it again
    (check-quorum). Sharing time, the cheap serving ticks go about as many as fit in one such fsync per
    election ticked. But the catch-up is serving too: a produce's group among a thousand of them waited
    for its place in the set's order, each round again, on both its nodes (2 s a produce, one 10 s on
    CI's machine). Its own queue puts it at the head of the next round. However busy any kind is, each of
    the others still gets a third of every round."""

    __slots__ = ("_first", "_queues", "_side", "spent")

    def __init__(self, first: list[RaftCore], carried: list[RaftCore], ready: set[RaftCore]) -> None:
        """``ready``: the cores made ready since the last round (``carried`` ones among them too)."""
        urgent: collections.deque[RaftCore] = collections.deque()
        serving: collections.deque[RaftCore] = collections.deque()
        rest: collections.deque[RaftCore] = collections.deque()
        placed: set[RaftCore] = set()  # carried cores already in a queue (not placed again from ready)
        for core in carried:
            if core.urgent:
                urgent.append(core)
            elif core not in ready:
                rest.append(core)
            elif not core.serving:
                rest.append(core)  # ready again, not serving: it keeps its place
            else:
                continue  # ready again and serving: placed with the fresh ones below
            placed.add(core)
        for core in ready:
            if core not in placed:
                (urgent if core.urgent else serving if core.serving else rest).append(core)
        self._first = collections.deque(first)
        self._queues = (urgent, serving, rest)
        self.spent = [0.0, 0.0, 0.0]  # seconds of this round each queue's cores took
        self._side = -1  # the queue of the core last given (-1: a first core)

    def next(self) -> RaftCore | None:
        if self._first:
            self._side = -1
            return self._first.popleft()
        queues, spent = self._queues, self.spent
        side = -1
        for index, queue in enumerate(queues):
            if queue and (side < 0 or spent[index] < spent[side]):
                side = index
        if side < 0:
            return None
        self._side = side
        return queues[side].popleft()

    def took(self, seconds: float) -> None:
        """The core last given took ``seconds`` to tick."""
        if self._side >= 0:
            self.spent[self._side] += seconds

    def left(self) -> list[RaftCore]:
        """The cores not given yet, for the next round, whose queue of the rest they head: the queues
        one for one, so that no kind waits there for all of another (an urgent one is placed by its
        state again in the next round)."""
        queues = itertools.zip_longest(*self._queues)
        merged = [core for group in queues for core in group if core is not None]
        return [*self._first, *merged]
