"""What one record costs to turn from stored batches into the REST answer's JSON (binary flavour, the
node's side) and from that JSON into client records (raftlog_client's side), per record of 100 B.

    .venv/bin/python scripts/bench_render.py [--records 8000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from api.rendering import records_json
from api.schemas import Flavour
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog.storage.batch_reads import records_from
from raftlog_client.client import _fetched

BATCH = 500


def per_record_us(work: Callable[[], object], records: int, rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        work()
    return (time.perf_counter() - started) / rounds / records * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = args.records - args.records % BATCH or BATCH
    data = b"".join(
        encode_batch(
            first, [ProducerRecord(b"x" * 100 + b"%d" % i, b"%d" % i) for i in range(BATCH)], 1, 1000
        )
        for first in range(0, n, BATCH)
    )
    body = records_json([("t", 0, records_from(data, 0))], Flavour.BINARY)
    rows = json.loads(body)
    render = lambda: records_json([("t", 0, records_from(data, 0))], Flavour.BINARY)  # noqa: E731
    timings = (
        ("decode stored batches", lambda: records_from(data, 0)),
        ("decode + render (node)", render),
        ("json.loads (client)", lambda: json.loads(body)),
        ("rows to records (client)", lambda: [_fetched(r) for r in rows]),
    )
    print(f"{n} records of ~100 B, {args.rounds} rounds; microseconds per record")
    for label, work in timings:
        print(f"  {label:<28}{per_record_us(work, n, args.rounds):6.2f}")


if __name__ == "__main__":
    main()
