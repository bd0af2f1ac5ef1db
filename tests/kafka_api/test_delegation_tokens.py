"""Kafka's delegation tokens on a real 3-node ``raftlog dev --secure`` cluster (TLS, ``--require-auth``,
``--enforce-acls``, an admin super user), judged by Apache Kafka 4.4's own tool (``kafka-delegation-tokens``,
``org.apache.kafka.tools.DelegationTokenCommand``) and Kafka's Java client logging in with a token
(``ScramLoginModule`` with ``tokenauth="true"``): a user makes a token on one node, every node takes it
(its HMAC is derived from the cluster secret, never replicated), the token logs in as its owner, and
renewals and expiries follow Kafka's rules. The abuse: a token-authenticated connection may not make,
renew or describe tokens; an anonymous one neither; a user who is neither owner nor renewer may not renew
or expire another's token; an expired token logs in nowhere and a connection it opened is cut; a user
may hold at most 100 tokens (POLICY_VIOLATION past it); a token for another owner is a super user's, or
one's who holds CREATE_TOKENS on that owner's User resource (KIP-373)."""

from __future__ import annotations

import base64
import datetime
import json
import pathlib
import re
import ssl
import struct
import subprocess
import types
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from token_tool import delegation_tokens, java_config, kafka_tool

from kafka_api import wire
from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for

PATIENCE_S = 15.0  # a change made through one node reaches the others' controller metadata within it
CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("tokens")
    with LocalCluster(str(directory), nodes=3, dev_args=["--secure"]) as running:
        yield running


def curl_admin(cluster: LocalCluster, method: str, path: str, body: object = None) -> tuple[int, str]:
    bearer = f"Authorization: Bearer {cluster.security['admin_token']}"
    argv = ["curl", "-sS", "--max-time", "20", "--cacert", cluster.security["ca"], "-w", "\n%{http_code}"]
    argv += ["-X", method, cluster.servers[0] + path, "-H", bearer]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    text, _, status = done.stdout.rpartition("\n")
    return int(status or 0), text


def http_produce(cluster: LocalCluster, node: str, user: str, password: str) -> tuple[int, str]:
    """A produce over HTTP with Basic credentials (through a file: a password is never in argv)."""
    url = f"{cluster.urls[node]}/topics/tokened/partitions/0"
    argv = ["curl", "-sS", "--max-time", "20", "--cacert", cluster.security["ca"], "-w", "\n%{http_code}"]
    argv += ["-X", "POST", url, "-H", "Content-Type: application/json", "-d", '{"records": [{"value": "v"}]}']
    credentials = base64.b64encode(f"{user}:{password}".encode()).decode()
    done = subprocess.run(
        [*argv, "-H", "@-"], input=f"Authorization: Basic {credentials}\n", capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    text, _, status = done.stdout.rpartition("\n")
    return int(status or 0), text


def make_user(cluster: LocalCluster, name: str, password: str) -> None:
    status, body = curl_admin(cluster, "POST", "/v1/users", {"name": name, "password": password})
    assert status == 200, body
    for node in cluster.kafka:  # every node's metadata has it before the test goes on
        wait_for(lambda n=node: _logs_in(cluster, n, name, password), f"{name} known at {node}", PATIENCE_S)


class _TokenScram(ScramClient):  # type: ignore[misc]
    """kafka-python's SCRAM client, with Kafka's delegation token extension (``tokenauth=true``)."""

    def first_message(self) -> bytes:
        bare = b"n=" + self.user + b",r=" + self.nonce + b",tokenauth=true"
        self.auth_message += bare
        return b"n,,n=" + self.user + b",r=" + self.nonce + b",tokenauth=true"


def _connect(cluster: LocalCluster, node: str) -> RawKafka:
    return RawKafka(cluster.kafka[node], ssl.create_default_context(cafile=cluster.security["ca"]))


def _login(raw: RawKafka, user: str, password: str, token: bool = False) -> bool:
    mechanism = "SCRAM-SHA-512"
    handshake = raw.call(17, 1, wire.build(wire.request_class(17, 1), mechanism=mechanism))
    assert handshake.error_code is ErrorCode.none
    client = (_TokenScram if token else ScramClient)(user, password, mechanism)
    request = wire.request_class(36, 2)
    first = raw.call(36, 2, wire.build(request, auth_bytes=client.first_message()))
    if first.error_code is not ErrorCode.none:
        return False
    client.process_server_first_message(first.auth_bytes)
    final = raw.call(36, 2, wire.build(request, auth_bytes=client.final_message()))
    if final.error_code is not ErrorCode.none:
        return False
    client.process_server_final_message(final.auth_bytes)  # the node proved it holds the credential
    return True


def _logs_in(cluster: LocalCluster, node: str, user: str, password: str, token: bool = False) -> bool:
    raw = _connect(cluster, node)
    try:
        return _login(raw, user, password, token)
    finally:
        raw.close()


def logged_in(
    cluster: LocalCluster, user: str, password: str, node: str = "n1", token: bool = False
) -> RawKafka:
    raw = _connect(cluster, node)
    assert _login(raw, user, password, token), f"{user} could not log in at {node}"
    return raw


def call(raw: RawKafka, api_key: int, version: int, body: Any) -> Any:
    """The answer; only its error code when it is not NONE: a refusal carries Kafka's -1 timestamps
    (``ErrorTimestamp``), which kio does not read back."""
    raw.send_raw(raw.frame(api_key, version, body))
    size = struct.unpack(">i", raw._read(4))[0]
    frame = raw._read(size)
    cls = wire.response_class(api_key, version)
    _, used = entity_reader(cls.__header_schema__)(frame, 0)
    code = ErrorCode(struct.unpack_from(">h", frame, used)[0])
    if code is not ErrorCode.none:
        return types.SimpleNamespace(error_code=code)
    return entity_reader(cls)(frame, used)[0]


def create(
    raw: RawKafka, max_lifetime_ms: int = -1, renewers: tuple[str, ...] = (), owner: str | None = None
) -> Any:
    cls = wire.request_class(CREATE, 3)
    renewer_cls = wire.sibling(cls, "CreatableRenewers")
    return call(raw, CREATE, 3, wire.build(
        cls, owner_principal_type="User" if owner else None, owner_principal_name=owner,
        renewers=tuple(wire.build(renewer_cls, principal_type="User", principal_name=r) for r in renewers),
        max_lifetime=_ms(max_lifetime_ms),
    ))  # fmt: skip


def renew(raw: RawKafka, mac: bytes, period_ms: int) -> Any:
    return call(
        raw, RENEW, 2, wire.build(wire.request_class(RENEW, 2), hmac=mac, renew_period=_ms(period_ms))
    )


def expire(raw: RawKafka, mac: bytes, period_ms: int) -> Any:
    cls = wire.request_class(EXPIRE, 2)
    return call(raw, EXPIRE, 2, wire.build(cls, hmac=mac, expiry_time_period=_ms(period_ms)))


def describe(raw: RawKafka, owners: list[str] | None = None) -> Any:
    cls = wire.request_class(DESCRIBE, 3)
    owner_cls = wire.sibling(cls, "DescribeDelegationTokenOwner")
    asked = None if owners is None else tuple(
        wire.build(owner_cls, principal_type="User", principal_name=o) for o in owners
    )  # fmt: skip
    return call(raw, DESCRIBE, 3, wire.build(cls, owners=asked))


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def test_kafkas_tool_makes_a_token_that_logs_in_on_every_node_as_its_owner(
    cluster: LocalCluster, tmp_path: pathlib.Path
) -> None:
    make_user(cluster, "spark", "spark's password")
    make_user(cluster, "renewer", "the renewer's password")
    config = java_config(tmp_path, cluster, "spark", "spark's password")
    made = delegation_tokens(
        cluster, config, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:renewer"
    )
    assert made.returncode == 0, made.stderr
    row = re.search(r"^(\S{22})\s+(\S+)\s+User:spark\s+User:spark\s+\[User:renewer\]", made.stdout, re.M)
    assert row is not None, made.stdout
    token_id, mac = row.group(1), row.group(2)
    assert base64.b64decode(mac) and len(base64.b64decode(mac)) == 64  # HmacSHA512, as Kafka's
    # every node takes it (the HMAC is the cluster's, not one node's) once its metadata has the token
    for node in ("n1", "n2", "n3"):
        wait_for(lambda n=node: _logs_in(cluster, n, token_id, mac, token=True), node, PATIENCE_S)
    # the tool's describe finds it (the owner's call), with the same HMAC; without --owner-principal the
    # tool sends an empty list of owners, which Kafka answers with no token, as raftlog does
    described = delegation_tokens(cluster, config, "--describe", "--owner-principal", "User:spark")
    assert described.returncode == 0 and token_id in described.stdout and mac in described.stdout
    # Kafka's Java client logs in with it
    token_config = java_config(tmp_path, cluster, token_id, mac, token=True)
    listed = kafka_tool("org.apache.kafka.tools.TopicCommand", cluster, token_config, "--list")
    assert listed.returncode == 0, listed.stderr
    # a wrong HMAC is refused
    assert not _logs_in(cluster, "n2", token_id, base64.b64encode(b"\0" * 64).decode(), token=True)
    # a token may not make a token (Kafka: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    again = delegation_tokens(cluster, token_config, "--create", "--max-life-time-period", "-1")
    assert again.returncode != 0 and "UnsupportedByAuthenticationException" in again.stderr + again.stdout
    # the renewer renews it with the tool; the owner pushes it back; the tool's answers carry the new expiry
    renewer_config = java_config(tmp_path, cluster, "renewer", "the renewer's password")
    renewed = delegation_tokens(
        cluster, renewer_config, "--renew", "--hmac", mac, "--renew-time-period", "-1"
    )
    assert renewed.returncode == 0 and "Completed renew operation" in renewed.stdout, renewed.stderr
    expired = delegation_tokens(cluster, config, "--expire", "--hmac", mac, "--expiry-time-period", "-1")
    assert expired.returncode == 0 and "Completed expire operation" in expired.stdout, expired.stderr
    # gone: it logs in nowhere
    for node in ("n1", "n2", "n3"):
        wait_for(lambda n=node: not _logs_in(cluster, n, token_id, mac, token=True), node, PATIENCE_S)
    # its secret is in no node's log (nor the dev supervisor's), though it was used and refused
    logs = [p for p in pathlib.Path(cluster.directory).rglob("*.log") if p.is_file()]
    assert logs, "the nodes' logs are where the cluster's directory keeps them"
    for log in logs:
        assert mac not in log.read_text(errors="replace"), log


def test_a_token_connection_may_not_make_renew_or_describe_tokens(cluster: LocalCluster) -> None:
    make_user(cluster, "ann", "ann's password")
    raw = logged_in(cluster, "ann", "ann's password")
    made = create(raw)
    assert made.error_code is ErrorCode.none and made.principal_name == "ann"
    assert made.token_requester_principal_name == "ann"
    life = made.max_timestamp - made.issue_timestamp
    assert life.total_seconds() == 7 * 86_400  # the node's default, Kafka's delegation.token.max.lifetime.ms
    assert (made.expiry_timestamp - made.issue_timestamp).total_seconds() == 86_400  # expiry.time.ms
    mac = made.hmac
    b64 = base64.b64encode(mac).decode()
    wait_for(lambda: _logs_in(cluster, "n3", made.token_id, b64, token=True), "n3 knows it", PATIENCE_S)
    by_token = logged_in(cluster, made.token_id, b64, node="n3", token=True)
    try:
        assert create(by_token).error_code is ErrorCode.delegation_token_request_not_allowed
        assert renew(by_token, mac, -1).error_code is ErrorCode.delegation_token_request_not_allowed
        assert describe(by_token).error_code is ErrorCode.delegation_token_request_not_allowed
    finally:
        by_token.close()
    # over HTTP the same pair is HTTP Basic's user and password: let in as ann (then refused by ann's
    # ACLs, which grant nothing), where a wrong HMAC is not let in
    assert http_produce(cluster, "n2", made.token_id, b64)[0] == 403
    wrong = base64.b64encode(b"\1" * 64).decode()
    assert http_produce(cluster, "n2", made.token_id, wrong)[0] == 401
    answer = describe(raw, ["ann"])
    assert answer.error_code is ErrorCode.none
    assert [(t.token_id, t.hmac, t.principal_name) for t in answer.tokens] == [(made.token_id, mac, "ann")]
    assert describe(raw, []).tokens == ()  # an empty list of owners: none, as Kafka answers
    raw.close()


def test_only_the_owner_and_renewers_renew_or_expire(cluster: LocalCluster) -> None:
    for name in ("owner", "friend", "mallory"):
        make_user(cluster, name, f"{name}'s password")
    owner = logged_in(cluster, "owner", "owner's password")
    made = create(owner, max_lifetime_ms=3_600_000, renewers=("friend",))
    assert made.error_code is ErrorCode.none
    assert (made.max_timestamp - made.issue_timestamp).total_seconds() == 3600  # less was asked: less given
    mallory = logged_in(cluster, "mallory", "mallory's password", node="n2")
    wait_for(lambda: renew(mallory, made.hmac, -1).error_code is not ErrorCode.delegation_token_not_found,
             "n2 knows the token", PATIENCE_S)  # fmt: skip
    assert renew(mallory, made.hmac, -1).error_code is ErrorCode.delegation_token_owner_mismatch
    assert expire(mallory, made.hmac, -1).error_code is ErrorCode.delegation_token_owner_mismatch
    assert describe(mallory).tokens == ()  # neither owner, requester nor renewer: not shown
    assert renew(mallory, b"\0" * 64, -1).error_code is ErrorCode.delegation_token_not_found
    friend = logged_in(cluster, "friend", "friend's password", node="n3")
    wait_for(lambda: renew(friend, made.hmac, 1000).error_code is ErrorCode.none, "friend renews", PATIENCE_S)
    assert [t.token_id for t in describe(friend).tokens] == [made.token_id]  # a renewer sees it
    # a token for another owner is a super user's to make (without an ACL on the owner's User resource)
    assert create(mallory, owner="owner").error_code is ErrorCode.delegation_token_authorization_failed
    admin = logged_in(cluster, cluster.security["user"], cluster.security["password"])
    on_behalf = create(admin, owner="owner")
    assert on_behalf.error_code is ErrorCode.none and on_behalf.principal_name == "owner"
    assert on_behalf.token_requester_principal_name == cluster.security["user"]
    assert create(admin, owner="nobody").error_code is ErrorCode.resource_not_found  # owners are users
    for raw in (owner, mallory, friend, admin):
        raw.close()


def test_a_user_acl_lets_another_user_make_or_see_an_owners_tokens(
    cluster: LocalCluster, tmp_path: pathlib.Path
) -> None:
    """KIP-373, made with Kafka's own ``kafka-acls --user-principal`` as an operator would: CREATE_TOKENS on
    an owner's User resource lets a user who is no super user make tokens for that owner (for no other),
    DESCRIBE_TOKENS lets one see that owner's tokens (and no one else's)."""
    for name in ("holder", "maker", "auditor"):
        make_user(cluster, name, f"{name}'s password")
    maker = logged_in(cluster, "maker", "maker's password")
    auditor = logged_in(cluster, "auditor", "auditor's password", node="n3")
    assert create(maker, owner="holder").error_code is ErrorCode.delegation_token_authorization_failed
    admin = java_config(tmp_path, cluster, cluster.security["user"], cluster.security["password"])
    for who, operation in (("User:maker", "CreateTokens"), ("User:auditor", "DescribeTokens")):
        added = kafka_tool("org.apache.kafka.tools.AclCommand", cluster, admin, "--add", "--allow-principal",
                           who, "--operation", operation, "--user-principal", "User:holder")  # fmt: skip
        assert added.returncode == 0, added.stderr
    listed = kafka_tool("org.apache.kafka.tools.AclCommand", cluster, admin, "--list", "--user-principal",
                        "User:holder")  # fmt: skip
    assert "resourceType=USER, name=User:holder, patternType=LITERAL" in listed.stdout, listed.stdout
    assert "principal=User:maker, host=*, operation=CREATE_TOKENS, permissionType=ALLOW" in listed.stdout
    made: list[Any] = []

    def made_for_holder() -> bool:  # once n1's metadata has the ACL
        made.append(create(maker, owner="holder"))
        return made[-1].error_code is ErrorCode.none

    wait_for(made_for_holder, "maker makes holder's token", PATIENCE_S)
    token = made[-1]
    assert (token.principal_name, token.token_requester_principal_name) == ("holder", "maker")
    assert create(maker, owner="auditor").error_code is ErrorCode.delegation_token_authorization_failed
    wait_for(lambda: [t.token_id for t in describe(auditor).tokens] == [token.token_id],
             "the auditor sees holder's token, and no other", PATIENCE_S)  # fmt: skip
    assert [t.principal_name for t in describe(auditor, ["holder"]).tokens] == ["holder"]
    assert create(auditor, owner="holder").error_code is ErrorCode.delegation_token_authorization_failed
    assert token.token_id in [t.token_id for t in describe(maker).tokens]  # its requester sees it (Kafka too)
    for raw in (maker, auditor):
        raw.close()


def test_an_acl_on_one_token_lets_another_user_see_that_token_and_no_other(
    cluster: LocalCluster, tmp_path: pathlib.Path
) -> None:
    """DESCRIBE on a DelegationToken resource, named by the token's id and made with Kafka's own
    ``kafka-acls --delegation-token``: a user who neither owns nor renews the token sees it, and not its
    owner's other token (Kafka's ``DelegationTokenManager.filterToken``)."""
    for name in ("keeper", "watcher"):
        make_user(cluster, name, f"{name}'s password")
    keeper = logged_in(cluster, "keeper", "keeper's password")
    watcher = logged_in(cluster, "watcher", "watcher's password", node="n2")
    shown, hidden = create(keeper), create(keeper)
    assert describe(watcher).tokens == ()
    admin = java_config(tmp_path, cluster, cluster.security["user"], cluster.security["password"])
    added = kafka_tool("org.apache.kafka.tools.AclCommand", cluster, admin, "--add", "--allow-principal",
                       "User:watcher", "--operation", "Describe",
                       "--delegation-token", shown.token_id)  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = kafka_tool("org.apache.kafka.tools.AclCommand", cluster, admin, "--list", "--delegation-token",
                        shown.token_id)  # fmt: skip
    assert f"resourceType=DELEGATION_TOKEN, name={shown.token_id}, patternType=LITERAL" in listed.stdout, (
        listed.stdout
    )
    wait_for(lambda: [t.token_id for t in describe(watcher).tokens] == [shown.token_id],
             "the watcher sees the one token", PATIENCE_S)  # fmt: skip
    assert hidden.token_id in [t.token_id for t in describe(keeper).tokens]
    assert renew(watcher, shown.hmac, -1).error_code is ErrorCode.delegation_token_owner_mismatch  # seen only
    for raw in (keeper, watcher):
        raw.close()


def test_an_expired_token_logs_in_nowhere_and_its_connection_is_cut(cluster: LocalCluster) -> None:
    make_user(cluster, "brief", "brief's password")
    raw = logged_in(cluster, "brief", "brief's password")
    made = create(raw)
    b64 = base64.b64encode(made.hmac).decode()
    wait_for(lambda: _logs_in(cluster, "n2", made.token_id, b64, token=True), "n2 knows it", PATIENCE_S)
    open_by_token = logged_in(cluster, made.token_id, b64, node="n2", token=True)
    pushed = expire(raw, made.hmac, 1)  # expires 1 ms from now, not removed
    assert pushed.error_code is ErrorCode.none
    for node in ("n1", "n2", "n3"):  # each once its controller metadata has the expiry (1 ms from then)
        wait_for(
            lambda node=node: not _logs_in(cluster, node, made.token_id, b64, token=True),  # type: ignore[misc]
            f"the expired token refused at {node}",
            PATIENCE_S,
        )
    # past its expiry it cannot be renewed back to life (Kafka: DELEGATION_TOKEN_EXPIRED)
    assert renew(raw, made.hmac, -1).error_code is ErrorCode.delegation_token_expired
    # the connection it opened is cut by the listener's re-check (within its second)
    wait_for(open_by_token.closed_by_server, "the token's connection cut", PATIENCE_S)
    raw.close()


def test_anonymous_connections_may_not_ask(cluster: LocalCluster) -> None:
    """Without SASL a connection is closed before any of it (--require-auth): Kafka's PLAINTEXT refusal."""
    raw = _connect(cluster, "n1")
    cls = wire.request_class(CREATE, 3)
    body = wire.build(
        cls, owner_principal_type=None, owner_principal_name=None, renewers=(), max_lifetime=_ms(-1)
    )
    raw.send_raw(raw.frame(CREATE, 3, body))
    assert raw.closed_by_server()


def test_a_user_holds_at_most_a_hundred_tokens(cluster: LocalCluster) -> None:
    make_user(cluster, "greedy", "greedy's password")
    raw = logged_in(cluster, "greedy", "greedy's password")
    codes = [create(raw).error_code for _ in range(101)]
    assert codes[:100] == [ErrorCode.none] * 100
    assert codes[100] is ErrorCode.policy_violation  # nothing made past the cap
    assert len(describe(raw, ["greedy"]).tokens) == 100
    # expiring one makes room for one
    first = describe(raw, ["greedy"]).tokens[0]
    assert expire(raw, first.hmac, -1).error_code is ErrorCode.none
    assert create(raw).error_code is ErrorCode.none
    raw.close()
