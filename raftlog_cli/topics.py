"""``raftlog topic create|add-partitions|list|describe|delete`` and ``raftlog offsets``: a line or a
table for people, the server's JSON answer with ``--json`` (as every cluster command). ``cli.py``
registers them and supplies how to run a call against the cluster."""

from __future__ import annotations

import argparse
from typing import Any

from raftlog_cli.admin import WithClient, print_answer, printing, runner
from raftlog_cli.arguments import config_pair, non_negative, positive
from raftlog_cli.table import Column, table
from raftlog_client.client import RaftlogClient

PARTITIONS = (
    Column("PARTITION", ">9"), Column("LEADER", "<8", "  "), Column("REPLICAS", "<24", " "),
    Column("IN SYNC", gap=" "),
)  # fmt: skip


def created_summary(body: dict[str, Any]) -> str:
    configs = ", ".join(f"{k}={v}" for k, v in sorted(body.get("configs", {}).items())) or "defaults"
    return (
        f"created topic {body['name']}: {body['partitions']} partition(s), replication factor "
        f"{body['replication_factor']}, configs: {configs}"
    )


def grown_summary(body: dict[str, Any], validate_only: bool) -> str:
    verb = "would have" if validate_only else "now has"
    return f"topic {body['name']} {verb} {body['partitions']} partition(s): " + " ".join(
        f"{p}:{','.join(r)}" for p, r in enumerate(body["replicas"])
    )


def describe_summary(body: dict[str, Any]) -> str:
    configs = ", ".join(f"{k}={v}" for k, v in sorted(body.get("configs", {}).items())) or "defaults"
    partitions = body.get("partitions", [])
    head = (
        f"{body['name']}: {len(partitions)} partition(s), replication factor "
        f"{body.get('replication_factor')}, configs: {configs}"
    )
    rows = [
        (row["partition"], row.get("leader") or "none", ",".join(r["node"] for r in row.get("replicas", [])),
         _in_sync(row))
        for row in partitions
    ]  # fmt: skip
    return "\n".join([head, *table(PARTITIONS, rows)])


def _in_sync(partition: dict[str, Any]) -> str:
    replicas = partition.get("replicas", [])
    if partition.get("leader") is None or any(r.get("in_sync") is None for r in replicas):
        return "?"
    return ",".join(r["node"] for r in replicas if r.get("in_sync")) or "none"


def offsets_summary(body: dict[str, Any]) -> str:
    where = f"{body['topic']}/{body['partition']}"
    if "timestamp" not in body:
        return f"{where}: log start offset {body['beginning_offset']}, next offset {body['end_offset']}"
    if body["offset"] is None:
        return f"{where}: no record at or after {body['timestamp']} ms"
    return (
        f"{where}: offset {body['offset']} is the first record at or after {body['timestamp']} ms "
        f"(its timestamp {body['record_timestamp']})"
    )


def add_commands(
    commands: Any, topic_sub: Any, common: list[argparse.ArgumentParser], with_client: WithClient
) -> None:
    """``topic create|list|delete|describe`` on ``topic_sub``, ``offsets`` and ``delete-records`` on
    ``commands``; ``common``: the server and ``--json`` options."""
    run = runner(with_client)

    async def create(client: RaftlogClient, args: argparse.Namespace) -> int:
        created = await client.create_topic(
            args.name,
            partitions=args.partitions,
            replication_factor=args.replication_factor,
            configs=dict(args.config),
        )
        print_answer(args, created, created_summary)
        return 0

    parser = topic_sub.add_parser("create", parents=common, help="create a topic")
    parser.add_argument("name")
    parser.add_argument("--partitions", type=positive, default=1)
    parser.add_argument(
        "--replication-factor", type=positive, default=None, help="default: min(3, live nodes)"
    )
    parser.add_argument(
        "--config", action="append", type=config_pair, default=[], metavar="KEY=VALUE",
        help="e.g. retention.ms=60000",
    )  # fmt: skip
    parser.set_defaults(run=run(create))

    async def grow(client: RaftlogClient, args: argparse.Namespace) -> int:
        grown = await client.add_partitions(args.name, args.partitions, validate_only=args.validate_only)
        print_answer(args, grown, lambda body: grown_summary(body, args.validate_only))
        return 0

    parser = topic_sub.add_parser(
        "add-partitions", parents=common, help="grow a topic to more partitions (keys then hash anew)"
    )
    parser.add_argument("name")
    parser.add_argument("--partitions", type=positive, required=True, help="the new count, above today's")
    parser.add_argument("--validate-only", action="store_true", help="check and place; change nothing")
    parser.set_defaults(run=run(grow))

    async def listing(client: RaftlogClient, args: argparse.Namespace) -> int:
        names = await client.topics()
        if args.json or names:  # none: no line at all, as ls prints nothing for an empty folder
            print_answer(args, names, "\n".join)
        return 0

    topic_sub.add_parser("list", parents=common, help="print topic names").set_defaults(run=run(listing))

    async def delete(client: RaftlogClient, args: argparse.Namespace) -> int:
        await client.delete_topic(args.name)
        print_answer(args, {"deleted": args.name}, lambda body: f"deleted topic {body['deleted']}")
        return 0

    parser = topic_sub.add_parser("delete", parents=common, help="delete a topic and its records")
    parser.add_argument("name")
    parser.set_defaults(run=run(delete))

    parser = topic_sub.add_parser(
        "describe", parents=common, help="a topic's partitions (leader, replicas, in sync) and configs"
    )
    parser.add_argument("name")
    parser.set_defaults(run=run(printing(lambda client, args: client.topic(args.name), describe_summary)))

    async def offsets(client: RaftlogClient, args: argparse.Namespace) -> int:
        where = {"topic": args.topic, "partition": args.partition}
        if args.timestamp is None:
            beginning, end = await client.offsets(args.topic, args.partition)
            body: dict[str, Any] = {**where, "beginning_offset": beginning, "end_offset": end}
        else:
            found = await client.offset_for_timestamp(args.topic, args.partition, args.timestamp)
            offset, record_timestamp = (None, None) if found is None else found
            body = {
                **where,
                "timestamp": args.timestamp,
                "offset": offset,
                "record_timestamp": record_timestamp,
            }
        print_answer(args, body, offsets_summary)
        return 0

    parser = commands.add_parser(
        "offsets", parents=common, help="a partition's first and next offsets, or the offset at a time"
    )
    parser.add_argument("topic")
    parser.add_argument("--partition", type=non_negative, required=True)
    parser.add_argument(
        "--timestamp", type=non_negative, metavar="MS",
        help="the first offset whose record's timestamp is at or after MS (null when none is)",
    )  # fmt: skip
    parser.set_defaults(run=run(offsets))

    async def delete_records(client: RaftlogClient, args: argparse.Namespace) -> int:
        start = await client.delete_records(args.topic, args.partition, args.before)
        body = {"topic": args.topic, "partition": args.partition, "beginning_offset": start}
        print_answer(args, body, lambda b: f"{b['topic']}/{b['partition']}: log start offset {start}")
        return 0

    parser = commands.add_parser(
        "delete-records", parents=common,
        help="delete a partition's records below an offset on every replica (Kafka's DeleteRecords)",
    )  # fmt: skip
    parser.add_argument("topic")
    parser.add_argument("--partition", type=non_negative, required=True)
    parser.add_argument(
        "--before", type=int, required=True, metavar="OFFSET",
        help="the new log start offset; -1: every committed record (the high watermark)",
    )  # fmt: skip
    parser.set_defaults(run=run(delete_records))
