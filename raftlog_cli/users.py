"""``raftlog user create|list|delete``: the users a cluster serving with ``--require-auth`` lets in (HTTP
Basic; Kafka's SASL/SCRAM uses the same credentials). The password comes from ``--password-stdin`` or
``$RAFTLOG_NEW_PASSWORD``, never from the command line.

``raftlog user token create|list|delete``: a user's API tokens, with which a program calls the data API as
that user (``Authorization: Bearer rlt_...``; the ``raftlog`` command takes one from
``$RAFTLOG_USER_TOKEN`` or a profile's ``user_token``). ``create`` prints the token alone on stdout (what
it says of it goes to stderr), so that ``TOKEN=$(raftlog user token create alice)`` keeps it: it is shown
this once."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Callable
from typing import Any

from raftlog_cli.admin import (
    ArgsWork,
    WithClient,
    command_group,
    output_options,
    print_answer,
    printing,
    runner,
)
from raftlog_cli.arguments import duration_ms
from raftlog_cli.table import Column, table
from raftlog_client.client import RaftlogClient

TOKENS = (
    Column("ID", "<16"), Column("CREATED", "<20", "  "), Column("EXPIRES", "<20", "  "),
    Column("DESCRIPTION", gap="  "),
)  # fmt: skip


def users_summary(users: list[dict[str, Any]]) -> str:
    return "\n".join(f"{u['name']}  ({', '.join(u['mechanisms'])})" for u in users) or "(no users)"


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def tokens_summary(tokens: list[dict[str, Any]]) -> str:
    if not tokens:
        return "(no tokens)"
    rows = [
        (
            t["id"],
            _when(t["created_ms"]),
            "expired" if t["expired"] else _when(t["expires_ms"]),
            t["description"],
        )
        for t in tokens
    ]
    return "\n".join(table(TOKENS, rows))


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
    sub = command_group(commands, "user", "users (SCRAM credentials) for clusters that require auth")

    async def create(client: RaftlogClient, args: argparse.Namespace) -> int:
        answer = await client.cluster.set_user(args.name, _password(args), args.mechanism or None)
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

    sub.add_parser("list", parents=common, help="users and their mechanisms").set_defaults(
        run=run(printing(lambda client, args: client.cluster.users(), users_summary))
    )

    async def delete(client: RaftlogClient, args: argparse.Namespace) -> int:
        await client.cluster.delete_user(args.name)
        print_answer(args, {"deleted": args.name}, lambda body: f"deleted user {body['deleted']}")
        return 0

    parser = sub.add_parser("delete", parents=common, help="delete a user (its tokens are revoked)")
    parser.add_argument("name")
    parser.set_defaults(run=run(delete))
    _token_commands(sub, common, run)


def _token_commands(
    sub: Any,
    common: list[argparse.ArgumentParser],
    run: Callable[[ArgsWork], Callable[[argparse.Namespace], int]],
) -> None:
    tokens = command_group(
        sub, "token", "a user's API tokens: call the data API as the user without its password"
    )

    async def create(client: RaftlogClient, args: argparse.Namespace) -> int:
        answer = await client.cluster.create_token(
            args.name, lifetime_ms=args.expires, description=args.description
        )
        if args.json:
            print_answer(args, answer, str)
            return 0
        print(answer["token"])
        print(
            f"token {answer['id']} of user {answer['user']}, expires {_when(answer['expires_ms'])}: shown "
            "this once, keep it now (a program sends it as 'Authorization: Bearer <token>'; the raftlog "
            "command takes it from $RAFTLOG_USER_TOKEN)",
            file=sys.stderr,
        )
        return 0

    parser = tokens.add_parser("create", parents=common, help="make a token of the user (printed once)")
    parser.add_argument("name", help="the user the token calls as")
    parser.add_argument(
        "--expires",
        type=duration_ms,
        metavar="DURATION",
        help="expire after 90s, 30m, 12h, 30d... (default: the node's raftlog serve "
        "--api-token-lifetime-ms, 7 days)",
    )
    parser.add_argument("--description", help="what the token is for (shown by list)")
    parser.set_defaults(run=run(create))

    parser = tokens.add_parser("list", parents=common, help="the user's tokens (never their text)")
    parser.add_argument("name")
    parser.set_defaults(
        run=run(printing(lambda client, args: client.cluster.tokens(args.name), tokens_summary))
    )

    async def delete(client: RaftlogClient, args: argparse.Namespace) -> int:
        await client.cluster.delete_token(args.name, args.id)
        revoked = {"revoked": args.id, "user": args.name}
        print_answer(args, revoked, lambda body: f"revoked token {body['revoked']} of user {body['user']}")
        return 0

    parser = tokens.add_parser("delete", parents=common, help="revoke one of the user's tokens")
    parser.add_argument("name")
    parser.add_argument("id", help="the token's id (the 16 hex digits after rlt_, or from list)")
    parser.set_defaults(run=run(delete))
