"""``raftlog acl create|list|delete`` against the API over fake nodes that enforce ACLs: a grant lets the
user in over HTTP Basic, the list shows it for people and as the server's JSON, a delete answers what it
removed and refuses again; a bad ACL, a delete without a filter and a refused call exit 1 or 2."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Harness, Node

from partitions.controller.commands import SetUser
from partitions.security.users import make_credential
from raftlog_cli.cli import main
from raftlog_client.client import Message, RaftlogClient
from raftlog_client.errors import RequestFailed


async def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = await asyncio.to_thread(main, list(argv))
    except SystemExit as exc:  # argparse's usage errors and the commands' own words
        code = exc.code if isinstance(exc.code, int) else 1
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
async def node(harness: Harness) -> Node:
    cluster = FakeCluster(["n1"])
    cluster.propose(SetUser("alice", (make_credential("SCRAM-SHA-256", "alice's password"),)))
    cluster.add_topic("orders", 1)
    return await harness.start(cluster, "n1", admin_token="tok", require_auth=True, enforce_acls=True)


async def alice_produces(node: Node) -> int:
    client = RaftlogClient([node.url], user=("alice", "alice's password"), retries=0)
    try:
        await client.produce("orders", [Message(b"x")], partition=0)
    except RequestFailed as exc:
        return exc.status
    finally:
        await client.close()
    return 200


async def test_grant_list_and_revoke_through_the_command(
    node: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    auth = ("--server", node.url)
    assert await alice_produces(node) == 403
    code, out, _ = await run(
        capsys,
        "acl",
        "create",
        "alice",
        "--topic",
        "orders",
        "--operation",
        "write",
        "--operation",
        "read",
        *auth,
    )
    assert code == 0 and out.startswith("created 2 ACL(s)\n"), out
    assert "allow       User:alice  write      topic  orders  literal  *" in out
    assert await alice_produces(node) == 200
    code, out, _ = await run(
        capsys, "acl", "create", "User:alice", "--topic", "orders", "--operation", "write", *auth
    )
    assert code == 0 and out.startswith("created 0 ACL(s), 1 there already")

    code, out, _ = await run(
        capsys, "acl", "list", "--json", "--principal", "alice", "--operation", "write", *auth
    )
    assert code == 0 and [(a["operation"], a["name"]) for a in json.loads(out)] == [("write", "orders")]
    code, out, _ = await run(capsys, "acl", "list", "--topic", "orders", "--pattern", "match", *auth)
    assert code == 0 and out.splitlines()[0].split() == [
        "PERMISSION", "PRINCIPAL", "OPERATION", "TYPE", "NAME", "PATTERN", "HOST"
    ] and len(out.splitlines()) == 3  # fmt: skip

    code, out, _ = await run(
        capsys,
        "acl",
        "create",
        "alice",
        "--transactional-id",
        "pay-",
        "--prefixed",
        "--operation",
        "write",
        *auth,
    )
    assert code == 0 and "allow       User:alice  write      transactional_id  pay-  prefixed  *" in out, out
    code, out, _ = await run(capsys, "acl", "delete", "--transactional-id", "pay-", "--json", *auth)
    assert code == 0 and [a["resource_type"] for a in json.loads(out)] == ["transactional_id"]
    # who may make another user's delegation tokens (KIP-373): a User resource, named as its principal
    code, out, _ = await run(
        capsys, "acl", "create", "jobs", "--user-principal", "alice", "--operation", "create_tokens", *auth
    )
    assert code == 0 and "allow       User:jobs  create_tokens  user  User:alice  literal  *" in out, out
    code, out, _ = await run(capsys, "acl", "delete", "--user-principal", "User:alice", "--json", *auth)
    assert code == 0 and [(a["resource_type"], a["name"]) for a in json.loads(out)] == [
        ("user", "User:alice")
    ]
    # who may see one delegation token besides its owner: the token, named by its id
    code, out, _ = await run(
        capsys, "acl", "create", "watcher", "--delegation-token", "Ju6x0Xg", "--operation", "describe", *auth
    )
    assert code == 0 and "User:watcher  describe   delegation_token  Ju6x0Xg  literal  *" in out, out
    code, out, _ = await run(capsys, "acl", "delete", "--delegation-token", "Ju6x0Xg", "--json", *auth)
    assert code == 0 and [a["resource_type"] for a in json.loads(out)] == ["delegation_token"]

    code, out, _ = await run(capsys, "acl", "delete", "--principal", "alice", "--operation", "write", *auth)
    assert code == 0 and out.startswith("deleted 1 ACL(s)")
    assert await alice_produces(node) == 403  # refused again at the next request
    code, out, _ = await run(capsys, "acl", "delete", "--all", "--json", *auth)
    assert code == 0 and [a["operation"] for a in json.loads(out)] == ["read"]
    code, out, _ = await run(capsys, "acl", "list", *auth)
    assert code == 0 and out.strip() == "(no ACLs)"


async def test_refusals_exit_1_and_usage_errors_2(
    node: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    auth = ("--server", node.url)
    code, _, err = await run(capsys, "acl", "create", "alice", "--group", "g", "--operation", "write", *auth)
    assert code == 1 and "40001" in err and "a group takes" in err
    code, _, err = await run(capsys, "acl", "delete", *auth)
    assert code == 2 and "give options to match them, or --all" in err
    code, _, err = await run(capsys, "acl", "create", "alice", "--operation", "read", *auth)
    assert code == 2 and "--topic" in err  # a resource is required
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "wrong")
    code, _, err = await run(capsys, "acl", "list", *auth)
    assert code == 1 and "40101" in err
