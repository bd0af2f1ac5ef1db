"""CPU a JSON produce request costs the HTTP door, from its body to the batch the leader is given
(``api.produce_encoding.encode_json_produce``: parse, check, encode), per request of the issue's shape:
100 records of 1 KiB, binary flavour (base64 values, 138 KB) and JSON flavour (objects). CPU time of
this process, not wall-clock, so that other processes on the machine move it little; run it against
two trees back to back (``PYTHONPATH=TREE``) to compare them.

    PYTHONPATH=. .venv/bin/python scripts/bench_json_produce.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import time
from pathlib import Path

# the handler's module names it in this tree and in trees from before api.produce_encoding (3e3eeb2), so a
# before-and-after runs the same script
from api.records import encode_json_produce  # type: ignore[attr-defined]
from api.schemas import Flavour


def bodies(records: int, size: int) -> dict[str, tuple[bytes, Flavour]]:
    value = os.urandom(size)
    binary = {"records": [{"value": base64.b64encode(value).decode()} for _ in range(records)]}
    typed = {
        "records": [
            {"key": {"id": i}, "value": {"name": "x" * (size - 124), "n": i, "f": 1.5}}
            for i in range(records)
        ]
    }
    return {
        "binary": (json.dumps(binary).encode(), Flavour.BINARY),
        "json": (json.dumps(typed).encode(), Flavour.JSON),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    cells = []
    for name, (body, flavour) in bodies(100, 1024).items():
        started = time.process_time()
        for _ in range(args.requests):
            encode_json_produce(body, flavour, 0, 1, 0, 1_700_000_000_000)
        cpu_us = (time.process_time() - started) / args.requests * 1e6
        cells.append(f"{name} {cpu_us:,.0f} µs")
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"CPU per request of 100 records of 1 KiB: {', '.join(cells)} (load {load})")


if __name__ == "__main__":
    main()
