"""How long resolving one consumer group regex subscription takes at the cluster's most topics (10,000, the
cluster's ``PARTITIONS_MAX``, of 200 characters, ``TOPIC_NAME_BYTES_MAX``), for hostile regexes: the
numbers of docs/security.md ("Consumer groups"). Prints; asserts nothing.

    .venv/bin/python scripts/bench_group_regex.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from partitions.controller.defaults import PARTITIONS_MAX
from partitions.groups.consumer.topic_regex import resolve
from partitions.names import TOPIC_NAME_BYTES_MAX

REGEXES = (
    "o(([a-z-]*)*)*!",  # issue 72's
    "(.*a){20}",
    "(.*[a-z]){50}x",
    "(" + "|".join(f"o[a-z-]*{i:04d}" for i in range(60)) + ")",
)


def main() -> None:
    stem = ("o" + "abcdefghij-" * 20)[: TOPIC_NAME_BYTES_MAX - 5]
    names = [f"{stem}{i:05d}" for i in range(PARTITIONS_MAX)]
    for regex in REGEXES:
        started = time.perf_counter()
        matched = resolve(regex, names, lambda topic: True, lambda: False)
        took_ms = (time.perf_counter() - started) * 1000
        print(f"{took_ms:8.1f} ms  {len(matched):5d} matched  {regex[:50]}")


if __name__ == "__main__":
    main()
