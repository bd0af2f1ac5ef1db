"""Users' API tokens on a real 3-node cluster (node processes, ``--require-auth --enforce-acls``), tried
with curl and with the ``raftlog`` command: a token made through one node calls the data API as its user
on the others, its user's ACLs decide (refused 403 without WRITE, let in once granted), and a revoked
token, an expired one, the token of a deleted user and one made before its user's password was reset are
refused with 401 on every node; a token made without an expiry lasts the default seven days."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from serve_args import token_file
from test_auth import curl, node_processes

from partitions.security.tokens import TOKEN_LIFETIME_MS_DEFAULT
from tests.waiting import wait_for

TOKEN = "admin-token-for-the-token-test"
ADMIN = ("-H", f"Authorization: Bearer {TOKEN}")
JSON = ("-H", "Content-Type: application/json")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    root = tmp_path_factory.mktemp("tokens")
    with node_processes(root, "--require-auth", "--enforce-acls", *token_file(root, TOKEN)) as urls:
        status, body, _ = curl(
            "-XPOST", f"{urls[0]}/v1/topics", *JSON, *ADMIN,
            "-d", '{"name": "tokened", "partitions": 1, "replication_factor": 3}',
        )  # fmt: skip
        assert status == 201, body
        yield urls


def produce(url: str, token: str) -> int:
    status, _, _ = curl(
        "-XPOST", f"{url}/topics/tokened/partitions/0", *JSON, "-H", f"Authorization: Bearer {token}",
        "-d", '{"records": [{"value": "v"}]}',
    )  # fmt: skip
    return status


def make_user(url: str, name: str) -> None:
    status, body, _ = curl(
        "-XPOST", f"{url}/v1/users", *JSON, *ADMIN, "-d", f'{{"name": "{name}", "password": "p4ss"}}'
    )
    assert status == 200, body


def make_token(url: str, user: str, body: str = "{}") -> dict[str, object]:
    status, made, _ = curl("-XPOST", f"{url}/v1/users/{user}/tokens", *JSON, *ADMIN, "-d", body)
    assert status == 201 and isinstance(made, dict), made
    return made


def grant_write(url: str, user: str) -> None:
    acl = f'{{"resource_type": "topic", "name": "tokened", "principal": "User:{user}", "operation": "write"}}'
    status, body, _ = curl("-XPOST", f"{url}/v1/acls", *JSON, *ADMIN, "-d", f'{{"acls": [{acl}]}}')
    assert status == 200, body


def test_a_token_made_on_one_node_works_on_the_others_as_its_user_until_revoked(servers: list[str]) -> None:
    first, second, third = servers
    make_user(first, "carol")
    made = make_token(second, "carol", '{"description": "ingest job"}')
    token = str(made["token"])
    # the token reached n3's controller metadata: let in, then refused by carol's ACLs (no WRITE yet)
    wait_for(lambda: produce(third, token) == 403, "carol's token not let in on n3", 15, every_s=0.1)
    grant_write(first, "carol")
    wait_for(lambda: produce(third, token) == 200, "carol's WRITE applied on n3", 15, every_s=0.1)
    assert produce(first, token) == 200

    status, listed, _ = curl(f"{third}/v1/users/carol/tokens", *ADMIN)
    assert status == 200 and isinstance(listed, dict)
    assert [(t["id"], t["description"]) for t in listed["tokens"]] == [(made["id"], "ingest job")]
    assert token[20:] not in str(listed)  # never the secret again

    status, _, _ = curl("-XDELETE", f"{first}/v1/users/carol/tokens/{made['id']}", *ADMIN)
    assert status == 204
    wait_for(lambda: produce(second, token) == 401, "the revoked token refused on n2", 15, every_s=0.1)
    status, body, _ = curl(
        "-XPOST", f"{third}/topics/tokened/partitions/0", *JSON, "-H", f"Authorization: Bearer {token}",
        "-d", '{"records": [{"value": "v"}]}',
    )  # fmt: skip
    assert status == 401 and body == {
        "error_code": 40101,
        "message": "wrong, expired or revoked bearer token",
    }, body
    status, records, _ = curl(f"{first}/topics/tokened/partitions/0/records?offset=0", *ADMIN)
    assert status == 200 and isinstance(records, list) and len(records) == 2  # the refused wrote nothing


def test_an_expired_token_and_a_deleted_users_tokens_are_refused(servers: list[str]) -> None:
    first, second, third = servers
    make_user(second, "erin")
    grant_write(second, "erin")
    expiring = str(make_token(first, "erin", '{"lifetime_ms": 3000}')["token"])
    lasting = str(make_token(third, "erin")["token"])
    wait_for(lambda: produce(second, lasting) == 200, "erin's token let in on n2", 15, every_s=0.1)
    wait_for(lambda: produce(second, expiring) == 200, "the expiring token let in on n2", 2.5, every_s=0.1)
    wait_for(lambda: produce(second, expiring) == 401, "the expired token refused on n2", 15, every_s=0.1)
    assert produce(third, expiring) == 401 and produce(third, lasting) == 200
    status, listed, _ = curl(f"{third}/v1/users/erin/tokens", *ADMIN)  # expired, not revoked
    assert status == 200 and isinstance(listed, dict)
    assert sorted(t["expired"] for t in listed["tokens"]) == [False, True]

    status, _, _ = curl("-XDELETE", f"{first}/v1/users/erin", *ADMIN)
    assert status == 204
    wait_for(
        lambda: all(produce(url, lasting) == 401 for url in servers),
        "the deleted user's token refused on every node",
        15,
        every_s=0.1,
    )
    status, body, _ = curl(f"{second}/v1/users/erin/tokens", *ADMIN)
    assert status == 404 and isinstance(body, dict) and body["error_code"] == 40407


def test_a_password_reset_revokes_the_users_tokens_and_a_token_lasts_seven_days_by_default(
    servers: list[str],
) -> None:
    first, second, third = servers
    make_user(first, "gina")
    grant_write(first, "gina")
    made = make_token(second, "gina")  # no expiry asked: the node's default lifetime
    assert made["expires_ms"] == made["created_ms"] + TOKEN_LIFETIME_MS_DEFAULT  # type: ignore[operator]
    token = str(made["token"])
    let_in = lambda: all(produce(url, token) == 200 for url in servers)  # noqa: E731
    wait_for(let_in, "gina's token let in on every node", 15, every_s=0.1)
    status, body, _ = curl(
        "-XPOST", f"{third}/v1/users", *JSON, *ADMIN, "-d", '{"name": "gina", "password": "n3w p4ss"}'
    )
    assert status == 200 and isinstance(body, dict) and body["created"] is False, body

    def reset_on(url: str) -> bool:
        """Whether the node applied the new password; its tokens are refused from the same change on."""
        status, _, _ = curl(
            "-XPOST", f"{url}/topics/tokened/partitions/0", *JSON, "-u", "gina:n3w p4ss",
            "-d", '{"records": [{"value": "v"}]}',
        )  # fmt: skip
        if status != 200:
            return False
        assert produce(url, token) == 401, f"{url} took gina's new password and her old token both"
        return True

    for url in servers:
        wait_for(lambda url=url: reset_on(url), f"gina's new password applied on {url}", 15, every_s=0.1)
    status, listed, _ = curl(f"{first}/v1/users/gina/tokens", *ADMIN)
    assert status == 200 and listed == {"tokens": []}


def test_the_command_line_makes_lists_and_revokes_tokens_and_calls_with_one(
    servers: list[str], tmp_path: pathlib.Path
) -> None:
    raftlog = [sys.executable, "-m", "raftlog_cli"]
    admin_env = {**os.environ, "RAFTLOG_SERVER": servers[0], "RAFTLOG_ADMIN_TOKEN": TOKEN}
    for variable in ("RAFTLOG_USER", "RAFTLOG_USER_TOKEN", "RAFTLOG_PROFILE"):
        admin_env.pop(variable, None)
    admin_env["RAFTLOG_CONFIG"] = str(tmp_path / "none.toml")

    def run(*argv: str, env: dict[str, str] = admin_env) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*raftlog, *argv], capture_output=True, text=True, env=env, timeout=60)

    make_user(servers[0], "dave")
    grant_write(servers[0], "dave")
    created = run("user", "token", "create", "dave", "--expires", "1h", "--description", "from the cli")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()  # the token alone on stdout
    assert token.startswith("rlt_") and len(token) == 85, created.stdout
    assert "shown this once" in created.stderr and token[4:20] in created.stderr

    listed = run("user", "token", "list", "dave")
    assert token[4:20] in listed.stdout and "from the cli" in listed.stdout and token not in listed.stdout

    as_dave = {k: v for k, v in admin_env.items() if k != "RAFTLOG_ADMIN_TOKEN"}
    as_dave.update(RAFTLOG_SERVER=servers[2], RAFTLOG_USER_TOKEN=token)
    deadline = time.monotonic() + 15
    while (produced := run("produce", "tokened", "--value", "x", env=as_dave)).returncode != 0:
        assert time.monotonic() < deadline, produced.stderr
        time.sleep(0.2)
    assert "tokened/0 offset" in produced.stdout

    revoked = run("user", "token", "delete", "dave", token[4:20])
    assert revoked.returncode == 0 and f"revoked token {token[4:20]} of user dave" in revoked.stdout
    deadline = time.monotonic() + 15
    while (refused := run("produce", "tokened", "--value", "x", env=as_dave)).returncode == 0:
        assert time.monotonic() < deadline, "a revoked token still let in"
        time.sleep(0.2)
    assert refused.returncode == 1 and "40101" in refused.stderr, refused.stderr
    gone = run("user", "token", "delete", "dave", token[4:20])
    assert gone.returncode == 1 and "40408" in gone.stderr
