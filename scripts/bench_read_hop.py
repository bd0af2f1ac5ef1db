"""What a fetch's read costs on the event loop against handing it to a reader thread, by size.

A fetch takes its `LogView` under the log's lock, then preads and CRC-checks the batches without it
(`partitions.data.plane._read_all`). This times, from inside a running event loop, that read done in line
and the same read handed to a thread pool and awaited (what `DataPlane._read` does past
`INLINE_READ_BYTES_MAX`): the wall time a fetch of each size takes either way, best of several rounds.
The data is in the page cache, as a recent fetch's is.

    .venv/bin/python scripts/bench_read_hop.py [--sizes 4096,16384,65536,262144] [--reads 300]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import tempfile
import time

from partitions.data.plane import INLINE_READ_BYTES_MAX, _read_all
from raftlog.storage import Log, LogConfig, ProducerRecord


async def measure(log: Log, sizes: list[int], reads: int, rounds: int) -> None:
    loop = asyncio.get_running_loop()
    with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="raftlog-read") as pool:
        print(f"{'max_bytes':>10s} {'read bytes':>10s} {'in line µs':>11s} {'on a thread µs':>15s}")
        for size in sizes:
            best = {"line": float("inf"), "thread": float("inf")}
            nbytes = 0
            for _ in range(rounds):
                for mode in best:
                    started = time.perf_counter()
                    for _ in range(reads):
                        view = log.read_view(0, size)
                        if mode == "line":
                            data = _read_all(view)
                        else:
                            data = await loop.run_in_executor(pool, _read_all, view)
                        view.close()
                        nbytes = len(data)
                    best[mode] = min(best[mode], (time.perf_counter() - started) / reads)
            print(f"{size:10d} {nbytes:10d} {best['line'] * 1e6:11.1f} {best['thread'] * 1e6:15.1f}")
    print(f"(a node reads up to {INLINE_READ_BYTES_MAX} bytes in line, more on its reader threads)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4096,16384,65536,262144", help="fetch max_bytes to time")
    parser.add_argument("--reads", type=int, default=300, help="reads per round (300)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best is shown (5)")
    args = parser.parse_args()
    sizes = [int(part) for part in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        log = Log.open(directory, LogConfig())
        for _ in range(300):  # 300 batches of 40 records of 100 B: about 1.3 MiB
            log.append([ProducerRecord(os.urandom(100)) for _ in range(40)])
        try:
            asyncio.run(measure(log, sizes, args.reads, args.rounds))
        finally:
            log.close()


if __name__ == "__main__":
    main()
