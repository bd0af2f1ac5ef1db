"""Process settings of ``raftlog serve``: large buffers come from the heap instead of fresh mappings
(``--malloc-keep-mib``), and the open files limit is raised to the hard limit; journal sync threads
(``--journal-sync-threads``) reach the node."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest
from serve_args import check_int_option, serve_args

from raftlog.consensus.defaults import JOURNAL_SYNC_THREADS_DEFAULT
from raftlog_node.process import GIVE_BACK_GROWTH_BYTES, MALLOC_KEEP_MIB_DEFAULT
from raftlog_node.settings import node_config

# Run in a child process: malloc's settings are process-wide. Prints how many bytes a 16 MiB buffer
# added to glibc's mmapped regions (mallinfo2().hblkhd) after tune_malloc(KEEP).
_PROBE = """
import ctypes, sys
from raftlog_node.process import tune_malloc
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
applied = tune_malloc(int(sys.argv[1]))
before = libc.mallinfo2().hblkhd
buffer = bytearray(16 << 20)
print(int(applied), libc.mallinfo2().hblkhd - before)
"""

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt settings are glibc's")


def _mmapped_by_a_16_mib_buffer(keep_mib: int) -> tuple[bool, int]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(keep_mib)], capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0] == "1", int(out[1])


def test_a_negative_keep_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    check_int_option(monkeypatch, "--malloc-keep-mib", MALLOC_KEEP_MIB_DEFAULT, "0", ("-1",))


@glibc_only
def test_tuned_a_large_buffer_comes_from_the_heap() -> None:
    applied, mmapped = _mmapped_by_a_16_mib_buffer(MALLOC_KEEP_MIB_DEFAULT)
    assert applied and mmapped == 0


@glibc_only
def test_zero_keeps_glibcs_defaults_which_map_a_large_buffer() -> None:
    applied, mmapped = _mmapped_by_a_16_mib_buffer(0)
    assert not applied and mmapped >= 16 << 20


def test_a_node_raises_its_open_files_limit_to_the_hard_limit() -> None:
    probe = (
        "import resource\n"
        "from raftlog_node.process import raise_open_files_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))\n"
        "print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
    )
    returned, soft, hard = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert returned == soft == hard


def test_journal_sync_threads_reach_the_node_and_bad_counts_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check_int_option(monkeypatch, "--journal-sync-threads", JOURNAL_SYNC_THREADS_DEFAULT, "0", ("-1", "65"))
    check_int_option(monkeypatch, "--journal-sync-thread-min-kib", 64, "0", ("-1",))
    assert node_config(serve_args())[0].journal_sync_threads == JOURNAL_SYNC_THREADS_DEFAULT
    assert node_config(serve_args("--journal-sync-threads", "0"))[0].journal_sync_threads == 0
    config = node_config(serve_args("--journal-sync-thread-min-kib", "0"))[0]
    assert config.journal_sync_thread_min_bytes == 0
    assert node_config(serve_args())[0].journal_sync_thread_min_bytes == 64 * 1024


# Tuned as a node is, 256 MiB of 1 MiB buffers held in reference cycles (as a cancelled task's traceback holds
# an answer's frames) are dropped, as after a burst of answers: prints RSS before, at the peak, once dropped,
# and after ``give_memory_back`` ran (its doors quiet) until RSS came down or 40 checks passed.
_GIVE_BACK_PROBE = """
import asyncio
from raftlog_node.process import GIVE_BACK_GROWTH_BYTES, give_memory_back, rss_bytes, tune_gc, tune_malloc
tune_malloc(512)
tune_gc(20_000)
async def main():
    before = rss_bytes()
    giver = asyncio.ensure_future(give_memory_back(lambda: True, every_s=0.05))
    await asyncio.sleep(0.1)
    held = []
    for _ in range(256):
        cycle = [bytes(1 << 20)]
        cycle.append(cycle)
        held.append(cycle)
    peak = rss_bytes()
    del held, cycle
    dropped = rss_bytes()
    for _ in range(40):
        await asyncio.sleep(0.05)
        if rss_bytes() - before <= GIVE_BACK_GROWTH_BYTES:
            break
    giver.cancel()
    print(before, peak, dropped, rss_bytes())
asyncio.run(main())
"""


@glibc_only
def test_memory_is_given_back_after_a_peak() -> None:
    out = subprocess.run([sys.executable, "-c", _GIVE_BACK_PROBE], capture_output=True, text=True, check=True)
    before, peak, dropped, after = (int(n) >> 20 for n in out.stdout.split())
    assert peak - before >= 240, f"the buffers were resident: {before} -> {peak} MiB"
    assert dropped - before >= 192, f"dropped, they stay (allocator and collector tuned): {dropped} MiB"
    growth_mib = GIVE_BACK_GROWTH_BYTES >> 20
    assert after - before <= growth_mib, f"RSS back within {growth_mib} MiB of {before} MiB: {after} MiB"
