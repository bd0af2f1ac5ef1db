"""``raftlog acl create|list|delete``: who may do what on a cluster serving with ``--enforce-acls``
(``/v1/acls``; Kafka's admin clients see the same ACLs). A principal is ``User:NAME`` or ``User:*`` (a bare
name means ``User:NAME``); a resource is ``--topic NAME``, ``--group NAME``, ``--transactional-id NAME``,
``--user-principal USER`` (whose delegation tokens another user may make or see), ``--delegation-token ID``
(a token another user may see) or ``--cluster``, ``*``
for every one of its type, ``--prefixed`` for the names that start with NAME.

    raftlog acl create alice --topic orders --operation write --operation read
    raftlog acl create User:* --topic logs- --prefixed --operation read
    raftlog acl create payments --transactional-id payments- --prefixed --operation write
    raftlog acl create spark-jobs --user-principal alice --operation create_tokens
    raftlog acl create auditor --delegation-token Ju6x0XgOQmqnGh7B5sFhMg --operation describe
    raftlog acl list --principal alice
    raftlog acl delete --principal alice --topic orders --operation write
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from raftlog_cli.admin import WithClient, command_group, output_options, print_answer, printing, runner
from raftlog_client.client import RaftlogClient

OPERATIONS = (
    "all", "read", "write", "create", "delete", "alter", "describe", "cluster_action", "describe_configs",
    "alter_configs", "idempotent_write", "create_tokens", "describe_tokens",
)  # fmt: skip
CLUSTER = "kafka-cluster"


def principal(text: str) -> str:
    """``User:NAME`` (or ``User:*``); a bare name is a user's."""
    return text if text.startswith("User:") else f"User:{text}"


def acls_summary(acls: list[dict[str, Any]]) -> str:
    """One ACL a line, in columns."""
    if not acls:
        return "(no ACLs)"
    rows = [
        [
            a["permission"],
            a["principal"],
            a["operation"],
            a["resource_type"],
            a["name"],
            a["pattern_type"],
            a["host"],
        ]
        for a in acls
    ]
    header = ["PERMISSION", "PRINCIPAL", "OPERATION", "TYPE", "NAME", "PATTERN", "HOST"]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def _resource(args: argparse.Namespace) -> tuple[str | None, str | None]:
    if args.topic is not None:
        return "topic", args.topic
    if args.group is not None:
        return "group", args.group
    if args.transactional_id is not None:
        return "transactional_id", args.transactional_id
    if args.user_principal is not None:
        return "user", principal(args.user_principal)
    if args.delegation_token is not None:
        return "delegation_token", args.delegation_token
    if args.cluster:
        return "cluster", CLUSTER
    return None, None


def _resource_options(parser: argparse.ArgumentParser, required: bool) -> None:
    which = parser.add_mutually_exclusive_group(required=required)
    which.add_argument("--topic", metavar="NAME", help="a topic ('*': every topic)")
    which.add_argument("--group", metavar="NAME", help="a consumer group ('*': every group)")
    which.add_argument(
        "--transactional-id", metavar="NAME", help="a transactional producer's id ('*': every one)"
    )
    which.add_argument(
        "--user-principal", metavar="USER",
        help="a user whose delegation tokens others may make (create_tokens) or see (describe_tokens)",
    )  # fmt: skip
    which.add_argument(
        "--delegation-token", metavar="ID", help="a delegation token, by its id, others may see (describe)"
    )
    which.add_argument("--cluster", action="store_true", help="the cluster (creating topics, managing ACLs)")


def _filter(args: argparse.Namespace) -> dict[str, str | None]:
    kind, name = _resource(args)
    return {
        "resource_type": kind,
        "name": name,
        "pattern_type": args.pattern,
        "principal": None if args.principal is None else principal(args.principal),
        "host": args.host,
        "operation": args.operation,
        "permission": args.permission,
    }


def _filter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--principal", help="User:NAME, User:* or a user's name")
    _resource_options(parser, required=False)
    parser.add_argument(
        "--pattern", choices=("literal", "prefixed", "match", "any"),
        help="of the ACLs' names: as given (default any); match: every ACL that applies to the name",
    )  # fmt: skip
    parser.add_argument("--operation", choices=OPERATIONS)
    parser.add_argument("--permission", choices=("allow", "deny"))
    parser.add_argument("--host", help="a client's IP address, or *")


def add_commands(commands: Any, server: argparse.ArgumentParser, with_client: WithClient) -> None:
    common = [server, output_options()]
    run = runner(with_client)
    sub = command_group(commands, "acl", "ACLs: who may do what (clusters serving with --enforce-acls)")

    async def create(client: RaftlogClient, args: argparse.Namespace) -> int:
        kind, name = _resource(args)
        wanted = [
            {
                "resource_type": kind,
                "name": name,
                "pattern_type": "prefixed" if args.prefixed else "literal",
                "principal": principal(args.principal),
                "host": args.host,
                "operation": operation,
                "permission": "deny" if args.deny else "allow",
            }
            for operation in dict.fromkeys(args.operation)
        ]
        answer = await client.cluster.create_acls(wanted)

        def summary(body: dict[str, Any]) -> str:
            lines = [f"created {len(body['created'])} ACL(s)"] + (
                [f"{len(body['existed'])} there already"] if body["existed"] else []
            )
            return ", ".join(lines) + "\n" + acls_summary(body["created"] + body["existed"])

        print_answer(args, answer, summary)
        return 0

    parser = sub.add_parser("create", parents=common, help="allow (or --deny) a principal operations")
    parser.add_argument("principal", help="User:NAME, User:* or a user's name")
    _resource_options(parser, required=True)
    parser.add_argument("--operation", action="append", required=True, choices=OPERATIONS, help="repeatable")
    parser.add_argument("--prefixed", action="store_true", help="every resource whose name starts with NAME")
    parser.add_argument("--deny", action="store_true", help="a DENY, which wins over any ALLOW")
    parser.add_argument("--host", default="*", help="only from this client IP address (default: *, any)")
    parser.set_defaults(run=run(create))

    parser = sub.add_parser("list", parents=common, help="the ACLs (all, or those the options match)")
    _filter_options(parser)
    parser.set_defaults(
        run=run(printing(lambda client, args: client.cluster.acls(**_filter(args)), acls_summary))
    )

    async def delete(client: RaftlogClient, args: argparse.Namespace) -> int:
        wanted = _filter(args)
        if not any(wanted.values()) and not args.all:
            print("raftlog acl delete: which ACLs? give options to match them, or --all", file=sys.stderr)
            return 2
        deleted = await client.cluster.delete_acls(
            **(wanted if any(wanted.values()) else {"resource_type": "any"})
        )
        print_answer(args, deleted, lambda body: f"deleted {len(body)} ACL(s)\n" + acls_summary(body))
        return 0

    parser = sub.add_parser("delete", parents=common, help="remove the ACLs the options match")
    _filter_options(parser)
    parser.add_argument("--all", action="store_true", help="every ACL of the cluster")
    parser.set_defaults(run=run(delete))
