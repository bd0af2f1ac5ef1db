"""Kafka's delegation tokens as controller state (Kafka's DelegationTokenControlManager): made, renewed and
expired deterministically from the time in the command (every replica holds and answers the same),
refused whole (an unknown owner, a renewer who is not one, an expired token, past the caps), expired
tokens dropped by the next creation, an owner's tokens gone with it, kept in the snapshot (one taken
before tokens existed reads as none), never holding a token's HMAC; and the pure rules of times and
HMACs a node applies before it proposes."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac

import msgpack
import pytest
from leader_at_level import LeaderAtLevel

from partitions.controller import delegation_tokens as controller_delegation_tokens
from partitions.controller.commands import DeleteUser, SetUser, decode, encode
from partitions.controller.delegation_tokens import (
    TOKENS_MAX,
    TOKENS_PER_OWNER_MAX,
    CreateDelegationToken,
    ExpireDelegationToken,
    RenewDelegationToken,
)
from partitions.controller.state import ControllerStateMachine
from partitions.errors import (
    DelegationTokenExpired,
    DelegationTokenOwnerMismatch,
    FeatureNotFinalized,
    InvalidCommand,
    InvalidName,
    TooManyTokens,
    UnknownToken,
    UnknownUser,
)
from partitions.metadata.security_records import SecurityRecords
from partitions.security.delegation_tokens import (
    DelegationToken,
    TokenSecrets,
    hmac_key,
    new_token_id,
    principal_user,
    renew_period,
    token_hmac,
    token_times,
)
from partitions.security.users import make_credential, salted_keys

NOW_MS = 1_700_000_000_000
DAY_MS = 86_400_000
CREDENTIAL = make_credential("SCRAM-SHA-256", "a password", salt=b"0123456789abcdef")


def with_users(*names: str) -> ControllerStateMachine:
    machine = ControllerStateMachine()
    for name in names:
        apply(machine, SetUser(name, (CREDENTIAL,)))
    return machine


def apply(machine: ControllerStateMachine, command: object) -> object:
    return machine.apply(machine.applied_index + 1, 1, encode(command))  # type: ignore[arg-type]


def token(owner: str = "alice", renewers: tuple[str, ...] = (), issue_ms: int = NOW_MS) -> DelegationToken:
    expiry_ms, max_ms = token_times(issue_ms, 7 * DAY_MS, DAY_MS, -1)
    return DelegationToken(new_token_id(), owner, owner, renewers, issue_ms, expiry_ms, max_ms)


def test_times_as_kafka_decides_them() -> None:
    # max: the node's, or what was asked when less and positive; expiry: a renew interval, never past max
    assert token_times(NOW_MS, 7 * DAY_MS, DAY_MS, -1) == (NOW_MS + DAY_MS, NOW_MS + 7 * DAY_MS)
    assert token_times(NOW_MS, 7 * DAY_MS, DAY_MS, 0) == (NOW_MS + DAY_MS, NOW_MS + 7 * DAY_MS)
    assert token_times(NOW_MS, 7 * DAY_MS, DAY_MS, 3_600_000) == (NOW_MS + 3_600_000,) * 2
    assert token_times(NOW_MS, 7 * DAY_MS, DAY_MS, 30 * DAY_MS)[1] == NOW_MS + 7 * DAY_MS
    assert renew_period(DAY_MS, -1) == renew_period(DAY_MS, 0) == DAY_MS
    assert renew_period(DAY_MS, 1000) == 1000 and renew_period(DAY_MS, 2 * DAY_MS) == DAY_MS


def test_the_hmac_is_kafkas_and_the_scram_credential_is_of_its_base64() -> None:
    key = hmac_key(b"a cluster secret of 32 bytes....")
    token_id = new_token_id()
    assert len(token_id) == 22
    mac = token_hmac(key, token_id)
    assert mac == hmac.new(key, token_id.encode(), hashlib.sha512).digest() and len(mac) == 64
    assert hmac_key(b"another secret") != key  # the key is the cluster's
    credential = TokenSecrets(key).scram_credential(token_id, "SCRAM-SHA-512")
    password = base64.b64encode(mac).decode()
    _, stored, _ = salted_keys("SCRAM-SHA-512", password, credential.salt, credential.iterations)
    assert stored == credential.stored_key
    # every node derives the same credential (the same salt), so a login may land on any
    assert TokenSecrets(key).scram_credential(token_id, "SCRAM-SHA-512") == credential


def test_a_token_is_found_by_its_hmac_and_forgotten_once_gone() -> None:
    secrets = TokenSecrets(hmac_key(b"s" * 32))
    made = token()
    held = {made.token_id: made}
    assert secrets.find(held, secrets.hmac_of(made.token_id)) == made
    assert secrets.find(held, b"\0" * 64) is None
    assert secrets.find({}, secrets.hmac_of(made.token_id)) is None


def test_renewers_are_users() -> None:
    assert principal_user("User", "bob", "renewer") == "bob"
    with pytest.raises(InvalidName):
        principal_user("Group", "admins", "renewer")
    with pytest.raises(InvalidName):
        principal_user("User", "", "owner")


def test_made_renewed_and_expired_the_same_on_every_replica() -> None:
    made = token(renewers=("bob",))
    commands = [
        CreateDelegationToken(made),
        RenewDelegationToken(made.token_id, "bob", NOW_MS + 1000, DAY_MS),
        ExpireDelegationToken(made.token_id, "alice", NOW_MS + 2000, 5000),
        ExpireDelegationToken(made.token_id, "alice", NOW_MS + 3000, -1),
    ]
    replicas = [with_users("alice", "bob"), with_users("alice", "bob")]
    answers = [[apply(m, c) for c in commands] for m in replicas]
    assert answers[0] == answers[1]
    created, renewed, expired, removed = answers[0]
    assert created == made
    assert isinstance(renewed, DelegationToken) and renewed.expiry_ms == NOW_MS + 1000 + DAY_MS
    assert isinstance(expired, DelegationToken) and expired.expiry_ms == NOW_MS + 7000
    assert removed == expired and replicas[0].metadata.delegation_tokens == {}


def test_a_renewal_never_passes_the_max_lifetime() -> None:
    machine = with_users("alice")
    expiry_ms, max_ms = token_times(NOW_MS, 3 * DAY_MS // 2, DAY_MS, -1)
    made = DelegationToken(new_token_id(), "alice", "alice", (), NOW_MS, expiry_ms, max_ms)
    apply(machine, CreateDelegationToken(made))
    renewed = apply(machine, RenewDelegationToken(made.token_id, "alice", expiry_ms - 10, DAY_MS))
    assert isinstance(renewed, DelegationToken) and renewed.expiry_ms == made.max_ms


def test_refusals_change_nothing() -> None:
    machine = with_users("alice", "bob", "mallory")
    made = token(renewers=("bob",))
    assert isinstance(apply(machine, CreateDelegationToken(token("nobody"))), UnknownUser)
    apply(machine, CreateDelegationToken(made))
    before = machine.metadata.delegation_tokens
    # neither owner nor renewer: mallory may not renew it, nor expire it, nor remove it
    for command in (
        RenewDelegationToken(made.token_id, "mallory", NOW_MS, DAY_MS),
        ExpireDelegationToken(made.token_id, "mallory", NOW_MS, -1),
    ):
        assert isinstance(apply(machine, command), DelegationTokenOwnerMismatch)
    assert isinstance(apply(machine, RenewDelegationToken(new_token_id(), "alice", NOW_MS, 1)), UnknownToken)
    # past its expiry it cannot be renewed or pushed back; its owner may still remove it
    late = made.expiry_ms + 1
    assert isinstance(
        apply(machine, RenewDelegationToken(made.token_id, "alice", late, 1)), DelegationTokenExpired
    )
    assert isinstance(
        apply(machine, ExpireDelegationToken(made.token_id, "bob", late, 1)), DelegationTokenExpired
    )
    assert machine.metadata.delegation_tokens == before
    assert apply(machine, ExpireDelegationToken(made.token_id, "bob", late, -1)) == made


def test_no_caller_makes_the_cluster_hold_unbounded_tokens() -> None:
    tokens = {t.token_id: t for t in (token() for _ in range(TOKENS_PER_OWNER_MAX))}
    with pytest.raises(TooManyTokens, match="at most 100"):
        controller_delegation_tokens.apply(tokens, {"alice"}, CreateDelegationToken(token()))
    # the expired ones make room: a creation drops them first (the command's time, every replica alike)
    later = token(issue_ms=NOW_MS + 8 * DAY_MS)
    after, _ = controller_delegation_tokens.apply(tokens, {"alice"}, CreateDelegationToken(later))
    assert list(after) == [later.token_id]
    many = {t.token_id: t for t in (token(f"u{i % 200}") for i in range(TOKENS_MAX))}
    with pytest.raises(TooManyTokens, match="the cluster"):
        controller_delegation_tokens.apply(many, {"carol"}, CreateDelegationToken(token("carol")))


def test_a_token_past_the_command_rules_is_refused() -> None:
    bad = token()
    backwards = DelegationToken(bad.token_id, "alice", "alice", (), NOW_MS, NOW_MS - 1, NOW_MS + 1)
    with pytest.raises(InvalidCommand):
        controller_delegation_tokens.apply({}, {"alice"}, CreateDelegationToken(backwards))
    with pytest.raises(InvalidCommand):
        decode(msgpack.packb([1, 21, [2, "short", "alice", NOW_MS, 1]]))


def test_an_owner_deleted_takes_its_tokens() -> None:
    machine = with_users("alice", "bob")
    apply(machine, CreateDelegationToken(token("alice", renewers=("bob",))))
    kept = token("bob")
    apply(machine, CreateDelegationToken(kept))
    apply(machine, DeleteUser("alice"))
    assert dict(machine.metadata.delegation_tokens) == {kept.token_id: kept}


def test_kept_in_the_snapshot_without_any_hmac() -> None:
    machine = with_users("alice")
    assert b"delegation_tokens" not in machine.snapshot()  # none made: the previous release's bytes
    made = token()
    apply(machine, CreateDelegationToken(made))
    snapshot = machine.snapshot()
    key = hmac_key(b"s" * 32)
    assert token_hmac(key, made.token_id) not in snapshot
    restored = ControllerStateMachine()
    restored.restore(snapshot)
    assert dict(restored.metadata.delegation_tokens) == {made.token_id: made}


def test_commands_round_trip() -> None:
    made = token(renewers=("bob", "carol"))
    for command in (
        CreateDelegationToken(made),
        RenewDelegationToken(made.token_id, "bob", NOW_MS, DAY_MS),
        ExpireDelegationToken(made.token_id, "alice", NOW_MS, -1),
    ):
        assert decode(encode(command)) == command


def _made(command: object) -> object:
    assert isinstance(command, CreateDelegationToken)
    return command.token


def test_a_token_is_proposed_only_once_every_node_can_apply_it() -> None:
    command = CreateDelegationToken(token())
    old = LeaderAtLevel(1, _made)  # a node of release 0.1.0 may still run: it would refuse kind 21
    with pytest.raises(FeatureNotFinalized, match=r"raftlog\.version finalized at level 2"):
        asyncio.run(SecurityRecords(old).change_delegation_token(command))  # type: ignore[arg-type]
    assert old.proposed == []
    new = LeaderAtLevel(2, _made)
    assert asyncio.run(SecurityRecords(new).change_delegation_token(command)) == command.token  # type: ignore[arg-type]
    assert new.proposed == [command]
