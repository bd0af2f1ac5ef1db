"""CPU accounting from /proc, shared by the benchmarks: a process's CPU seconds and resident set, the
machine's busy time, ``CpuMeter`` (the node processes, this process and every other process over a
window) and ``wait_quiet`` (before a measurement, until the machine's other processes calm down). The
machine may be shared: a busy neighbour explains a slow cell, so every table reports it."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from raftlog_bench.output import say

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds_from_stat(stat: str, ticks_per_s: int) -> float:
    """user + system CPU seconds of a process (all threads) from the text of /proc/PID/stat. The command
    name (field 2) may hold spaces and parentheses, so fields are counted after its last ')'."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds of a process and of the processes it started that still run (a node's JSON worker
    process, ``api.json_work``, parses its large bodies: a node's cost includes them)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            total = cpu_seconds_from_stat(stat.read(), TICKS)
    except (OSError, IndexError, ValueError):
        return None
    for child in _children(pid):
        total += process_cpu_s(child) or 0.0
    return total


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (every thread's ``children`` list: Linux 3.5 and later)."""
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as children:
                found += [int(child) for child in children.read().split()]
    except (OSError, ValueError):
        return found
    return found


def own_threads_cpu_s() -> dict[int, tuple[str, float]]:
    """Each live thread of this process: thread id -> (its name, its CPU seconds). librdkafka names its
    threads ``rdk:main``, ``rdk:broker1``...; a thread gone since is not counted."""
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as stat:
                text = stat.read()
        except OSError:
            continue
        threads[int(tid)] = (text[text.find("(") + 1 : text.rfind(")")], cpu_seconds_from_stat(text, TICKS))
    return threads


def named_threads_cpu_s(name_prefix: str) -> float:
    """CPU seconds of this process's live threads whose name starts with ``name_prefix``."""
    return sum(cpu for name, cpu in own_threads_cpu_s().values() if name.startswith(name_prefix))


def process_rss_mib(pid: int) -> float | None:
    """A process's resident set now, MiB (``VmRSS``); None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, IndexError, ValueError):
        return None
    return None


def machine_busy_s() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            ticks = [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / TICKS  # minus idle and iowait


def own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


@dataclass(frozen=True, slots=True)
class CpuUse:
    seconds: float  # wall time of the window
    nodes_s: dict[str, float]  # CPU seconds per node process (empty: not measured, e.g. --server)
    client_s: float  # this process
    other_pct: float | None  # other processes, 100 = one core
    rss_mib: dict[str, float] = field(default_factory=dict)  # per node process at the window's end

    @property
    def nodes_total_s(self) -> float:
        return sum(self.nodes_s.values())


class CpuMeter:
    """CPU seconds of the node processes, of this process and of everything else over a window."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = pids
        self._start = time.perf_counter()
        self._nodes = {node: process_cpu_s(pid) for node, pid in pids.items()}
        self._own = own_cpu_s()
        self._machine = machine_busy_s()

    def stop(self, children_s: float = 0.0) -> CpuUse:
        """The window's use; ``children_s``: CPU seconds of helper processes of this one over the window
        (reader processes, ``readers.py``), counted as the client's rather than as other processes'."""
        elapsed = time.perf_counter() - self._start
        nodes: dict[str, float] = {}
        for node, pid in self._pids.items():
            before, after = self._nodes[node], process_cpu_s(pid)
            if before is not None and after is not None:
                nodes[node] = after - before
        client = own_cpu_s() - self._own + children_s
        machine = machine_busy_s()
        other = None
        if machine is not None and self._machine is not None and elapsed > 0:
            others_s = (machine - self._machine) - client - sum(nodes.values())
            other = max(0.0, 100 * others_s / elapsed)
        rss = {node: process_rss_mib(pid) for node, pid in self._pids.items()}
        return CpuUse(elapsed, nodes, client, other, {n: v for n, v in rss.items() if v is not None})


def other_pct_text(percent: float | None) -> str:
    """Other processes' CPU in a table's column: "?" where /proc/stat could not be read."""
    return "?" if percent is None else f"{percent:.0f}"


def wait_quiet(seconds_max: float, other_pct_max: float = 25.0) -> float | None:
    """Write out the dirty pages the previous phase left (``sync``: whichever system wrote them, they are
    not charged to the next phase), then wait, at most ``seconds_max``, until other processes use less
    than ``other_pct_max`` of a core over one second. Returns the last reading."""
    os.sync()
    deadline = time.monotonic() + seconds_max
    waited = False
    while True:
        meter = CpuMeter({})
        time.sleep(1.0)
        other = meter.stop().other_pct
        if other is None or other < other_pct_max or time.monotonic() >= deadline:
            if waited:
                say(f"starting; other processes use {other_pct_text(other)}% of a core")
            return other
        if not waited:
            say(f"waiting up to {seconds_max:g} s: other processes use {other:.0f}% of a core")
            waited = True
