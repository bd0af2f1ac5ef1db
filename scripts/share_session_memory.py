"""What a node's share sessions hold in memory (docs/security.md, "Share sessions"): ``--sessions`` sessions
of ``--partitions`` partitions each opened on one ``ShareSessions`` (names made afresh, as made-up member
ids and topics would be), measured with ``tracemalloc``. Prints the bytes per session and in all.

    .venv/bin/python scripts/share_session_memory.py [--sessions 2000] [--partitions 10]
"""

from __future__ import annotations

import argparse
import tracemalloc

from kafka_api.share_sessions import OPEN_EPOCH, ShareSessions
from partitions.groups.assignors import TopicPartition


def measure(sessions: int, partitions: int) -> int:
    """Bytes the sessions hold, once opened and filled."""
    table = ShareSessions(sessions_max=sessions, per_user_max=sessions, per_connection_max=sessions)
    connection = object()
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    for n in range(sessions):
        session = table.step("group", f"member-{n:08d}-made-up", OPEN_EPOCH, connection, "mallory")
        for p in range(partitions):
            session.partitions[TopicPartition(f"topic-{n:08d}-{p}", p)] = None
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return after - before


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--partitions", type=int, default=10)
    args = parser.parse_args()
    held = measure(args.sessions, args.partitions)
    each_kib, all_mib = held / args.sessions / 1024, held / 1024 / 1024
    what = f"{args.sessions} share sessions of {args.partitions} partitions"
    print(f"{what}: {each_kib:.1f} KiB a session, {all_mib:.1f} MiB in all")


if __name__ == "__main__":
    main()
