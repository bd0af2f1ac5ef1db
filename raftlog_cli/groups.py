"""``raftlog group list|describe|reset|delete``: consumer groups as an operator sees them (rpk group,
kafka's consumer-groups tool), whichever door their members use (HTTP consumer instances or Kafka
clients): the groups (those whose last member left stay, empty, for 7 days), one group's members,
partitions, committed offsets and lag, moving a group's committed offsets while it has no members, and
deleting an empty group with its offsets."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from raftlog_cli.admin import WithClient, command_group, output_options, print_answer, printing, runner
from raftlog_cli.table import Column, table
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import RequestFailed

GROUPS = (
    Column("GROUP", "<32"), Column("TYPE", "<9"), Column("STATE", "<21"), Column("DOOR", "<7"),
    Column("MEMBERS", ">8"),
    Column("GENERATION", ">12"), Column("ASSIGNOR", gap="  "),
)  # fmt: skip
OFFSETS = (
    Column("TOPIC", "<24"), Column("PARTITION", ">10"), Column("COMMITTED", ">11"), Column("END", ">11"),
    Column("LAG", ">9"), Column("MEMBER", gap="  "),
)  # fmt: skip


def list_summary(groups: list[dict[str, Any]]) -> str:
    rows = [
        (
            g["group"],
            g.get("group_type", "classic"),
            g["state"],
            g["door"] or "-",
            g["members"],
            g["generation"],
            g["assignor"] or "-",
        )
        for g in groups
    ]
    return "\n".join(table(GROUPS, rows))


def describe_summary(body: dict[str, Any]) -> str:
    door = f" over {body['door'].upper() if body['door'] == 'http' else 'Kafka'}" if body["door"] else ""
    lines = [
        f"group {body['group']}: {body['state']}, generation {body['generation']}, "
        f"{len(body['members'])} member(s){door}, total lag {body['lag']}",
    ]
    lines += [
        f"  member {m['instance_id']} (client {m['client_id'] or '-'} from {m['client_host'] or '-'})"
        for m in body["members"]
    ]
    held = [(row, member["instance_id"]) for member in body["members"] for row in member["partitions"]]
    held += [(row, "-") for row in body.get("unassigned", [])]  # no member holds it (an empty group)
    rows = [
        (
            r["topic"],
            r["partition"],
            _or_dash(r["committed_offset"]),
            r["end_offset"],
            _or_dash(r["lag"]),
            member,
        )
        for r, member in held
    ]
    return "\n".join(lines + table(OFFSETS, rows))


def _or_dash(value: object) -> object:
    return "-" if value is None else value


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

    sub = command_group(
        commands,
        "group",
        "consumer groups of both doors: list, describe (members, lag), reset offsets, delete",
    )
    sub.add_parser("list", parents=common, help="every group (empty ones too, for 7 days)").set_defaults(
        run=run(printing(lambda client, args: client.consumer_groups(), list_summary))
    )

    described = sub.add_parser("describe", parents=common, help="a group's members, partitions and lag")
    described.add_argument("group")
    described.set_defaults(
        run=run(printing(lambda client, args: client.consumer_group(args.group), describe_summary))
    )

    async def reset(client: RaftlogClient, args: argparse.Namespace) -> int:
        try:
            described = await client.consumer_group(args.group)
        except RequestFailed as exc:
            if exc.status != 404:  # no such group (yet): no member to stop
                raise
            described = {"members": [], "door": None}
        members = len(described["members"])
        if members:
            how = "HTTP consumer instances" if described["door"] == "http" else "Kafka consumers"
            if not args.force:
                print(
                    f"raftlog: group {args.group} has {members} live member(s) ({how}): their next commit "
                    "would undo the reset; stop them first (or --force)",
                    file=sys.stderr,
                )
                return 1
            print(
                f"raftlog: group {args.group} has {members} live member(s) ({how}); resetting anyway "
                "(--force): a member that commits again (an auto commit, within seconds) moves its "
                "partitions' offsets back to its own position",
                file=sys.stderr,
            )
        if args.partition is not None:
            partitions = [args.partition]
        else:
            partitions = [p["partition"] for p in await client.partitions(args.topic)]
        offsets = [(args.topic, p, await _target(client, args, p)) for p in partitions]
        await client.commit_offsets(args.group, offsets, reset=True, force=args.force)
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
    resetting.add_argument(
        "--force",
        action="store_true",
        help="even while the group has live members (a member's next commit overwrites the reset of the "
        "partitions it holds)",
    )
    resetting.set_defaults(run=run(reset))

    async def delete(client: RaftlogClient, args: argparse.Namespace) -> int:
        print_answer(
            args,
            await client.delete_consumer_group(args.group),
            lambda d: f"deleted group {d['group']} and its offsets of {d['offsets_deleted']} partition(s)",
        )
        return 0

    deleting = sub.add_parser(
        "delete", parents=common, help="delete an empty group and its committed offsets (no member running)"
    )
    deleting.add_argument("group")
    deleting.set_defaults(run=run(delete))
