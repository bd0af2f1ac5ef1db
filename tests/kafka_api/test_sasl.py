"""The SASL exchanges of ``kafka_api.sasl`` as pure state machines: RFC 7677's worked SCRAM-SHA-256
example byte for byte, kafka-python's SCRAM client (another author's) through SHA-256 and SHA-512, and
every refusal (wrong password, unknown user, channel binding asked for, a mandatory extension, a wrong
or replayed nonce, a garbled or late message) raising ``AuthenticationFailed`` with what a client is told
the same whatever failed."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

import pytest
from kafka.net.sasl.scram import ScramClient

from kafka_api.sasl import (
    MECHANISMS,
    AuthenticationFailed,
    PlainExchange,
    ScramExchange,
    Step,
    failure_message,
)
from partitions.security.delegation_tokens import TokenSecrets, hmac_key
from partitions.security.users import ScramCredential, Verifier, make_credential, salted_keys

KEY = b"k" * 32  # the unknown-salt key: the cluster's, in a node
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_users() -> dict[str, tuple[ScramCredential, ...]]:
    return {"user": (make_credential("SCRAM-SHA-256", "pencil", 4096, salt=RFC_SALT),)}


def _rfc_exchange() -> ScramExchange:
    return ScramExchange("SCRAM-SHA-256", _rfc_users(), KEY, server_nonce=RFC_SERVER_NONCE)


def test_rfc_7677s_example_exchange_byte_for_byte() -> None:
    exchange = _rfc_exchange()
    assert exchange.step(RFC_CLIENT_FIRST) == Step(RFC_SERVER_FIRST)
    assert exchange.step(RFC_CLIENT_FINAL) == Step(RFC_SERVER_FINAL, "user")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_pythons_scram_client_authenticates_and_checks_our_signature(mechanism: str) -> None:
    users = {"alice": (make_credential(mechanism, "s3cret, with = and ,"),)}
    client = ScramClient("alice", "s3cret, with = and ,", mechanism)
    exchange = ScramExchange(mechanism, users, KEY)
    server_first = exchange.step(client.first_message())
    client.process_server_first_message(server_first.data)
    final = exchange.step(client.final_message())
    assert final.user == "alice"
    client.process_server_final_message(final.data)  # raises when our server signature is wrong


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_at_the_proof(mechanism: str) -> None:
    users = {"alice": (make_credential(mechanism, "right"),)}
    client = ScramClient("alice", "wrong", mechanism)
    exchange = ScramExchange(mechanism, users, KEY)
    client.process_server_first_message(exchange.step(client.first_message()).data)
    with pytest.raises(AuthenticationFailed, match="wrong password"):
        exchange.step(client.final_message())
    with pytest.raises(AuthenticationFailed, match="after the exchange failed"):
        exchange.step(client.final_message())  # a failed exchange takes nothing more


def test_an_unknown_user_looks_like_a_known_one_until_the_proof() -> None:
    """Its salt is made from its name and the cluster's key: the same at every attempt and on every node,
    different for another name; the exchange fails only where a wrong password fails."""

    def server_first(name: str, key: bytes = KEY) -> dict[str, str]:
        exchange = ScramExchange("SCRAM-SHA-256", _rfc_users(), key)
        data = exchange.step(f"n,,n={name},r=abc".encode()).data.decode()
        return dict(part.split("=", 1) for part in data.split(","))

    first = server_first("mallory")
    assert first["i"] == "4096" and len(base64.b64decode(first["s"])) == 32
    assert server_first("mallory")["s"] == first["s"]
    assert server_first("eve")["s"] != first["s"]
    assert server_first("mallory", b"another cluster's key")["s"] != first["s"]
    client = ScramClient("mallory", "pencil", "SCRAM-SHA-256")
    exchange = ScramExchange("SCRAM-SHA-256", _rfc_users(), KEY)
    client.process_server_first_message(exchange.step(client.first_message()).data)
    with pytest.raises(AuthenticationFailed, match="unknown user"):
        exchange.step(client.final_message())
    # a user without a credential of the mechanism asked is as unknown
    client = ScramClient("user", "pencil", "SCRAM-SHA-512")
    exchange = ScramExchange("SCRAM-SHA-512", _rfc_users(), KEY)
    client.process_server_first_message(exchange.step(client.first_message()).data)
    with pytest.raises(AuthenticationFailed, match="unknown user"):
        exchange.step(client.final_message())


def test_the_server_nonce_is_fresh_randomness_each_exchange() -> None:
    nonces = set()
    for _ in range(20):
        data = ScramExchange("SCRAM-SHA-256", _rfc_users(), KEY).step(RFC_CLIENT_FIRST).data.decode()
        nonce = data.split(",")[0].removeprefix("r=rOprNGfwEbeRWgbNEkqO")
        assert len(nonce) == 24 and "," not in nonce
        nonces.add(nonce)
    assert len(nonces) == 20


@pytest.mark.parametrize(
    ("first", "why"),
    [
        (b"p=tls-unique,,n=user,r=abc", "channel binding 'tls-unique' asked for"),
        (b"x,,n=user,r=abc", "channel-binding flag"),
        (b"n,,m=ext,n=user,r=abc", "mandatory extension"),
        (b"n,,r=abc,n=user", "n=user,r=nonce"),
        (b"n,,n=user", "n=user,r=nonce"),
        (b"n,,n=,r=abc", "empty user name"),
        (b"n,,n=us=2Aer,r=abc", "bad '=' escape"),
        (b"n,a=admin,n=user,r=abc", "asked to act as"),
        (b"n,,n=user,r=abc,tokenauth=true", "delegation token"),
        (b"n,,n=user,r=a\x7fc", "not printable"),
        (b"n,,n=user,r=", "nonce that is empty"),
        (b"nonsense", "GS2 header"),
        (b"n,,n=user,r=abc,junk", "not an attribute"),
        (b"\xff\xfe", "not UTF-8"),
        (b"n,,n=user,r=" + b"a" * 5000, "bytes (at most"),
    ],
)
def test_a_client_first_message_it_cannot_take_is_refused(first: bytes, why: str) -> None:
    with pytest.raises(AuthenticationFailed, match=re.escape(why)):
        _rfc_exchange().step(first)


def test_y_means_the_client_would_bind_had_we_offered_it_and_goes_on() -> None:
    exchange = _rfc_exchange()
    exchange.step(b"y,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    # its binding is the GS2 header it sent ("y,,"), not RFC 7677's "n,,": the example proof no longer fits
    final = RFC_CLIENT_FINAL.replace(b"c=biws", b"c=" + base64.b64encode(b"y,,"))
    with pytest.raises(AuthenticationFailed, match="wrong password"):
        exchange.step(final)


def test_the_authorization_id_may_name_the_user_itself() -> None:
    exchange = ScramExchange("SCRAM-SHA-256", _rfc_users(), KEY, server_nonce=RFC_SERVER_NONCE)
    assert exchange.step(b"n,a=user,n=user,r=rOprNGfwEbeRWgbNEkqO").data == RFC_SERVER_FIRST


@pytest.mark.parametrize(
    ("final", "why"),
    [
        (RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "channel binding other than"),
        (RFC_CLIENT_FINAL.replace(b"c=biws", b"c=bi*s"), "not base64"),
        (RFC_CLIENT_FINAL.replace(b"k0,p=", b"k1,p="), "nonce other than the one agreed"),
        (RFC_CLIENT_FINAL.replace(b"rOprNG", b"xOprNG"), "nonce other than the one agreed"),
        (RFC_CLIENT_FINAL.split(b",p=")[0], "without a proof"),
        (RFC_CLIENT_FINAL[:-8] + b"AAAA", "bytes (SCRAM-SHA-256's is 32)"),
        (RFC_CLIENT_FINAL.replace(b"p=dHz", b"p=eHz"), "wrong password"),
        (b"r=rOprNGfwEbeRWgbNEkqO,c=biws,p=AAAA", "c=binding,r=nonce"),
        (RFC_CLIENT_FIRST, "without a proof"),  # the first message again
    ],
)
def test_a_client_final_message_it_cannot_take_is_refused(final: bytes, why: str) -> None:
    exchange = _rfc_exchange()
    exchange.step(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match=re.escape(why)):
        exchange.step(final)


def test_a_final_nonce_that_ends_with_the_agreed_one_is_taken_as_kafka_takes_it() -> None:
    """librdkafka 2.0 (Debian's kcat) sends its own nonce again in front of the agreed one; Kafka's broker
    checks the end only, and so do we: the proof covers the message as sent."""
    client_nonce = "rOprNGfwEbeRWgbNEkqO"
    without_proof = f"c=biws,r={client_nonce}{client_nonce}{RFC_SERVER_NONCE}"
    auth_message = f"n=user,r={client_nonce},{RFC_SERVER_FIRST.decode()},{without_proof}".encode()
    client_key, stored_key, server_key = salted_keys("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)
    signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    exchange = _rfc_exchange()
    exchange.step(RFC_CLIENT_FIRST)
    final = exchange.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert final.user == "user"
    assert final.data == b"v=" + base64.b64encode(hmac.new(server_key, auth_message, hashlib.sha256).digest())


def test_a_final_message_replayed_into_another_exchange_is_refused() -> None:
    """A client-final message recorded from one exchange carries that exchange's nonce: another
    exchange (a fresh server nonce) refuses it, and a finished exchange takes no message at all."""
    done = _rfc_exchange()
    done.step(RFC_CLIENT_FIRST)
    assert done.step(RFC_CLIENT_FINAL).user == "user"
    with pytest.raises(AuthenticationFailed, match="after the exchange done"):
        done.step(RFC_CLIENT_FINAL)
    other = ScramExchange("SCRAM-SHA-256", _rfc_users(), KEY)  # a random server nonce
    other.step(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match="nonce other than the one agreed"):
        other.step(RFC_CLIENT_FINAL)


def _verify(users: dict[str, tuple[ScramCredential, ...]], name: str, password: str) -> bool:
    return Verifier().verify(users, name, password)


@pytest.mark.parametrize(
    ("message", "user", "why"),
    [
        (b"\0alice\0right", "alice", None),
        (b"alice\0alice\0right", "alice", None),
        (b"\0alice\0wrong", None, "alice': wrong password"),
        (b"\0bob\0right", None, "bob': unknown user"),
        (b"admin\0alice\0right", None, "asked to act as 'admin'"),
        (b"alice\0right", None, "authzid NUL authcid NUL passwd"),
        (b"\0\0right", None, "without a user name"),
        (b"\0alice\0", None, "without a user name or a password"),
        (b"\0alice\0\xff", None, "not UTF-8"),
    ],
)
def test_plain(message: bytes, user: str | None, why: str | None) -> None:
    users = {"alice": (make_credential("SCRAM-SHA-512", "right"),)}
    exchange = PlainExchange(users, _verify)
    assert exchange.blocking  # PBKDF2: its caller runs it off the event loop
    if why is None:
        assert exchange.step(message) == Step(b"", user)
        with pytest.raises(AuthenticationFailed, match="after the exchange ended"):
            exchange.step(message)
    else:
        with pytest.raises(AuthenticationFailed, match=re.escape(why)):
            exchange.step(message)


def test_what_a_client_is_told_names_neither_the_user_nor_what_failed() -> None:
    assert MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    for mechanism in MECHANISMS:
        told = failure_message(mechanism)
        assert told == f"Authentication failed: invalid credentials with SASL mechanism {mechanism}"
        assert "unknown" not in told and "password" not in told


class _TokenClient(ScramClient):  # type: ignore[misc]
    """kafka-python's SCRAM client with Kafka's delegation token extension."""

    def first_message(self) -> bytes:
        bare = b"n=" + self.user + b",r=" + self.nonce + b",tokenauth=true"
        self.auth_message += bare
        return b"n,," + bare


def test_a_delegation_token_logs_in_as_its_owner_and_an_unknown_one_fails_at_the_proof() -> None:
    """The token id is the user name, base64(HMAC) the password; the owner is who authenticated."""
    secrets = TokenSecrets(hmac_key(b"the cluster secret"))
    token_id = "AAAAAAAAAAAAAAAAAAAAAA"
    password = base64.b64encode(secrets.hmac_of(token_id)).decode()

    def credential(mechanism: str, asked: str) -> tuple[str, ScramCredential] | None:
        return ("owner", secrets.scram_credential(asked, mechanism)) if asked == token_id else None

    client = _TokenClient(token_id, password, "SCRAM-SHA-512")
    exchange = ScramExchange("SCRAM-SHA-512", {}, KEY, token_credential=credential)
    client.process_server_first_message(exchange.step(client.first_message()).data)
    done = exchange.step(client.final_message())
    assert (done.user, done.token_id) == ("owner", token_id)
    client.process_server_final_message(done.data)
    # the same name without the extension is a user name, and no user has it
    plain = ScramClient(token_id, password, "SCRAM-SHA-512")
    exchange = ScramExchange("SCRAM-SHA-512", {}, KEY, token_credential=credential)
    plain.process_server_first_message(exchange.step(plain.first_message()).data)
    with pytest.raises(AuthenticationFailed, match="unknown user"):
        exchange.step(plain.final_message())
    # a token not held: refused at the proof, as an unknown user is
    other = _TokenClient("BBBBBBBBBBBBBBBBBBBBBB", password, "SCRAM-SHA-512")
    exchange = ScramExchange("SCRAM-SHA-512", {}, KEY, token_credential=credential)
    other.process_server_first_message(exchange.step(other.first_message()).data)
    with pytest.raises(AuthenticationFailed, match="not held, expired or its owner gone"):
        exchange.step(other.final_message())
