"""``raftlog user token create|list|delete`` against the API over a fake node that requires a user: the
token is printed alone on stdout, once (or in the server's JSON with ``--json``); the data commands call
with one from ``$RAFTLOG_USER_TOKEN`` or a profile's ``user_token``, never together with a user; a revoked
token is refused (exit 1, 40101)."""

from __future__ import annotations

import json
import pathlib
import re
import time
from typing import Any

import pytest
from fake_node import FakeCluster
from harness import Harness, Node
from test_cli_acls import run

from partitions.controller.commands import SetUser
from partitions.security.tokens import TOKEN_LIFETIME_MS_DEFAULT
from partitions.security.users import make_credential
from raftlog_cli import profile
from raftlog_cli.cli import build_parser
from raftlog_client.client import RaftlogClient

DAY_MS = 86_400_000


@pytest.fixture
def clean_env(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("RAFTLOG_CONFIG", str(config))
    for name in (
        "RAFTLOG_SERVER",
        "RAFTLOG_ADMIN_TOKEN",
        "RAFTLOG_PROFILE",
        "RAFTLOG_USER",
        "RAFTLOG_USER_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    return config


@pytest.fixture
async def node(harness: Harness, clean_env: pathlib.Path) -> Node:
    cluster = FakeCluster(["n1"])
    cluster.propose(SetUser("alice", (make_credential("SCRAM-SHA-256", "alice's password"),)))
    cluster.add_topic("orders", 1)
    return await harness.start(cluster, "n1", admin_token="tok", require_auth=True)


async def test_make_list_use_and_revoke_a_token(
    node: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    admin = ("--server", node.url)
    before_ms = time.time_ns() // 1_000_000
    code, out, err = await run(
        capsys, "user", "token", "create", "alice", "--expires", "30d", "--description", "nightly job", *admin
    )
    assert code == 0, err
    token = out.strip()
    assert re.fullmatch(r"rlt_[0-9a-f]{16}_[0-9a-f]{64}", token) and out == token + "\n"
    token_id = token[4:20]
    assert f"token {token_id} of user alice, expires " in err and "shown this once" in err
    (stored,) = node.node.metadata.tokens().values()
    assert stored.expires_ms is not None and stored.expires_ms - stored.created_ms == 30 * DAY_MS
    assert stored.created_ms >= before_ms and stored.description == "nightly job"

    code, out, _ = await run(capsys, "user", "token", "list", "alice", *admin)
    assert code == 0 and out.splitlines()[0].split() == ["ID", "CREATED", "EXPIRES", "DESCRIPTION"]
    assert out.splitlines()[1].startswith(token_id) and out.rstrip().endswith("nightly job")
    assert token[20:] not in out
    code, out, _ = await run(capsys, "user", "token", "list", "alice", "--json", *admin)
    assert code == 0 and [t["id"] for t in json.loads(out)] == [token_id]

    monkeypatch.setenv("RAFTLOG_USER_TOKEN", token)
    code, out, err = await run(capsys, "produce", "orders", "--value", "x", "--server", node.url)
    assert code == 0 and out == "orders/0 offset 0\n", err

    code, out, _ = await run(capsys, "user", "token", "delete", "alice", token_id, *admin)
    assert (code, out) == (0, f"revoked token {token_id} of user alice\n")
    code, _, err = await run(capsys, "produce", "orders", "--value", "x", "--server", node.url)
    assert code == 1 and "40101" in err and "wrong, expired or revoked bearer token" in err
    code, _, err = await run(capsys, "user", "token", "delete", "alice", token_id, *admin)
    assert code == 1 and "40408" in err


async def test_create_with_json_and_without_expiry_and_a_bad_duration(
    node: Node, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAFTLOG_ADMIN_TOKEN", "tok")
    admin = ("--server", node.url)
    code, out, _ = await run(capsys, "user", "token", "create", "alice", "--json", *admin)
    made = json.loads(out)
    assert code == 0 and made["token"].startswith("rlt_")
    assert made["expires_ms"] - made["created_ms"] == TOKEN_LIFETIME_MS_DEFAULT  # the node's default
    code, out, _ = await run(capsys, "user", "token", "list", "alice", *admin)
    assert made["id"] in out and "never" not in out
    code, _, err = await run(capsys, "user", "token", "create", "alice", "--expires", "3w", *admin)
    assert code == 2 and "'3w': a duration is a number >= 1 and s, m, h or d" in err
    code, _, err = await run(capsys, "user", "token", "create", "mallory", *admin)
    assert code == 1 and "40407" in err


def test_a_user_token_comes_from_the_environment_or_the_profile_never_with_a_user(
    clean_env: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = build_parser()
    token = "rlt_" + "a" * 16 + "_" + "b" * 64

    def chosen(*argv: str) -> profile.Target:
        return profile.resolve(parser.parse_args(["topic", "list", *argv]))

    assert chosen().user_token is None and chosen().user is None
    clean_env.write_text(f'user_token = "{token}"\n\n[profiles.basic]\nuser = "bob"\npassword = "pw"\n')
    assert chosen().user_token == token and chosen().user is None
    # a profile naming a user over a file naming a token: the same place, both
    with pytest.raises(profile.ProfileError, match="give a user or a user's token, not both"):
        chosen("--profile", "basic")
    monkeypatch.setenv("RAFTLOG_PASSWORD", "pw")
    target = chosen("--user", "carol")  # the command line names a user: it decides
    assert target.user == ("carol", "pw") and target.user_token is None
    monkeypatch.setenv("RAFTLOG_USER", "dave")  # the environment decides over the file
    assert chosen().user == ("dave", "pw") and chosen().user_token is None
    monkeypatch.setenv("RAFTLOG_USER_TOKEN", token)
    with pytest.raises(profile.ProfileError, match=r"\$RAFTLOG_USER and \$RAFTLOG_USER_TOKEN"):
        chosen()
    monkeypatch.delenv("RAFTLOG_USER")
    monkeypatch.setenv("RAFTLOG_USER_TOKEN", "tok")  # the admin token, put in the wrong place
    with pytest.raises(profile.ProfileError, match=r"\$RAFTLOG_USER_TOKEN is not a user's API token"):
        chosen()


def test_the_client_calls_as_a_user_one_way() -> None:
    with pytest.raises(ValueError, match="not both"):
        RaftlogClient(["http://127.0.0.1:9"], user=("a", "b"), user_token="rlt_x")
