"""CPU a JSON fetch answer costs the HTTP door per record, from the stored batches to the answer's
bytes (``api.records._rows`` through ``api.answers.json_array``: read, base64, write), for binary-flavour
records of 100 B and 1 KiB in batches of 100, and what a client then spends reading the answer (orjson,
pybase64). CPU time of this process (the least of the rounds), not wall-clock, so that other processes
move it little; run it against two trees back to back (``PYTHONPATH=TREE``) to compare them.

    PYTHONPATH=. .venv/bin/python scripts/bench_json_fetch.py [--records 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pybase64

from api.answers import json_array
from api.records import _rows
from api.schemas import Flavour
from partitions.data.service import FetchedBatches
from raftlog.storage.batch import ProducerRecord, encode_batch

BATCH = 100


def answer(data: bytes) -> list[bytes]:
    """The fetch answer's bytes, as the handler writes them: this tree's rows (``api.records._rows``)
    through this tree's ``api.answers.json_array``, a slice at a time."""
    fetched = FetchedBatches(data, 0, 0)

    async def slices() -> list[bytes]:
        return [piece async for piece in json_array(_rows("t", 0, 0, fetched, Flavour.BINARY), False)]

    return asyncio.run(slices())


def whole(chunks: list[bytes]) -> bytes:
    return b"".join(chunks)


def cpu_us_per_record(work: Callable[[], object], records: int, rounds: int) -> float:
    """The least CPU a round took, per record: the round least disturbed by the machine's other work."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best / records * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = max(BATCH, args.records - args.records % BATCH)
    cells = []
    for size in (100, 1024):
        records = [ProducerRecord(os.urandom(size)) for _ in range(BATCH)]
        data = b"".join(encode_batch(first, records, 1, 1_000) for first in range(0, n, BATCH))
        body = whole(answer(data))
        node = cpu_us_per_record(lambda data=data: answer(data), n, args.rounds)  # type: ignore[misc]
        client = cpu_us_per_record(
            lambda body=body: [pybase64.b64decode(row["value"]) for row in orjson.loads(body)],  # type: ignore[misc]
            n,
            args.rounds,
        )
        cells.append(f"{size} B: node {node:.2f} µs, client {client:.2f} µs")
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"CPU per record of a binary-flavour JSON fetch answer: {'; '.join(cells)} (load {load})")


if __name__ == "__main__":
    main()
