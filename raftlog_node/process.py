"""The node's process, tuned for serving and watched for stalls: fewer and cheaper garbage collections,
glibc's allocator keeping large buffers, the open-files limit raised to its hard limit, and the watchers
of the garbage collector's pauses and the event loop's lateness (``raftlog.gc_pauses``,
``raftlog.loop_lag``). ``serve`` calls them once it serves."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import platform
import resource
from collections.abc import Callable

from raftlog import gc_pauses, loop_lag

log = logging.getLogger("raftlog.serve")
# glibc mallopt parameters (malloc.h) and the largest mmap threshold glibc accepts on 64-bit
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
_TOP_PAD = 64 * 1024 * 1024

GC_GEN0_DEFAULT = 20_000  # see tune_gc
MALLOC_KEEP_MIB_DEFAULT = 512  # see tune_malloc


def tune_gc(gen0: int) -> None:
    """Fewer, cheaper garbage collections for a serving node: what exists once it serves (modules, the
    node's structures) is frozen out of every later collection, and the youngest generation is collected
    after ``gen0`` allocations instead of 700. A request allocates thousands of short-lived objects (one
    per record, header, JSON value) that reference counting frees anyway; scanning for cycles that often
    cost a sixth of a batched produce and a quarter of a bulk fetch (docs/performance.md). 0 keeps
    Python's defaults."""
    if gen0 <= 0:
        return
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0, gen1, gen2)


def tune_malloc(keep_mib: int) -> bool:
    """Keep large buffers in the heap: a produce request's body, the Raft command and frames made of it
    are each about a MiB. glibc serves such sizes with a fresh ``mmap`` until its adaptive threshold has
    risen, and trims the heap back to the OS soon after they are freed; either way the next buffer is
    new memory, which the kernel must fault in and zero page by page (with this tuning the nodes took 28%
    fewer page faults over a 100 B then 1 KiB produce: docs/performance.md). Here every buffer up to
    32 MiB comes from the heap, and up to ``keep_mib`` of freed heap is kept for reuse. Returns whether
    the settings were applied (glibc only; 0 keeps its defaults)."""
    if keep_mib <= 0:
        return False
    if platform.libc_ver()[0] != "glibc":
        log.warning("not glibc: --malloc-keep-mib has no effect, the C library's defaults stay")
        return False
    libc = ctypes.CDLL(None)
    settings = (
        (_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX),
        (_M_TRIM_THRESHOLD, keep_mib * 1024 * 1024),
        (_M_TOP_PAD, _TOP_PAD),
    )
    applied = all(libc.mallopt(parameter, value) == 1 for parameter, value in settings)
    if not applied:
        log.warning("mallopt refused a setting: the C library's defaults may partly stay")
    global _kept_mib
    _kept_mib = keep_mib if applied else 0
    return applied


_kept_mib = 0  # what tune_malloc keeps of freed heap; 0: not tuned (give_memory_back does nothing)


GIVE_BACK_EVERY_S = 5.0  # how often the node's RSS is looked at (``give_memory_back``)
GIVE_BACK_GROWTH_BYTES = 64 * 1024 * 1024  # RSS grown past its floor by more: given back once quiet


def rss_bytes() -> int:
    """This process's resident memory (``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def trim_heap() -> None:
    """Every free page of glibc's heaps back to the OS (``malloc_trim``: in every arena, not only the top
    of the main one, which is all ``M_TRIM_THRESHOLD`` trims)."""
    ctypes.CDLL(None).malloc_trim(0)


async def give_memory_back(
    quiet: Callable[[], bool], every_s: float = GIVE_BACK_EVERY_S, growth_bytes: int = GIVE_BACK_GROWTH_BYTES
) -> None:
    """Give memory back after a peak. The tuned allocator keeps freed buffers for reuse (``tune_malloc``)
    and the tuned collector seldom runs on a quiet node (``tune_gc``), so a node's RSS stayed at its peak
    after a burst of large requests or answers passed (an attack's 357 MiB, for good). Every ``every_s``,
    once the node's RSS grew more than ``growth_bytes`` past its lowest since the last give-back and its
    doors hold no request or answer bytes (``quiet``), cycles are collected (a few ms: what existed at
    start is frozen out) and glibc's free heap pages are given back to the OS, off the event loop. Runs
    until cancelled; returns at once where the allocator was not tuned (glibc trims on its own)."""
    if _kept_mib <= 0:
        return
    floor = rss_bytes()
    while True:
        await asyncio.sleep(every_s)
        rss = rss_bytes()
        floor = min(floor, rss)
        if rss - floor <= growth_bytes or not quiet():
            continue
        gc.collect()
        await asyncio.to_thread(trim_heap)
        floor = rss_bytes()
        log.info("gave %d MiB back to the OS after a peak (RSS now %d MiB)", (rss - floor) >> 20, floor >> 20)


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit and return it: every replica
    holds a few descriptors (journal segments, its direct-I/O writer, log segments and indexes), and the
    usual soft limit of 1024 would run out at a few hundred partitions on one node."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open files limit from %d to %d: %s", soft, hard, exc)
        return soft
    return hard


def watch_stalls() -> asyncio.Task[None]:
    """Time every garbage collection from now on, and watch the running event loop's lateness until the
    returned task is cancelled."""
    gc_pauses.watch()
    return asyncio.ensure_future(loop_lag.watch())
