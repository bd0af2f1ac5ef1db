"""``raftlog user create|list|delete``: the users a cluster serving with ``--require-auth`` lets in (HTTP
Basic now; Kafka's SASL/SCRAM uses the same credentials). The password comes from ``--password-stdin`` or
``$RAFTLOG_NEW_PASSWORD``, never from the command line."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from raftlog_cli.admin import WithClient, output_options, print_answer, runner
from raftlog_client.client import RaftlogClient


def users_summary(users: list[dict[str, Any]]) -> str:
    return "\n".join(f"{u['name']}  ({', '.join(u['mechanisms'])})" for u in users) or "(no users)"


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = os.environ.get("RAFTLOG_NEW_PASSWORD", "")
    if not password:
        raise SystemExit(
            "raftlog user create: give the password on stdin (--password-stdin) or in $RAFTLOG_NEW_PASSWORD"
        )
    return password


def add_commands(commands: Any, server: argparse.ArgumentParser, with_client: WithClient) -> None:
    common = [server, output_options()]
    run = runner(with_client)
    user = commands.add_parser("user", help="users (SCRAM credentials) for clusters that require auth")
    sub = user.add_subparsers(dest="user_command", required=True)

    async def create(client: RaftlogClient, args: argparse.Namespace) -> int:
        answer = await client.set_user(args.name, _password(args), args.mechanism or None)
        verb = "created" if answer["created"] else "new password for"
        print_answer(
            args, answer, lambda body: f"{verb} user {body['name']} ({', '.join(body['mechanisms'])})"
        )
        return 0

    parser = sub.add_parser("create", parents=common, help="create a user, or set a new password")
    parser.add_argument("name")
    parser.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin's first line"
    )
    parser.add_argument(
        "--mechanism",
        action="append",
        metavar="SCRAM-SHA-256|SCRAM-SHA-512",
        help="a SCRAM mechanism to store (repeatable; default: both)",
    )
    parser.set_defaults(run=run(create))

    async def listing(client: RaftlogClient, args: argparse.Namespace) -> int:
        print_answer(args, await client.users(), users_summary)
        return 0

    sub.add_parser("list", parents=common, help="users and their mechanisms").set_defaults(run=run(listing))

    async def delete(client: RaftlogClient, args: argparse.Namespace) -> int:
        await client.delete_user(args.name)
        print_answer(args, {"deleted": args.name}, lambda body: f"deleted user {body['deleted']}")
        return 0

    parser = sub.add_parser("delete", parents=common, help="delete a user")
    parser.add_argument("name")
    parser.set_defaults(run=run(delete))
