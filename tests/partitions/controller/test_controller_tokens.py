"""Users' API tokens as controller state: CreateToken and DeleteToken applied deterministically (every
replica holds the same tokens and answers the same), refused whole (an unknown user, a token another user
owns, past the limits), expired tokens dropped by the next creation, a deleted user's tokens revoked with
it and, from raftlog.version 2, a user's tokens revoked with its old password, kept in the controller's
snapshot (one taken before tokens existed reads as none), and carried between nodes as they are."""

from __future__ import annotations

import msgpack
import pytest

from partitions.controller import tokens as controller_tokens
from partitions.controller.commands import (
    AlterUser,
    CreateTopic,
    DeleteUser,
    FormCluster,
    SetUser,
    decode,
    encode,
)
from partitions.controller.state import ControllerStateMachine
from partitions.controller.tokens import TOKENS_MAX, TOKENS_PER_USER_MAX, CreateToken, DeleteToken
from partitions.errors import InvalidCommand, TooManyTokens, UnknownToken, UnknownUser
from partitions.features import RAFTLOG_VERSION, release_levels
from partitions.peers.client import ERRORS, REGISTRY
from partitions.peers.codec import pack, unpack
from partitions.security.tokens import ApiToken, check_token, issue_token
from partitions.security.users import make_credential

NOW_MS = 1_700_000_000_000
CREDENTIAL = make_credential("SCRAM-SHA-256", "a password", salt=b"0123456789abcdef")


def with_users(*names: str, release: str | None = None) -> ControllerStateMachine:
    """A controller holding the users, of a cluster formed at ``release``'s feature levels (None: a cluster
    whose metadata names none, level 1)."""
    machine = ControllerStateMachine()
    if release is not None:
        machine.apply(1, 1, encode(FormCluster(release_levels(release))))
    for name in names:
        machine.apply(machine.applied_index + 1, 1, encode(SetUser(name, (CREDENTIAL,))))
    return machine


def apply(machine: ControllerStateMachine, command: object) -> object:
    return machine.apply(machine.applied_index + 1, 1, encode(command))  # type: ignore[arg-type]


def token(user: str = "alice", now_ms: int = NOW_MS, expires_ms: int | None = None) -> tuple[str, ApiToken]:
    return issue_token(user, now_ms, expires_ms, f"{user}'s")


def test_a_token_made_and_revoked_the_same_on_every_replica() -> None:
    replicas = [with_users("alice", "bob"), with_users("alice", "bob")]
    text, made = token()
    _, kept = token("bob")
    commands = [CreateToken(made), CreateToken(kept), DeleteToken("alice", made.token_id)]
    answers = [[apply(m, c) for c in commands] for m in replicas]
    assert answers[0] == answers[1] == [made, kept, made]  # a revocation answers the token revoked
    assert replicas[0].metadata == replicas[1].metadata
    assert dict(replicas[0].metadata.tokens) == {kept.token_id: kept}
    assert check_token(replicas[0].metadata.tokens, text, NOW_MS) is None  # revoked: refused


def test_refusals_change_nothing() -> None:
    machine = with_users("alice", "bob")
    _, made = token()
    apply(machine, CreateToken(made))
    before = machine.metadata.tokens
    assert isinstance(apply(machine, CreateToken(token("mallory")[1])), UnknownUser)
    assert isinstance(apply(machine, CreateToken(made)), InvalidCommand)  # the same id twice
    revoked_by_another = apply(machine, DeleteToken("bob", made.token_id))
    assert isinstance(revoked_by_another, UnknownToken) and "user 'bob' has no token" in str(
        revoked_by_another
    )
    assert isinstance(apply(machine, DeleteToken("alice", "0" * 16)), UnknownToken)
    backwards = ApiToken("ab" * 8, "alice", b"\0" * 32, "", NOW_MS, NOW_MS)
    assert isinstance(apply(machine, CreateToken(backwards)), InvalidCommand)
    assert isinstance(
        machine.apply(machine.applied_index + 1, 1, msgpack.packb([1, 13, ["x"]])), InvalidCommand
    )
    assert isinstance(
        machine.apply(machine.applied_index + 1, 1, msgpack.packb([1, 14, ["a", "XY"]])), InvalidCommand
    )
    assert machine.metadata.tokens is before and machine.metadata.applied_index == 10


def test_the_tokens_mapping_is_replaced_only_when_they_change() -> None:
    machine = with_users("alice")
    apply(machine, CreateToken(token()[1]))
    held = machine.metadata.tokens
    apply(machine, CreateTopic("t", [["n1"]]))
    apply(machine, SetUser("alice", (CREDENTIAL,)))  # a new password keeps the user's tokens
    apply(machine, DeleteToken("alice", "0" * 16))  # refused
    assert machine.metadata.tokens is held and len(held) == 1


def test_deleting_a_user_revokes_its_tokens_and_only_its_own() -> None:
    machine = with_users("alice", "bob", "carol")
    alice_text, alice = token("alice")
    _, bob = token("bob")
    _, carol = token("carol")
    for made in (alice, bob, carol):
        apply(machine, CreateToken(made))
    apply(machine, DeleteUser("alice"))
    assert set(machine.metadata.tokens) == {bob.token_id, carol.token_id}
    assert check_token(machine.metadata.tokens, alice_text, NOW_MS) is None
    # Kafka's AlterUserScramCredentials removing a user's last credential deletes the user: its tokens too
    apply(machine, AlterUser("bob", (), ("SCRAM-SHA-256",)))
    assert set(machine.metadata.tokens) == {carol.token_id}
    apply(machine, SetUser("alice", (CREDENTIAL,)))  # a user made again under the name gets none back
    assert all(t.user != "alice" for t in machine.metadata.tokens.values())


def test_a_password_reset_revokes_the_users_tokens_in_the_same_change() -> None:
    replicas = [with_users("alice", "bob", release="0.2.0") for _ in range(2)]
    assert replicas[0].metadata.features[RAFTLOG_VERSION] == 2
    alice_text, alice = token("alice")
    _, bob = token("bob")
    new_password = make_credential("SCRAM-SHA-256", "a new password", salt=b"fedcba9876543210")
    for machine in replicas:
        for made in (alice, bob):
            apply(machine, CreateToken(made))
        apply(machine, SetUser("alice", (new_password,)))  # its password set anew: its tokens go with it
    assert replicas[0].metadata == replicas[1].metadata
    assert set(replicas[0].metadata.tokens) == {bob.token_id}
    assert check_token(replicas[0].metadata.tokens, alice_text, NOW_MS) is None
    _, again = token("alice", NOW_MS + 1)
    assert apply(replicas[0], CreateToken(again)) == again  # made with the new password: kept
    assert set(replicas[0].metadata.tokens) == {bob.token_id, again.token_id}
    # Kafka's AlterUserScramCredentials setting a credential of the user: a password reset too
    apply(replicas[0], AlterUser("bob", (new_password,), ()))
    assert set(replicas[0].metadata.tokens) == {again.token_id}
    apply(replicas[0], AlterUser("carol", (new_password,), ()))  # a user made: nobody's tokens go
    assert set(replicas[0].metadata.tokens) == {again.token_id}
    # at 0.1.0's levels a node of 0.1.0 may apply the same log, and it keeps them: so does every replica
    for machine in (with_users("alice", release="0.1.0"), with_users("alice")):
        _, alice = token("alice")
        apply(machine, CreateToken(alice))
        apply(machine, SetUser("alice", (CREDENTIAL,)))
        assert set(machine.metadata.tokens) == {alice.token_id}


def test_a_user_holds_at_most_tokens_per_user_max_and_expired_ones_make_room() -> None:
    machine = with_users("alice", "bob")
    for i in range(TOKENS_PER_USER_MAX - 1):
        assert isinstance(apply(machine, CreateToken(token(now_ms=NOW_MS + i)[1])), ApiToken)
    short = token(now_ms=NOW_MS + 100, expires_ms=NOW_MS + 200)[1]
    assert apply(machine, CreateToken(short)) == short  # the hundredth
    refused = apply(machine, CreateToken(token(now_ms=NOW_MS + 199)[1]))
    assert isinstance(refused, TooManyTokens) and refused.limit == TOKENS_PER_USER_MAX
    assert "user 'alice' holds 100 tokens, at most 100" in str(refused)
    assert isinstance(
        apply(machine, CreateToken(token("bob")[1])), ApiToken
    )  # another user's room is its own
    later = token(now_ms=NOW_MS + 200)[1]  # made when the short one has expired: it is dropped
    assert apply(machine, CreateToken(later)) == later
    assert short.token_id not in machine.metadata.tokens and len(machine.metadata.tokens) == 101


def test_the_cluster_holds_at_most_tokens_max() -> None:
    users = [f"u{i}" for i in range(TOKENS_MAX // TOKENS_PER_USER_MAX)]
    held = {}
    for i in range(TOKENS_MAX):
        _, made = issue_token(users[i % len(users)], NOW_MS, None)
        held[made.token_id] = made
    with pytest.raises(TooManyTokens, match="the cluster holds 10000 tokens, at most 10000"):
        controller_tokens.apply(held, [*users, "new"], CreateToken(token("new")[1]))
    expiring = {
        i: ApiToken(t.token_id, t.user, t.secret_hash, "", NOW_MS, NOW_MS + 1) for i, t in held.items()
    }
    after, made = controller_tokens.apply(expiring, [*users, "new"], CreateToken(token("new", NOW_MS + 1)[1]))
    assert after == {made.token_id: made}  # every expired one dropped


def test_commands_round_trip_through_their_encoding() -> None:
    create = CreateToken(token(expires_ms=NOW_MS + 1)[1])
    forever = CreateToken(token()[1])
    delete = DeleteToken("alice", "0123456789abcdef")
    assert decode(encode(create)) == create and decode(encode(forever)) == forever
    assert decode(encode(delete)) == delete


def test_the_snapshot_keeps_the_tokens_and_an_older_one_reads_as_none() -> None:
    machine = with_users("alice")
    text, made = token(expires_ms=NOW_MS + 60_000)
    apply(machine, CreateToken(made))
    copy = ControllerStateMachine()
    copy.restore(machine.snapshot())
    assert copy.metadata == machine.metadata and check_token(copy.metadata.tokens, text, NOW_MS) == made
    assert text.encode() not in machine.snapshot()  # its hash only
    older = msgpack.unpackb(machine.snapshot(), raw=False)
    del older["tokens"]
    before_tokens = ControllerStateMachine()
    before_tokens.restore(msgpack.packb(older, use_bin_type=True))
    assert dict(before_tokens.metadata.tokens) == {} and "alice" in before_tokens.metadata.users


def test_tokens_and_their_errors_cross_between_nodes() -> None:
    _, made = token(expires_ms=NOW_MS + 1)
    assert unpack(pack({"token": made}, REGISTRY), REGISTRY, ERRORS) == {"token": made}
    refused = unpack(pack(TooManyTokens("alice", 100, 100, "user 'alice'"), REGISTRY), REGISTRY, ERRORS)
    assert isinstance(refused, TooManyTokens) and refused.limit == 100 and "at most 100" in str(refused)
    unknown = unpack(pack(UnknownToken("alice", "0" * 16), REGISTRY), REGISTRY, ERRORS)
    assert isinstance(unknown, UnknownToken) and unknown.token_id == "0" * 16
