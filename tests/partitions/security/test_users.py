"""Users and SCRAM credentials (``partitions.security.users``) and their place in the controller's replicated
state: the keys are RFC 5802's (checked against RFC 7677's worked example), a password matches only its
own credential, the verifier forgets a changed credential, and the controller applies, refuses and
snapshots users deterministically, one mechanism at a time too (Kafka's AlterUserScramCredentials, whose
salted passwords make the same keys a password does)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from partitions.controller.commands import AlterUser, DeleteUser, SetUser, decode, encode
from partitions.controller.state import ControllerStateMachine
from partitions.errors import InvalidCommand, InvalidName, UnknownCredential, UnknownUser
from partitions.names import check_user_name
from partitions.security.users import (
    Verifier,
    credential_from_salted_password,
    make_credential,
    password_matches,
    salted_keys,
)


def test_the_keys_are_rfc_7677s() -> None:
    """RFC 7677, section 3: user "user", password "pencil"; the client proof and server signature of
    its exchange follow from our ClientKey, StoredKey and ServerKey."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    client_key, stored_key, server_key = salted_keys("SCRAM-SHA-256", "pencil", salt, 4096)
    auth_message = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    client_signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
    assert base64.b64encode(proof) == b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    server_signature = hmac.new(server_key, auth_message, hashlib.sha256).digest()
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_a_password_matches_its_credential_only() -> None:
    sha512 = make_credential("SCRAM-SHA-512", "s3cret")
    assert password_matches(sha512, "s3cret") and not password_matches(sha512, "s3cret ")
    again = make_credential("SCRAM-SHA-512", "s3cret")
    assert again.salt != sha512.salt and again.stored_key != sha512.stored_key  # salted: never the same
    with pytest.raises(InvalidName, match="mechanism"):
        make_credential("SCRAM-MD5", "x")
    with pytest.raises(InvalidName, match="iterations"):
        make_credential("SCRAM-SHA-256", "x", iterations=10)
    with pytest.raises(InvalidName, match="password"):
        make_credential("SCRAM-SHA-256", "")


def test_the_verifier_remembers_a_match_until_the_credential_changes() -> None:
    verifier = Verifier(entries_max=2)
    users = {"alice": (make_credential("SCRAM-SHA-256", "one"),)}
    assert not verifier.known(users, "alice", "one")
    assert verifier.verify(users, "alice", "one") and verifier.known(users, "alice", "one")
    assert not verifier.verify(users, "alice", "two") and not verifier.verify(users, "bob", "one")
    changed = {"alice": (make_credential("SCRAM-SHA-256", "two"),)}  # a new password
    assert not verifier.known(changed, "alice", "one") and not verifier.verify(changed, "alice", "one")
    assert not verifier.known({}, "alice", "one")  # deleted


def test_user_names() -> None:
    assert check_user_name("alice@example.com") == "alice@example.com"
    for bad in ("", "a:b", "line\nfeed", 7):
        with pytest.raises(InvalidName):
            check_user_name(bad)


def test_the_controller_applies_refuses_and_snapshots_users() -> None:
    machine = ControllerStateMachine()
    credentials = (make_credential("SCRAM-SHA-256", "pw"), make_credential("SCRAM-SHA-512", "pw"))
    assert machine.apply(1, 1, encode(SetUser("alice", credentials))) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert machine.metadata.users["alice"] == credentials
    assert isinstance(machine.apply(2, 1, encode(DeleteUser("bob"))), UnknownUser)
    twice = (credentials[0], credentials[0])
    assert isinstance(machine.apply(3, 1, encode(SetUser("carol", twice))), InvalidCommand)
    assert isinstance(machine.apply(4, 1, encode(SetUser("a:b", credentials))), InvalidName)
    copy = ControllerStateMachine()
    copy.restore(machine.snapshot())
    assert copy.metadata == machine.metadata
    assert machine.apply(5, 1, encode(DeleteUser("alice"))) == frozenset()
    assert dict(machine.metadata.users) == {} and machine.metadata.applied_index == 5


def test_a_credential_from_a_password_the_client_salted_is_the_one_the_password_makes() -> None:
    """Kafka's AlterUserScramCredentials sends PBKDF2(password, salt, iterations), never the password: the
    keys derived from it are those ``make_credential`` derives from the password."""
    salt = b"a client's salt!"
    for mechanism, digest in (("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")):
        salted = hashlib.pbkdf2_hmac(digest, b"pw", salt, 8192)
        made = credential_from_salted_password(mechanism, salt, 8192, salted)
        assert made == make_credential(mechanism, "pw", 8192, salt=salt)
        assert password_matches(made, "pw") and not password_matches(made, "pw2")
    good = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    refusals = [
        (("SCRAM-SHA-1", salt, 4096, good), "mechanism"),
        (("SCRAM-SHA-256", salt, 4095, good), "iterations"),
        (("SCRAM-SHA-256", salt, 1_000_001, good), "iterations"),
        (("SCRAM-SHA-256", b"short", 4096, good), "salt"),
        (("SCRAM-SHA-256", salt, 4096, good[:31]), "salted password"),
        (("SCRAM-SHA-512", salt, 4096, good), "a SCRAM-SHA-512 salted password is 64 bytes"),
    ]
    for arguments, why in refusals:
        with pytest.raises(InvalidName, match=why):
            credential_from_salted_password(*arguments)


def test_the_controller_alters_one_mechanism_at_a_time() -> None:
    machine = ControllerStateMachine()
    sha256, sha512 = make_credential("SCRAM-SHA-256", "a"), make_credential("SCRAM-SHA-512", "b")
    created = machine.apply(1, 1, encode(AlterUser("carol", (sha512,), ())))
    assert created == {"SCRAM-SHA-512"} and machine.metadata.users["carol"] == (sha512,)
    assert machine.apply(2, 1, encode(AlterUser("carol", (sha256,), ()))) == {
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    }
    assert machine.metadata.users["carol"] == (sha256, sha512), "the other mechanism is kept"
    newer = make_credential("SCRAM-SHA-512", "c")
    assert machine.apply(3, 1, encode(AlterUser("carol", (newer,), ("SCRAM-SHA-256",)))) == {"SCRAM-SHA-512"}
    assert machine.metadata.users["carol"] == (newer,)

    before = machine.metadata.users
    missing = machine.apply(4, 1, encode(AlterUser("carol", (sha256,), ("SCRAM-SHA-256",))))
    assert isinstance(missing, InvalidCommand), "a mechanism both deleted and set"
    gone = machine.apply(5, 1, encode(AlterUser("carol", (), ("SCRAM-SHA-256",))))
    assert isinstance(gone, UnknownCredential) and isinstance(gone, UnknownUser)
    assert isinstance(machine.apply(6, 1, encode(AlterUser("dave", (), ("SCRAM-SHA-512",)))), UnknownUser)
    assert isinstance(machine.apply(7, 1, encode(AlterUser("carol", (), ()))), InvalidCommand)
    assert isinstance(machine.apply(8, 1, encode(AlterUser("carol", (), ("SCRAM-MD5",)))), InvalidCommand)
    assert isinstance(machine.apply(9, 1, encode(AlterUser("a:b", (sha256,), ()))), InvalidName)
    assert machine.metadata.users == before, "a refused change changes nothing"

    copy = ControllerStateMachine()
    copy.restore(machine.snapshot())
    assert copy.metadata.users == machine.metadata.users
    assert machine.apply(10, 1, encode(AlterUser("carol", (), ("SCRAM-SHA-512",)))) == frozenset()
    assert "carol" not in machine.metadata.users, "a user without credentials is deleted"
    assert decode(encode(AlterUser("x", (sha256,), ("SCRAM-SHA-512",)))) == AlterUser(
        "x", (sha256,), ("SCRAM-SHA-512",)
    )
