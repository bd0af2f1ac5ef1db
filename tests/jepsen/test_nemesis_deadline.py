"""The workers write on through a heal that outlasts their deadline: a fault run's last window healed by
restarting two nodes took 4.7 s on a loaded machine, the workers' deadline passed meanwhile, and the run
ended before the restarted nodes were ready (no recovery measured, no span without faults: the compaction
run's availability check failed on a valid run)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from jepsen import control, nemesis
from jepsen.recorder import Recorder
from jepsen.workload import Deadline

HEAL_S = 0.5  # longer than the schedule leaves the workers after the window (WINDOW_END_S to the deadline)
WINDOW_END_S = 0.05


async def test_a_slow_heal_keeps_the_workers_writing_until_it_ends(tmp_path: Path) -> None:
    cluster = control.Cluster(str(tmp_path), control.plan_loopback(3), admin_token="t")
    recorder = Recorder(str(tmp_path / "history.jsonl"))
    chaos = nemesis.Nemesis(cluster, None, recorder, random.Random(1), {"t0": 1}, [])
    loop = asyncio.get_running_loop()
    heal_ended: list[float] = []

    async def started_fault(fault: str) -> None:
        chaos.active.append(nemesis.Active(fault, []))

    async def slow_heal() -> None:  # restarting nodes on a loaded machine
        if chaos.active:
            chaos.active.clear()
            await asyncio.sleep(HEAL_S)
            heal_ended.append(loop.time())

    chaos.start = started_fault  # type: ignore[method-assign]
    chaos.heal = slow_heal  # type: ignore[method-assign]
    started = loop.time()
    deadline = Deadline(started + WINDOW_END_S + 0.05)  # passes while the heal runs
    stop = asyncio.Event()
    window = nemesis.Window(0.0, WINDOW_END_S, ("kill",))
    run = asyncio.create_task(chaos.run([window], started, stop, deadline))
    try:
        while deadline.left() > 0:  # a worker: writes until its deadline
            await asyncio.sleep(0.01)
        workers_stopped = loop.time()
    finally:
        stop.set()
        await run
        recorder.close()
    assert heal_ended, "the window was not healed"
    assert workers_stopped >= heal_ended[0], "the workers stopped while the heal was still restarting nodes"
