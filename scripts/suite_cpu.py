"""Where a command's CPU goes, by kind of process: runs COMMAND (e.g. the suite, `.ci/run`'s pytest line)
while sampling every process of the machine each second (``/proc``), and prints the CPU seconds that
processes started meanwhile spent, grouped as node processes, ``raftlog`` commands, JVMs (Kafka, Spark,
the Java clients), browsers, test workers and the rest, with how many of each started.

    python scripts/suite_cpu.py [--json FILE] [--burners N] -- .venv/bin/python -m pytest -q -n 2 tests/x

``--burners N`` runs N CPU-bound processes beside the command, the loaded machine the suite must stay
green on (their CPU is left out of the table). ``--own`` counts only the command's processes and those
they start (this process becomes their child subreaper, as ``scripts/tree_cpu.py``), leaving out what
others run on a shared machine meanwhile.

A process's CPU is its last sample's: what a process spent after the last sample before it ended is not
counted (at most a second of each). ``--json`` also gives each process's seconds alive up to its last
sample (``alive_s``), and when it started, in seconds after the command (``started_s``): what idle
processes cost is their count of seconds alive times their idle rate.
Processes that were running before the command started are left out.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

SAMPLE_S = 1.0
BURN_MAX_S = 3 * 3600.0  # a burner ends by itself after this, were it left behind
TICKS = os.sysconf("SC_CLK_TCK")
PR_SET_CHILD_SUBREAPER = 36
KINDS = (  # (kind, a word of its command line), first match wins
    ("node fork server", "raftlog_node.forkserver"),  # the test workers' (tests/node_forks.py)
    ("node", "raftlog_node"),
    ("raftlog dev", "raftlog_cli dev"),
    ("raftlog command", "raftlog_cli"),
    ("fault harness", "-m jepsen"),
    ("JVM", "java"),
    ("browser", "chromium"),
    ("test worker", "pytest"),
    ("test worker", "exec(eval(sys.stdin.readline()))"),  # a pytest-xdist worker (execnet)
    ("Spark's Python", "pyspark"),
    ("go", "kgo.test"),
)


def kind_of(command: str) -> str:
    for kind, word in KINDS:
        if word in command:
            return kind
    first = command.split(" ", 1)[0]
    return first.rsplit("/", 1)[-1] or "?"


def _boot_ticks() -> int:
    """Now, in the clock ticks since boot that /proc/PID/stat's start time counts."""
    with open("/proc/uptime", encoding="ascii") as f:
        return int(float(f.read().split()[0]) * TICKS)


def sample(seen: dict[tuple[int, int], list[object]], since: int) -> None:
    """Each process started after ``since`` (ticks since boot): its command line, CPU seconds so far,
    parent's pid (as first seen), seconds alive so far (from its start to this sample) and when it started
    (seconds after ``since``)."""
    now = _boot_ticks()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            started = int(fields[19])
            if started < since:
                continue
            cpu = (int(fields[11]) + int(fields[12])) / TICKS
            key = (int(name), started)
            if key not in seen:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                if not command:  # a kernel thread, or a process already gone
                    continue
                seen[key] = [command, cpu, int(fields[1]), (now - started) / TICKS, (started - since) / TICKS]
            else:
                seen[key][1] = cpu
                seen[key][3] = (now - started) / TICKS
        except (OSError, IndexError, ValueError):
            continue


@contextlib.contextmanager
def burners(count: int, seconds: float = BURN_MAX_S) -> Iterator[list[int]]:
    """``count`` CPU-bound processes (their pids), each ending by itself after ``seconds``, or when this
    ends."""
    loop = f"import time\nend = time.monotonic() + {seconds:.0f}\nwhile time.monotonic() < end:\n    pass\n"
    processes = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]
    try:
        yield [process.pid for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait(30)


def _reap_orphans(command_pid: int) -> None:
    """Reap the processes re-parented here that ended; never the command itself (``Popen`` waits for it),
    whose end stops the sampling anyway."""
    while True:
        try:
            ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if ended is None or ended.si_pid in (0, command_pid):
            return
        os.waitpid(ended.si_pid, 0)


def _descendants(
    seen: dict[tuple[int, int], list[object]], roots: set[int]
) -> dict[tuple[int, int], list[object]]:
    """The processes of ``seen`` whose chain of parents (as first seen) reaches ``roots``."""
    parent = {key[0]: int(str(value[2])) for key, value in seen.items()}
    own: dict[int, bool] = {}

    def is_own(pid: int, depth: int = 0) -> bool:
        if pid in roots:
            return True
        if pid not in parent or depth > 64:
            return False
        if pid not in own:
            own[pid] = is_own(parent[pid], depth + 1)
        return own[pid]

    return {key: value for key, value in seen.items() if key[0] not in roots and is_own(key[0])}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write every process's command line and CPU seconds there")
    parser.add_argument("--burners", type=int, default=0, help="CPU-bound processes beside the command")
    parser.add_argument("--own", action="store_true", help="count only the command's processes")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = [word for word in args.command if word != "--"] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --")
    if args.burners < 0:
        parser.error("--burners is a count of processes, 0 or more")
    if args.own and ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        parser.error(f"--own: prctl failed: {os.strerror(ctypes.get_errno())}")
    since = _boot_ticks()
    seen: dict[tuple[int, int], list[object]] = {}
    with burners(args.burners) as burning:
        began = time.monotonic()
        running = subprocess.Popen(command)
        while running.poll() is None:
            sample(seen, since)
            if args.own:
                _reap_orphans(running.pid)
            time.sleep(SAMPLE_S)
        wall = time.monotonic() - began
    for key in [key for key in seen if key[0] in burning]:
        del seen[key]
    if args.own:
        seen = _descendants(seen, {os.getpid(), running.pid})
    totals: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter[str] = collections.Counter()
    for command_line, cpu, _parent, _alive, _started in seen.values():
        kind = kind_of(str(command_line))
        totals[kind] += float(str(cpu))
        counts[kind] += 1
    spent = sum(totals.values())
    beside = f", {args.burners} burners beside it" if args.burners else ""
    ran = f"exit {running.returncode}, {wall:.0f} s, {spent:.0f} CPU seconds sampled{beside}"
    print(f"\n{' '.join(command)}: {ran}")
    print(f"{'kind':<18} {'processes':>9} {'CPU s':>8} {'share':>6}")
    for kind, cpu in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"{kind:<18} {counts[kind]:>9} {cpu:>8.0f} {cpu / spent if spent else 0.0:>6.0%}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                [
                    {"command": c, "cpu_s": cpu, "parent": parent, "alive_s": alive, "started_s": started}
                    for c, cpu, parent, alive, started in seen.values()
                ],
                f,
                indent=0,
            )
    return running.returncode


if __name__ == "__main__":
    sys.exit(main())
