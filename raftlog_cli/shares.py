"""``raftlog share consume GROUP TOPIC...``: a share group member (KIP-932) over HTTP. Records are
acquired (shared with the group's other members, Kafka share consumers included), printed as JSON lines
with their delivery count, and each acknowledged: accepted, or released (delivered again, to any member)
or rejected with ``--ack``. Stops after ``--max-records`` or ``--duration`` (or Ctrl-C) and leaves the
group, so what it holds is delivered again at once; progress goes to stderr."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from raftlog_cli.admin import WithClient, command_group, runner
from raftlog_cli.arguments import positive
from raftlog_cli.records import text
from raftlog_client.client import RaftlogClient
from raftlog_client.share import ACCEPT, REJECT, RELEASE, ShareConsumer, ShareRecord

ACQUIRE_RECORDS_MAX = 1_000  # the server's bound on one acquire
POLL_MS = 1_000
DONE = {ACCEPT: "accepted", RELEASE: "released", REJECT: "rejected"}


def _line(record: ShareRecord, kind: str) -> str:
    row: dict[str, Any] = {
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp_ms, "key": text(record.key), "value": text(record.value),
        "delivery_count": record.delivery_count, "acknowledged": kind,
    }  # fmt: skip
    return json.dumps(row)


class Progress:
    """Counts per acknowledgement type, written to stderr: on a terminal one line kept up to date, else
    a line at the end."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self.counts = {ACCEPT: 0, RELEASE: 0, REJECT: 0}
        self.acquired = 0

    def line(self) -> str:
        done = ", ".join(f"{DONE[kind]} {n}" for kind, n in self.counts.items())
        return f"acquired {self.acquired}: {done}"

    def show(self, final: bool = False) -> None:
        if self.live:
            print(f"\r\033[K{self.line()}", end="\n" if final else "", file=sys.stderr, flush=True)
        elif final:
            print(self.line(), file=sys.stderr)


async def consume(client: RaftlogClient, args: argparse.Namespace) -> int:
    member = ShareConsumer(client, args.group, offset_reset=args.offset_reset)
    await member.join(args.topics)
    progress = Progress(sys.stderr.isatty())
    deadline = None if args.duration is None else time.monotonic() + args.duration
    try:
        while args.max_records is None or progress.acquired < args.max_records:
            left_s = None if deadline is None else deadline - time.monotonic()
            if left_s is not None and left_s <= 0:
                break
            wait_ms = POLL_MS if left_s is None else max(0, min(POLL_MS, int(left_s * 1000)))
            wanted = ACQUIRE_RECORDS_MAX
            if args.max_records is not None:
                wanted = min(wanted, args.max_records - progress.acquired)
            got = await member.acquire(max_records=wanted, timeout_ms=wait_ms)
            if args.max_records is not None:  # an acquire may lock a whole batch more: hand back the rest
                extra = got[wanted:]
                got = got[:wanted]
                if extra:
                    await member.acknowledge((r, RELEASE) for r in extra)
            if not got:
                continue
            await member.acknowledge((r, args.ack) for r in got)
            for record in got:
                print(_line(record, args.ack), flush=False)
            sys.stdout.flush()
            progress.acquired += len(got)
            progress.counts[args.ack] += len(got)
            progress.show()
    finally:
        await member.leave()
        progress.show(final=True)
    return 0


def add_commands(commands: Any, server: argparse.ArgumentParser, with_client: WithClient) -> None:
    run = runner(with_client)
    sub = command_group(commands, "share", "share groups (KIP-932): members that share a topic's records")
    consuming = sub.add_parser(
        "consume",
        parents=[server],
        help="acquire records as a member of a share group, acknowledge each, print them as JSON lines",
    )
    consuming.add_argument("group")
    consuming.add_argument("topics", nargs="+", metavar="TOPIC")
    consuming.add_argument(
        "--ack",
        choices=(ACCEPT, RELEASE, REJECT),
        default=ACCEPT,
        help="how each record is acknowledged: accept (done), release (delivered again, to any member), "
        "reject (never delivered again); default accept",
    )
    consuming.add_argument("--max-records", type=positive, metavar="N", help="stop after N records")
    consuming.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    consuming.add_argument(
        "--from",
        dest="offset_reset",
        choices=("earliest", "latest"),
        help="where a group new to a partition starts (default: the group's config share.auto.offset.reset, "
        "else latest, as Kafka's)",
    )
    consuming.set_defaults(run=run(consume))
