"""``raftlog group list|describe|reset``: consumer groups as an operator sees them (rpk group, kafka's
consumer-groups tool): the groups (those whose last member left stay, empty, for 7 days), one group's
members, partitions, committed offsets and lag, and moving a group's committed offsets while it has no
members."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from raftlog_cli.admin import WithClient, output_options, print_answer, runner
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import RequestFailed


def list_summary(groups: list[dict[str, Any]]) -> str:
    lines = [f"{'GROUP':<32}{'MEMBERS':>8}{'GENERATION':>12}  ASSIGNOR"]
    lines += [f"{g['group']:<32}{g['members']:>8}{g['generation']:>12}  {g['assignor']}" for g in groups]
    return "\n".join(lines)


def describe_summary(body: dict[str, Any]) -> str:
    lines = [
        f"group {body['group']}: generation {body['generation']}, {len(body['members'])} member(s), "
        f"total lag {body['lag']}",
        f"{'TOPIC':<24}{'PARTITION':>10}{'COMMITTED':>11}{'END':>11}{'LAG':>9}  MEMBER",
    ]
    rows = [(row, member["instance_id"]) for member in body["members"] for row in member["partitions"]]
    rows += [(row, "-") for row in body.get("unassigned", [])]  # no member holds it (an empty group)
    for row, member in rows:
        committed = "-" if row["committed_offset"] is None else row["committed_offset"]
        lag = "-" if row["lag"] is None else row["lag"]
        where = f"{row['topic']:<24}{row['partition']:>10}"
        lines.append(f"{where}{committed:>11}{row['end_offset']:>11}{lag:>9}  {member}")
    return "\n".join(lines)


def reset_summary(rows: list[dict[str, Any]]) -> str:
    return "\n".join(f"{row['topic']}/{row['partition']} -> {row['offset']}" for row in rows)


async def _target(client: RaftlogClient, args: argparse.Namespace, partition: int) -> int:
    if args.to_offset is not None:
        return int(args.to_offset)
    if args.to_timestamp is not None:
        found = await client.offset_for_timestamp(args.topic, partition, args.to_timestamp)
        if found is not None:
            return found[0]
    beginning, end = await client.offsets(args.topic, partition)
    return beginning if args.to_earliest else end


def add_commands(commands: Any, server: argparse.ArgumentParser, with_client: WithClient) -> None:
    common = [server, output_options()]
    run = runner(with_client)

    group = commands.add_parser("group", help="consumer groups: list, describe (members, lag), reset offsets")
    sub = group.add_subparsers(dest="group_command", required=True)

    async def listing(client: RaftlogClient, args: argparse.Namespace) -> int:
        print_answer(args, await client.consumer_groups(), list_summary)
        return 0

    sub.add_parser("list", parents=common, help="every group (empty ones too, for 7 days)").set_defaults(
        run=run(listing)
    )

    async def describe(client: RaftlogClient, args: argparse.Namespace) -> int:
        print_answer(args, await client.consumer_group(args.group), describe_summary)
        return 0

    described = sub.add_parser("describe", parents=common, help="a group's members, partitions and lag")
    described.add_argument("group")
    described.set_defaults(run=run(describe))

    async def reset(client: RaftlogClient, args: argparse.Namespace) -> int:
        try:
            members = len((await client.consumer_group(args.group))["members"])
        except RequestFailed as exc:
            if exc.status != 404:  # a group without members answers 404: none to stop
                raise
            members = 0
        if members and not args.force:
            print(
                f"raftlog: group {args.group} has {members} member(s): their positions would overwrite the "
                "reset; stop them first (or --force)",
                file=sys.stderr,
            )
            return 1
        if args.partition is not None:
            partitions = [args.partition]
        else:
            partitions = [p["partition"] for p in await client.partitions(args.topic)]
        offsets = [(args.topic, p, await _target(client, args, p)) for p in partitions]
        await client.commit_offsets(args.group, offsets, reset=True)
        rows = [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets]
        print_answer(
            args, rows, lambda r: "\n".join(f"{x['topic']}/{x['partition']} -> {x['offset']}" for x in r)
        )
        return 0

    resetting = sub.add_parser(
        "reset", parents=common, help="move a group's committed offsets of a topic (no member running)"
    )
    resetting.add_argument("group")
    resetting.add_argument("--topic", required=True)
    resetting.add_argument("--partition", type=int, help="only this partition (default: all)")
    to = resetting.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start")
    to.add_argument("--to-latest", action="store_true", help="the end: skip everything there now")
    to.add_argument("--to-offset", type=int, metavar="N", help="this offset")
    to.add_argument(
        "--to-timestamp",
        type=int,
        metavar="MS",
        help="the first record at or after MS (the end when none is)",
    )
    resetting.add_argument("--force", action="store_true", help="even while the group has members")
    resetting.set_defaults(run=run(reset))
