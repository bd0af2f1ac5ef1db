"""Faults: what each one does to the real processes, disks and links, and when it happens.

Pure parts (tested without processes): the schedule of fault windows (:func:`schedule`), partition shapes
as "grudges" (node -> nodes it must not hear from: :func:`halves`, :func:`isolate`, :func:`majorities_ring`,
:func:`bridge`), target choice, the power-loss arithmetic (:func:`durable_sizes`) and bit flips.

What each fault really does (all recorded as nemesis start/stop events with their targets):

- ``kill``: SIGKILL a random set of nodes (one, a minority, a majority or all); stop restarts them from
  their argv with their data.
- ``pause``: SIGSTOP one node, a minority, or the leader of a random partition; stop sends SIGCONT. With
  the queue and compaction workloads (``jepsen.pause_probe``) the start event names the keys each paused
  node led (``led``: term, high watermark) and the stop event, just before SIGCONT, who leads them now
  (``leaders``) and the polls then sent to the paused node for each key a new leader took over
  (``probes``: their processes), answered once it runs again.
- ``partition``: (netns only) blackhole routes inside the namespaces for every cut pair, both ways: random
  halves, the leader of a random partition isolated, a majorities ring (every node sees a majority, no two
  the same one; with 3 nodes that shape does not exist and a bridge is used) or a bridge (two halves
  joined by one node). The harness (on the bridge's address) still reaches every node. Stop deletes them.
- ``delay`` / ``loss``: (netns only) a root qdisc on both ends of the targets' veth: netem delay
  (100 ms +- 50 ms) / netem loss 20 % when the kernel has netem; without netem (this is recorded in the
  event) a tbf rate limit: 256 kbit/s with a 1 s queue (queueing delay under load) for ``delay``, and
  64 kbit/s with a 4 KiB queue (tail drops under load, not random loss) for ``loss``.
- ``power-loss``: SIGKILL the targets, then cut every file in their data dir back to its size at its last
  fsync as traced by ``jepsen.nodeshim`` (files never fsynced go to 0 bytes); stop restarts them. It
  really discards appended bytes that were written but not fsynced. It does not model lost or reordered
  in-place overwrites, torn sectors, or unsynced directory entries (a never-fsynced new file is emptied,
  not removed). Everything on disk when a node starts is taken as durable (kernel writeback while down).
- ``corrupt``: SIGKILL a minority (the set of nodes ever corrupted stays a minority for the whole run,
  since nothing repairs the damage); in each, flip 1-8 random bits of a random segment file
  (``data/<node>/logs/<group>/NNN.log``) or truncate one at a random point; stop restarts them. A node
  that refuses to start on the damage stays down (visible in its log and the events).
- ``clock``: through ``jepsen.nodeshim``, the targets' ``time.time``/``time.time_ns`` jump by +-1..120 s
  (wall clock only; monotonic timers are untouched); stop resets the offset to 0.
- ``disk-full``: (small disks only: each node's data directory on an ext4 of its own, ``jepsen.disks``)
  one node, a minority or (rarely) a majority: a ballast file takes every free block of their disks, and
  is topped up every second while the fault lasts (what the node frees, retention or its remover, and
  what ext4 kept allocated ahead of its files, goes to the ballast too: the disk stays full); stop
  removes it. A power loss leaves the ballast as it is (the harness fsynced it).
- ``node-power-loss``: (lazy file systems only: ``run --fs lazy``, ``jepsen.lazyfs``) SIGKILL one node,
  then drop every write its lazy file system holds unsynced (``lazyfs::clear-cache``: what the page cache
  loses at a power failure, file data and sizes, whatever wrote them, direct I/O included); stop restarts
  it. Directory entries are not lost (the file system does not model them).
- ``hostile-clients``: a process of attackers (``jepsen.hostile``) against every node's doors while the
  window lasts, from addresses of its own: idle and dribbling connections, oversize frames, decompression
  bombs, a flood of the Raft port, bad credentials. Stop ends it (SIGTERM) and records its tally; what
  shows a door that did not hold (a bomb accepted, a 5xx, a connection never cut) goes in the run's notes.
- ``kill-coordinator``: (the group workload's, ``--workload group``; not part of ``all`` elsewhere) SIGKILL
  the node coordinating the workload's consumer group, as its members' clients found it with
  FindCoordinator (a random node when none knows one); stop restarts it.
- ``upgrade``: (not part of ``all``; ``jepsen.upgrade_fault``) stop one node (SIGTERM) and start it on the
  same data on the previous release's code (``run --upgrade-from``, built under ``.releases/``); stop
  stops it again and starts it on this checkout's. Other faults leave the node alone while it lasts.
- ``old-release``: (not part of ``all``; ``jepsen.old_release_fault``, not with ``upgrade``) with
  ``raftlog.version`` raised to 2 before the workload, each node in turn stopped and started on its data
  and command line on the previous release's code, which is below that level, not waited for; the start
  then gathers the proof that it is kept out (the others' health names it, it leads nothing, a leadership
  transfer to it is refused: ``proof`` in the stop event, judged by ``jepsen.old_release_checker``), the
  workers writing on meanwhile; stop starts it on this checkout's code (its ``ready`` event follows).
- ``cluster-power-loss``: (lazy file systems only) every node at once: freeze every running node
  (SIGSTOP), SIGKILL them all, then clear every node's lazy file system, nodes another fault had
  already killed included (their unsynced writes were still in the page cache); stop restarts every
  node that is down.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jepsen import disks, holding, hostile, hostile_budgets, old_release_fault, recovery, upgrade_fault
from jepsen.control import Cluster, ControlError, Network, qdisc_available
from jepsen.fault_shapes import (
    bridge,
    corrupt_node,
    corrupt_targets,
    cut_pairs,
    discard_unsynced,
    halves,
    isolate,
    majorities_ring,
    pick_targets,
    write_baseline,
)
from jepsen.pause_probe import PauseProbe
from jepsen.recorder import Recorder
from jepsen.workload import Deadline, Http
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError

FAULTS = ("kill", "pause", "partition", "delay", "loss", "power-loss", "corrupt", "clock", "disk-full",
          "node-power-loss", "cluster-power-loss", "hostile-clients")  # fmt: skip
GROUP_FAULTS = ("kill-coordinator",)  # need a consumer group (the group workload's)
# need the previous release's code (run --upgrade-from); not part of all
VERSION_FAULTS = ("upgrade", old_release_fault.NAME)
NETWORK_FAULTS = frozenset({"partition", "delay", "loss"})
DISK_FAULTS = frozenset({"disk-full"})  # need each node's data directory on a small disk of its own
LAZY_FAULTS = frozenset({"node-power-loss", "cluster-power-loss"})  # need lazy file systems (--fs lazy)
BALLAST_TOP_UP_S = 1.0
# ``all``: every fault but the lazy file systems' power losses, which do not stack with disk-full (named
# on their own, with --fs lazy)
ALL = tuple(f for f in FAULTS if f not in LAZY_FAULTS)
RESTARTED_FAULTS = frozenset(
    {"kill", "power-loss", "corrupt", "node-power-loss", "cluster-power-loss", "kill-coordinator"}
)
PROCESS_FAULTS = RESTARTED_FAULTS | {"pause", *VERSION_FAULTS}
PARTITION_SHAPES = ("halves", "isolate-leader", "majorities-ring", "bridge")
RESTART_READY_S = 120.0  # how long the harness watches a node it restarted or resumed for its ready: a
# node not ready by then is a failure of its own; how slow a ready one was is the recovery bound's to judge
# (2x its own ready time, jepsen/recovery.py), so this limit decides no verdict a loaded machine can move
READY_POLL_S = 0.1
FILES_SHOWN_MAX = 12


# -- the schedule (pure) ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Window:
    """Faults active from ``start_s`` to ``end_s`` (seconds since the workload started)."""

    start_s: float
    end_s: float
    faults: tuple[str, ...]


def parse_faults(text: str, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The faults ``text`` names; ``all`` is every fault of ``ALL`` and ``extra`` (a workload's own,
    ``GROUP_FAULTS``)."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if names in (("all",),):
        return (*ALL, *extra)
    if names in ((), ("none",)):
        return ()
    aliases = {"power": "power-loss", "skew": "clock", "disk": "disk-full", "node-power": "node-power-loss",
               "cluster-power": "cluster-power-loss"}  # fmt: skip
    resolved = tuple(dict.fromkeys(aliases.get(n, n) for n in names))
    known = (*FAULTS, *GROUP_FAULTS, *VERSION_FAULTS)
    unknown = [n for n in resolved if n not in known]
    if unknown:
        raise ValueError(f"unknown nemesis {unknown}: choose from {', '.join(known)}, all, none")
    return resolved


def schedule(
    faults: Sequence[str],
    time_limit_s: float,
    rng: random.Random,
    *,
    quiet_s: tuple[float, float] = (3.0, 8.0),
    active_s: tuple[float, float] = (5.0, 12.0),
    combine_probability: float = 0.3,
    tail_s: float = 3.0,
) -> list[Window]:
    """Alternate quiet and faulty windows until ``time_limit_s - tail_s``. A window has one fault, or two
    different ones with ``combine_probability``. Windows never overlap and all end before the limit."""
    if time_limit_s <= 0 or quiet_s[0] <= 0 or active_s[0] <= 0:
        raise ValueError("time limit and window lengths must be > 0")
    windows: list[Window] = []
    if not faults:
        return windows
    now = rng.uniform(*quiet_s) / 2
    end_limit = time_limit_s - tail_s
    while True:
        length = rng.uniform(*active_s)
        if now + length > end_limit:
            break
        count = 2 if len(faults) > 1 and rng.random() < combine_probability else 1
        chosen = tuple(sorted(rng.sample(list(faults), count)))
        windows.append(Window(round(now, 3), round(now + length, 3), chosen))
        now += length + rng.uniform(*quiet_s)
    return windows


# -- the nemesis (I/O) ---------------------------------------------------------------------------------


@dataclass
class Active:
    fault: str
    targets: list[str]
    detail: dict[str, Any] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None  # what keeps the fault in place while it lasts (disk-full)
    attackers: hostile.Attackers | None = None  # the hostile clients' process (hostile-clients)
    # hostile-clients: the nodes' request budgets read while the attackers attack, until the event is set
    sampling: tuple[asyncio.Event, asyncio.Task[dict[str, list[Any]]], Http] | None = None


class Nemesis:
    """Applies the schedule to a running cluster and records every start and stop."""

    def __init__(
        self,
        cluster: Cluster,
        network: Network | None,
        recorder: Recorder,
        rng: random.Random,
        topics: Mapping[str, int],
        notes: list[str],
        coordinator: Callable[[], Awaitable[str | None]] | None = None,
        planned_writes_per_s: float = 0.0,
    ) -> None:
        """``coordinator`` finds the node coordinating the workload's consumer group (kill-coordinator);
        ``planned_writes_per_s``, the workload's (``RunConfig.planned_writes_per_s``), what the run's last
        span without faults must hold."""
        self.cluster = cluster
        self.planned_writes_per_s = planned_writes_per_s
        self.coordinator = coordinator
        self.network = network
        self.recorder = recorder
        self.rng = rng
        self.topics = dict(topics)
        self.notes = notes
        self.active: list[Active] = []
        self.netem = network is not None and qdisc_available("netem")
        self.counts: dict[str, int] = {}
        self.restart_failures: list[str] = []
        self.corrupted: set[str] = set()  # nodes whose segment files were ever damaged
        self._attackers_ahead: hostile.Attackers | None = None  # started, waiting for its window
        # the last heal: when it began, and the watches of the nodes it restarted or resumed (each ends
        # with the history time the node reported ready, or None: it exited, or not within RESTART_READY_S)
        self._healed_at: float | None = None
        self._watches: list[asyncio.Task[float | None]] = []
        self._back: list[tuple[str, str, float]] = []  # (node, fault, since) the heal restarted or resumed
        self._restarted_at: dict[str, float] = {}  # the last _restart's nodes, when each started
        self._settled_at: float | None = None  # when the last heal's nodes were all ready (history time)
        self._began = 0.0  # when the fault being started began to be applied (history time)
        self.shift_s = 0.0  # how much later than scheduled the windows came (they wait for recoveries)
        self.probe: PauseProbe | None = None  # what a pause asks around a paused leader (jepsen.pause_probe)
        self._deadline: Deadline | None = None  # the workers' (run's): a fault that waits keeps them writing

    @property
    def node_ids(self) -> list[str]:
        return [n.node_id for n in self.cluster.nodes]

    def usable(self, fault: str) -> bool:
        if fault in GROUP_FAULTS:
            return self.coordinator is not None
        if fault in DISK_FAULTS:
            return bool(self.cluster.small_disks)
        if fault in LAZY_FAULTS:
            return bool(self.cluster.lazy_mounts)
        if fault in VERSION_FAULTS:
            return self.cluster.other is not None
        return self.network is not None or fault not in NETWORK_FAULTS

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    async def _leader(self) -> str | None:
        """The leader of a random partition, asked of any node (GET /v1/partitions/{t}/{p})."""
        topic = self.rng.choice(sorted(self.topics))
        partition = self.rng.randrange(self.topics[topic])
        client = RaftlogClient(
            self.cluster.urls, admin_token=self.cluster.admin_token, timeout_s=2.0, retries=2
        )
        try:
            state = await client.cluster.partition_state(topic, partition)
        except (ClientError, OSError, TimeoutError):
            return None
        finally:
            await client.close()
        leader = state.get("leader")
        return leader if isinstance(leader, str) and leader in self.node_ids else None

    def _busy(self) -> set[str]:
        return {t for a in self.active if a.fault in PROCESS_FAULTS for t in a.targets}

    async def run(
        self,
        windows: Sequence[Window],
        started: float,
        stop: asyncio.Event,
        deadline: Deadline | None = None,
    ) -> None:
        """Follow the schedule (``started``: loop time of second 0) until it ends or ``stop`` is set.

        A window starts only once the cluster recovered from the one before (:meth:`recovered`): on a
        machine slow to restart nodes, the windows left come later, each still after its quiet time, and
        the workers' ``deadline`` moves as much later; so no recovery is cut short by the next fault.
        After the last window the workers go on until a span without faults holds what the workload plans
        (:meth:`_fault_free_end`), measured on a cluster that is up (``jepsen.recovery``)."""
        loop = asyncio.get_running_loop()
        end = deadline.at if deadline is not None else None
        self._deadline = deadline
        try:
            hostile_windows = any("hostile-clients" in window.faults for window in windows)
            if hostile_windows and self.usable("hostile-clients"):
                self._attackers_ahead = self._start_attackers()
            for window in windows:
                if await _sleep_until(loop, started + window.start_s + self.shift_s, stop):
                    return
                if await self.recovered(stop, deadline):
                    return
                self.shift_s = max(self.shift_s, loop.time() - started - window.start_s)
                if deadline is not None and end is not None:
                    deadline.extend(end + self.shift_s)
                for fault in window.faults:
                    await self.start(fault)
                if await _sleep_until(loop, started + window.end_s + self.shift_s, stop):
                    return
                await holding.keep_ahead(deadline, self.heal())
                self._watch_back()
            if not await self.recovered(stop, deadline) and deadline is not None and windows:
                await self._fault_free_end(stop, deadline)  # the last window's recovery, then a quiet span
        finally:
            await self.heal()
            for watch in self._watches:  # an interrupted run's: the runner's heal waits for every node
                watch.cancel()
            await asyncio.gather(*self._watches, return_exceptions=True)
            if self._attackers_ahead is not None:  # started for a window that did not come
                self._attackers_ahead.process.kill()
                await asyncio.to_thread(self._attackers_ahead.process.wait)
                self._attackers_ahead = None

    async def start(self, fault: str) -> None:
        if not self.usable(fault):
            needs = (
                "a consumer group (--workload group)" if fault in GROUP_FAULTS
                else "disks of their own" if fault in DISK_FAULTS
                else "lazy file systems (run --fs lazy)" if fault in LAZY_FAULTS
                else "the previous release's code (run --upgrade-from)" if fault in VERSION_FAULTS
                else "network namespaces (loopback mode)"
            )  # fmt: skip
            # an invariant: jepsen.fault_tools refuses a run naming a fault it cannot run, before it starts
            raise ControlError(f"{fault}: unavailable without {needs}; never dropped from a run")
        handler: dict[str, Callable[[], Awaitable[Active | None]]] = {
            "kill": self._kill,
            "pause": self._pause,
            "partition": self._partition,
            "delay": lambda: self._shape("delay"),
            "loss": lambda: self._shape("loss"),
            "power-loss": self._power_loss,
            "corrupt": self._corrupt,
            "clock": self._clock,
            "disk-full": self._disk_full,
            "node-power-loss": self._node_power_loss,
            "cluster-power-loss": self._cluster_power_loss,
            "hostile-clients": self._hostile_clients,
            "kill-coordinator": self._kill_coordinator,
            "upgrade": self._upgrade,
            old_release_fault.NAME: self._old_release,
        }
        self._began = self.recorder.now()
        try:
            active = await handler[fault]()
        except ControlError as exc:
            self._note(f"{fault}: could not start: {exc}")
            return
        if active is None:
            return
        self.active.append(active)
        self.counts[fault] = self.counts.get(fault, 0) + 1

    def _started(self, fault: str, value: dict[str, Any]) -> None:
        """The fault's start event, with ``began``: when the nemesis began to apply it (a kill's start is
        written once its targets are dead, a power loss's once their unsynced writes are gone)."""
        self.recorder.nemesis("start", fault, value, began=self._began)

    def _free(self, mode: str) -> list[str]:
        free = [n for n in self.node_ids if n not in self._busy() and self.cluster.running(n)]
        if not free:
            return []
        wanted = pick_targets(self.node_ids, self.rng, mode=mode)
        chosen = [n for n in wanted if n in free]
        return chosen or [self.rng.choice(free)]

    async def _kill(self) -> Active | None:
        mode = self.rng.choices(["one", "minority", "majority", "all"], [4, 3, 2, 1])[0]
        targets = self._free(mode)
        if not targets:
            return None
        self._started("kill", {"nodes": targets, "mode": mode})
        for node in targets:
            await asyncio.to_thread(self.cluster.kill, node)
        return Active("kill", targets)

    async def _kill_coordinator(self) -> Active | None:
        found = await self.coordinator() if self.coordinator is not None else None
        busy = self._busy()
        if found is not None and (found in busy or not self.cluster.running(found)):
            return None  # another fault holds it: nothing to kill now
        targets = [found] if found is not None else self._free("one")
        if not targets:
            return None
        detail = {"nodes": targets, "coordinator": found is not None}
        self._started("kill-coordinator", detail)
        for node in targets:
            await asyncio.to_thread(self.cluster.kill, node)
        return Active("kill-coordinator", targets)

    async def _upgrade(self) -> Active | None:
        targets = self._free("one")
        if not targets:
            return None
        self.recorder.nemesis(
            "start", "upgrade", {"nodes": targets, **upgrade_fault.way(self.cluster, targets[0])}
        )
        started = await upgrade_fault.switch(self.cluster, targets[0])
        return Active("upgrade", targets, {"started": started})

    async def _old_release(self) -> Active | None:
        free = [n for n in self.node_ids if n not in self._busy() and self.cluster.running(n)]
        node = old_release_fault.in_turn(self.node_ids, free, self.counts.get(old_release_fault.NAME, 0))
        if node is None:
            return None
        started = await old_release_fault.start(self.cluster, node)
        self._started(old_release_fault.NAME, {"nodes": [node], **started})
        proving = asyncio.create_task(old_release_fault.prove(self.cluster, node, self.topics))
        await holding.hold(asyncio.Event(), self._deadline, proving.done)  # the workers write on meanwhile
        return Active(old_release_fault.NAME, [node], {"proof": proving.result()})

    async def _pause(self) -> Active | None:
        mode = self.rng.choice(["one", "minority", "leader"])
        if mode == "leader":
            leader = await self._leader()
            usable = leader is not None and leader not in self._busy() and self.cluster.running(leader)
            targets = [leader] if usable and leader is not None else self._free("one")
        else:
            targets = self._free(mode)
        if not targets:
            return None
        detail: dict[str, Any] = {}
        if self.probe is not None:
            detail["led"] = {node: await self.probe.led(node) for node in targets}
        self._started("pause", {"nodes": targets, "mode": mode, **detail})
        for node in targets:
            self.cluster.pause(node)
        return Active("pause", targets, detail)

    async def _partition(self) -> Active | None:
        network = self.network
        if network is None:
            return None
        shape = self.rng.choice(PARTITION_SHAPES)
        nodes = self.node_ids
        detail: dict[str, Any] = {"shape": shape}
        if shape == "isolate-leader":
            leader = await self._leader()
            if leader is None:
                shape = detail["shape"] = "halves"
                detail["note"] = "no leader known; random halves instead"
                grudge = halves(nodes, self.rng)
            else:
                grudge = isolate(leader, nodes)
                detail["leader"] = leader
        elif shape == "majorities-ring":
            grudge = majorities_ring(nodes, self.rng)
            if len(nodes) < 5:
                detail["note"] = "no majorities ring on fewer than 5 nodes: a bridge"
        elif shape == "bridge":
            grudge = bridge(nodes, self.rng)
        else:
            grudge = halves(nodes, self.rng)
        pairs = cut_pairs(grudge)
        detail["cut"] = {n: sorted(e) for n, e in sorted(grudge.items()) if e}
        self._started("partition", detail)
        specs = {n.node_id: n for n in self.cluster.nodes}
        try:
            for a, b in pairs:
                network.cut(specs[a], specs[b])
        except ControlError as exc:
            network.heal_all()
            self.recorder.nemesis("stop", "partition", {"healed": True, "error": str(exc)})
            raise
        return Active("partition", sorted(grudge), detail)

    async def _shape(self, fault: str) -> Active | None:
        network = self.network
        if network is None:
            return None
        if any(a.fault in ("delay", "loss") for a in self.active):
            return None  # one root qdisc per link: do not stack shaping faults
        targets = pick_targets(self.node_ids, self.rng, mode=self.rng.choice(["one", "minority"]))
        if self.netem:
            qdisc = ["netem", "delay", "100ms", "50ms"] if fault == "delay" else ["netem", "loss", "20%"]
        elif fault == "delay":
            qdisc = ["tbf", "rate", "256kbit", "burst", "16kbit", "latency", "1000ms"]
        else:
            qdisc = ["tbf", "rate", "64kbit", "burst", "8kbit", "limit", "4096"]
        detail = {"nodes": targets, "qdisc": " ".join(qdisc)}
        if not self.netem:
            detail["note"] = "kernel has no netem: tbf rate limit instead (queueing delay / tail drops)"
            self._note(
                f"{fault}: netem unavailable in this kernel; approximated with tbf ({' '.join(qdisc)})"
            )
        self._started(fault, detail)
        specs = {n.node_id: n for n in self.cluster.nodes}
        try:
            for node in targets:
                network.shape(specs[node], qdisc)
        except ControlError as exc:
            for node in targets:
                network.unshape(specs[node])
            self.recorder.nemesis("stop", fault, {"nodes": targets, "error": str(exc)})
            raise
        return Active(fault, targets, detail)

    async def _power_loss(self) -> Active | None:
        mode = self.rng.choices(["one", "minority", "all"], [4, 3, 2])[0]
        targets = self._free(mode)
        if not targets:
            return None
        for node in targets:
            self.cluster.pause(node)  # freeze all targets first: one instant of power loss
        cut: dict[str, Any] = {}
        for node in targets:
            await asyncio.to_thread(self.cluster.kill, node)
            files = discard_unsynced(self.cluster.trace_file(node), self.cluster.data_dir(node))
            cut[node] = {"files_cut": len(files), "bytes_discarded": sum(f["from"] - f["to"] for f in files),
                         "files": files[:FILES_SHOWN_MAX]}  # fmt: skip
        self._started("power-loss", {"nodes": targets, "mode": mode, "discarded": cut})
        return Active("power-loss", targets)

    async def _node_power_loss(self) -> Active | None:
        targets = self._free("one")
        if not targets:
            return None
        [node] = targets
        await asyncio.to_thread(self.cluster.kill, node)
        dropped = await self._clear(node)
        self._started("node-power-loss", {"nodes": targets, "dropped": {node: dropped}})
        return Active("node-power-loss", targets)

    async def _clear(self, node: str) -> dict[str, Any]:
        """Clear a dead node's lazy file system; a failure is noted and leaves the node to be restarted."""
        try:
            return dict(await asyncio.to_thread(self.cluster.clear_cache, node))
        except ControlError as exc:
            self._note(f"lazy file system of {node}: clear-cache failed: {exc}")
            return {"error": str(exc)}

    async def _cluster_power_loss(self) -> Active | None:
        if any(a.fault == "cluster-power-loss" for a in self.active):
            return None
        running = [n for n in self.node_ids if self.cluster.running(n)]
        for node in running:
            self.cluster.pause(node)  # freeze them all first: one instant of power loss
        for node in running:
            await asyncio.to_thread(self.cluster.kill, node)
        dropped = {node: await self._clear(node) for node in self.node_ids}
        detail = {"nodes": self.node_ids, "were_running": running, "dropped": dropped}
        self._started("cluster-power-loss", detail)
        return Active("cluster-power-loss", self.node_ids)

    async def _corrupt(self) -> Active | None:
        """Only ever a minority over the whole run: damage that a node's open does not find (inside a
        sealed segment, before its last index entry) is never repaired (what open finds is set aside and
        copied again from the peers), so corrupting a different node later could add up to a majority
        with damaged disks, which no Raft log survives."""
        budget = (len(self.node_ids) - 1) // 2
        candidates = [n for n in self.node_ids if n not in self._busy() and self.cluster.running(n)]
        targets = corrupt_targets(candidates, self.corrupted, budget, self.rng)
        if not targets:
            return None
        self.corrupted.update(targets)
        damage = {}
        for node in targets:
            await asyncio.to_thread(self.cluster.kill, node)
            damage[node] = corrupt_node(self.cluster.data_dir(node), self.rng)
        self._started("corrupt", {"nodes": targets, "damage": damage})
        return Active("corrupt", targets)

    async def _clock(self) -> Active | None:
        targets = pick_targets(self.node_ids, self.rng, mode=self.rng.choice(["one", "minority", "all"]))
        offsets = {n: round(self.rng.choice([-1, 1]) * self.rng.uniform(1, 120), 3) for n in targets}
        self._started("clock", {"offsets_s": offsets, "clock": "time.time (wall) only"})
        for node, offset in offsets.items():
            _write_clock(self.cluster.clock_file(node), offset)
        return Active("clock", targets)

    async def _disk_full(self) -> Active | None:
        if any(a.fault == "disk-full" for a in self.active):
            return None  # one ballast per disk
        mode = self.rng.choices(["one", "minority", "majority"], [4, 3, 1])[0]
        targets = pick_targets(self.node_ids, self.rng, mode=mode)
        ballast = {}
        for node in targets:
            ballast[node] = await asyncio.to_thread(disks.fill, self.cluster.data_dir(node))
        detail = {"nodes": targets, "mode": mode, "ballast_bytes": ballast}
        self._started("disk-full", detail)
        return Active("disk-full", targets, task=asyncio.create_task(self._keep_full(targets)))

    async def _keep_full(self, targets: list[str]) -> None:
        """Top the ballasts up every ``BALLAST_TOP_UP_S`` until cancelled."""
        while True:
            await asyncio.sleep(BALLAST_TOP_UP_S)
            for node in targets:
                try:
                    await asyncio.to_thread(disks.fill, self.cluster.data_dir(node))
                except OSError as exc:
                    self._note(f"disk-full: topping up the ballast of {node} failed: {exc}")

    async def _hostile_clients(self) -> Active | None:
        if any(a.fault == "hostile-clients" for a in self.active):
            return None
        sources = self.network.hostile_sources if self.network is not None else hostile.LOOPBACK_SOURCES
        attackers = self._attackers_ahead or self._start_attackers()
        attackers.go(
            {node: process.pid for node, process in self.cluster.processes.items() if process.poll() is None}
        )
        self._attackers_ahead = self._start_attackers()  # for the next window
        self._started("hostile-clients", {"sources": list(sources), "pid": attackers.pid})
        done, http = asyncio.Event(), Http(self.cluster.urls, random.Random(0))
        urls = {n.node_id: n.http for n in self.cluster.nodes}
        sampling = (done, asyncio.create_task(hostile_budgets.watch(http, urls, done)), http)
        return Active("hostile-clients", [], attackers=attackers, sampling=sampling)

    def _start_attackers(self) -> hostile.Attackers:
        """The hostile clients' process, started ahead of its window and attacking once told to: its start
        takes seconds on a loaded machine (more than a short window)."""
        sources = self.network.hostile_sources if self.network is not None else hostile.LOOPBACK_SOURCES
        return hostile.Attackers.start(
            self.cluster.nodes, sources, self.topics, self.rng.getrandbits(32), self.cluster.admin_token,
            os.path.join(self.cluster.run_dir, "faults"), {}, ahead=True,
        )  # fmt: skip

    async def heal(self) -> None:
        """Stop every active fault (restart killed nodes, resume paused ones, remove cuts and qdiscs)."""
        if self.active:
            self._healed_at, self._watches, self._back = self.recorder.now(), [], []
        while self.active:
            active = self.active.pop()
            await self._stop(active)

    async def recovered(self, stop: asyncio.Event, deadline: Deadline | None = None) -> bool:
        """Wait until the cluster recovered from the last heal: every node it restarted or resumed reported
        ready (or exited, or was not ready within RESTART_READY_S: a note), then a write was acknowledged
        since the heal, or ``recovery.recovery_bound_s`` of the nodes' ready time passed without one (the
        checker judges it slow). Meanwhile ``deadline`` is kept a second ahead, so the workers write on.
        True when ``stop`` was set first."""
        healed_at = self._healed_at
        if healed_at is None:
            return stop.is_set()
        if await holding.hold(stop, deadline, lambda: all(watch.done() for watch in self._watches)):
            return True
        ready = [t for watch in self._watches if (t := watch.result()) is not None]
        all_ready = len(ready) == len(self._watches)
        self._settled_at = max([healed_at, *ready]) if all_ready else None
        due = healed_at + recovery.recovery_bound_s(max([t - healed_at for t in ready], default=0.0))

        def acknowledged() -> bool:
            last = self.recorder.last_ok(recovery.WRITE_FS)
            return (last is not None and last >= healed_at) or self.recorder.now() >= due

        if await holding.hold(stop, deadline, acknowledged):
            return True
        self._healed_at, self._watches = None, []
        return False

    async def _fault_free_end(self, stop: asyncio.Event, deadline: Deadline) -> None:
        """After the last heal settled (every node ready, then ``recovery.SETTLE_S``): a span without faults
        of ``recovery.FAULT_FREE_END_S`` at least, and until it holds the writes the workload plans in that
        time (at most ``recovery.FAULT_FREE_END_MAX_S``)."""
        settled = self._settled_at
        if settled is None:  # a node the heal restarted never reported ready: no span without faults
            return
        begins = settled + recovery.SETTLE_S
        wanted = math.ceil(self.planned_writes_per_s * recovery.FAULT_FREE_END_S)

        def enough() -> bool:
            now = self.recorder.now()
            written = self.recorder.completed(recovery.WRITE_FS, begins)
            done = now >= begins + recovery.FAULT_FREE_END_S and written >= wanted
            return done or now >= begins + recovery.FAULT_FREE_END_MAX_S

        await holding.hold(stop, deadline, enough)

    def _watch_back(self) -> None:
        """Watch each node the heal restarted or resumed until it reports ready (a ``ready`` event)."""
        self._watches = [
            asyncio.create_task(self._ready(node, fault, since))
            for node, fault, since in self._back
            if self.cluster.running(node)
        ]

    async def _ready(self, node: str, fault: str, since: float) -> float | None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + RESTART_READY_S
        while loop.time() < give_up:
            if not self.cluster.running(node):
                return None  # exited: its restart failure is noted
            if await asyncio.to_thread(self.cluster.ready, node):
                now = self.recorder.now()
                value = {"node": node, "since": since, "ready_s": round(now - since, 3)}
                return float(self.recorder.nemesis("ready", fault, value)["time"])
            await asyncio.sleep(READY_POLL_S)
        self._note(f"{node} was not ready within {RESTART_READY_S:.0f} s of its restart or resume")
        return None

    async def _stop(self, active: Active) -> None:
        fault, targets = active.fault, active.targets
        value: dict[str, Any] = {"nodes": targets}
        since = self.recorder.now()
        back: dict[str, float] = {}  # the nodes this stop restarted or resumed, and when
        if fault in RESTARTED_FAULTS:
            value["restarted"] = await self._restart(targets)
            back = {node: at for node, at in self._restarted_at.items() if "pid" in value["restarted"][node]}
        elif fault == "upgrade":
            up = self.cluster.running(targets[0])  # else another fault's restart brings it up
            value.update(await upgrade_fault.switch(self.cluster, targets[0], restart=up), **active.detail)
            back = {targets[0]: since} if up else {}
        elif fault == old_release_fault.NAME:  # back on this checkout; the proof its start gathered
            value.update(await old_release_fault.heal(self.cluster, targets[0]), **active.detail)
            back = {targets[0]: self.recorder.now()}
        elif fault == "pause":
            led = active.detail.get("led", {})
            if self.probe is not None and led:
                asked = {node: await self.probe.before_resume(node, led[node]) for node in targets}
                value["leaders"] = {node: leaders for node, (leaders, _) in asked.items()}
                value["probes"] = {node: processes for node, (_, processes) in asked.items()}
                since = self.recorder.now()  # (asking took time: the nodes come back now)
            for node in targets:
                self.cluster.resume(node)
            back = dict.fromkeys(targets, since)
        elif fault == "partition" and self.network is not None:
            self.network.heal_all()
            value = {"healed": True}
        elif fault in ("delay", "loss") and self.network is not None:
            specs = {n.node_id: n for n in self.cluster.nodes}
            for node in targets:
                self.network.unshape(specs[node])
        elif fault == "clock":
            for node in targets:
                _write_clock(self.cluster.clock_file(node), 0.0)
        elif fault == "disk-full":
            if active.task is not None:
                active.task.cancel()
                await asyncio.gather(active.task, return_exceptions=True)
            value["ballast_removed"] = {n: disks.empty(self.cluster.data_dir(n)) for n in targets}
        elif fault == "hostile-clients" and active.attackers is not None:
            budget = {n: hostile_budgets.budgets(self.cluster.argv[n]) for n in self.node_ids}
            growth_max = {node: hostile_budgets.peak_growth_max(b) for node, b in budget.items()}
            report = await asyncio.to_thread(active.attackers.stop, growth_max)
            kept = ("tally", "findings", "node_peak_rss_growth_mib", "killed", "not_started")
            value = {key: report.get(key) for key in kept}
            if active.sampling is not None:  # each listener's gauges while they attacked, and its budget
                done, sampling, http = active.sampling
                done.set()
                seen = {node: hostile_budgets.fold(s) for node, s in (await sampling).items()}
                await http.close()
                value["request_bytes"] = {node: {**seen[node], "budget": budget[node]} for node in seen}
                value["findings"] = [*(value["findings"] or []), *hostile_budgets.findings(seen, budget)]
                report["findings"] = value["findings"]
            for finding in report.get("findings", []):
                self._note(f"hostile-clients: {finding}")
        # ``back``: when each node it restarted or resumed came back (the ready events' ``since``)
        self.recorder.nemesis("stop", fault, value, **({"back": back} if back else {}))
        self._back += [(node, fault, at) for node, at in back.items()]

    async def _restart(self, targets: list[str]) -> dict[str, Any]:
        """Start the targets that are down; ``_restarted_at`` says when each started (history time)."""
        started: dict[str, Any] = {}
        self._restarted_at = {}
        for node in targets:
            if self.cluster.running(node):
                started[node] = "was running"
                continue
            write_baseline(self.cluster.trace_file(node), self.cluster.data_dir(node))
            self._restarted_at[node] = self.recorder.now()
            started[node] = {"pid": self.cluster.start(node)}
        await asyncio.sleep(0.5)
        for node in targets:
            if not self.cluster.running(node):
                started[node] = {"exited": True, "log_tail": self.cluster.log_tail(node, 5)}
                self.restart_failures.append(node)
        return started


def _write_clock(path: str, offset: float) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{offset}\n")


async def _sleep_until(loop: asyncio.AbstractEventLoop, when: float, stop: asyncio.Event) -> bool:
    """Sleep until loop time ``when``; True if ``stop`` was set first."""
    delay = when - loop.time()
    if delay > 0:
        try:
            await asyncio.wait_for(stop.wait(), delay)
        except TimeoutError:
            return False
    return stop.is_set()
