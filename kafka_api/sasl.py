"""The server's side of SASL exchanges, as pure state machines: no sockets, no event loop, no clock.

Each exchange is given the users and their SCRAM credentials as the controller holds them when it starts
(``partitions.security.users``), takes the client's messages one at a time (``step``) and answers what to send
back, with the user's name once it has authenticated. Any failure raises ``AuthenticationFailed``, whose
text says why for the node's log; the client is told only ``failure_message(mechanism)``, the same
words for an unknown user, a wrong password and a garbled message, so that no answer says whether a
user exists.

- ``PlainExchange`` (RFC 4616): one message, ``[authzid] NUL authcid NUL passwd``; the password is
  checked by the verifier it is given (PBKDF2 against the user's SCRAM credential: milliseconds, so its
  caller runs ``step`` off the event loop, ``blocking``).
- ``ScramExchange`` (RFC 5802, RFC 7677; SCRAM-SHA-256 and SCRAM-SHA-512): client-first, server-first
  (the client's nonce followed by ours, from ``os.urandom``, the credential's salt and iterations), then
  client-final checked against StoredKey (a few HMACs: cheap enough for the event loop) and server-final
  proving we hold ServerKey. Channel binding is not offered: a client asking for it (``p=``) is refused,
  one that would use it had we offered it (``y``) goes on, as RFC 5802 says. A mandatory extension
  (``m=``), a delegation token (``tokenauth``), a channel-binding attribute that is not the GS2 header
  sent first, a final nonce that does not end with the one agreed (Kafka's rule: librdkafka 2.0, which
  Debian's kcat is built on, repeats its own nonce in front), a proof of the wrong size, and any message
  after the exchange ended are refused.
  With the extension ``tokenauth=true`` (Kafka's ``ScramLoginModule``) the user name is a delegation
  token's id and the password its HMAC in base64: the credential is the token's (``token_credential``,
  None for a token that is not held, has expired or whose owner is gone), and the exchange authenticates
  the token's owner (``Step.user``) with the token's id (``Step.token_id``), as Kafka's
  ``ScramSaslServer`` does. A listener that takes no tokens refuses the extension.
  An unknown user (or one without a credential of that mechanism) gets a salt made from its name and
  a key of the cluster's, the same on every node and at every attempt, and fails only at the proof:
  nothing in the exchange tells it from a wrong password. Secrets are compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from partitions.security.users import ITERATIONS_DEFAULT, ScramCredential
from partitions.security.users import MECHANISMS as SCRAM_DIGESTS

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, *SCRAM_DIGESTS)  # what SaslHandshake offers
MESSAGE_BYTES_MAX = 4096  # of one client message: names, nonces and passwords are far shorter
SERVER_NONCE_BYTES = 18  # 24 characters of base64

Users = Mapping[str, tuple[ScramCredential, ...]]


class AuthenticationFailed(Exception):
    """The exchange failed; the text says why, for the node's log only (see ``failure_message``)."""


def failure_message(mechanism: str) -> str:
    """What a client whose authentication failed is told, whatever failed."""
    return f"Authentication failed: invalid credentials with SASL mechanism {mechanism}"


@dataclass(frozen=True, slots=True)
class Step:
    """The answer to one client message: ``data`` to send back; ``user`` once the client authenticated
    (the exchange is then over), with ``token_id`` when it did with a delegation token."""

    data: bytes
    user: str | None = None
    token_id: str | None = None


# a delegation token's owner and SCRAM credential for a mechanism and a token id, None when it is not held
TokenCredential = Callable[[str, str], tuple[str, ScramCredential] | None]


class Exchange(Protocol):
    blocking: bool  # whether ``step`` may take milliseconds (run it off the event loop)

    def step(self, message: bytes) -> Step: ...


def _text(message: bytes, what: str) -> str:
    if len(message) > MESSAGE_BYTES_MAX:
        raise AuthenticationFailed(f"a {what} of {len(message)} bytes (at most {MESSAGE_BYTES_MAX})")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed(f"a {what} that is not UTF-8") from None


class PlainExchange:
    """RFC 4616. ``verify(users, name, password)`` says whether the password is the user's."""

    blocking = True

    def __init__(self, users: Users, verify: Callable[[Users, str, str], bool]) -> None:
        self._users = users
        self._verify = verify
        self._done = False

    def step(self, message: bytes) -> Step:
        if self._done:
            raise AuthenticationFailed("a PLAIN message after the exchange ended")
        self._done = True
        parts = _text(message, "PLAIN message").split("\0")
        if len(parts) != 3:
            raise AuthenticationFailed("a PLAIN message is authzid NUL authcid NUL passwd")
        authzid, name, password = parts
        if not name or not password:
            raise AuthenticationFailed("a PLAIN message without a user name or a password")
        if authzid and authzid != name:
            raise AuthenticationFailed(f"PLAIN user {name!r} asked to act as {authzid!r}")
        if not self._verify(self._users, name, password):
            known = "wrong password" if name in self._users else "unknown user"
            raise AuthenticationFailed(f"PLAIN user {name!r}: {known}")
        return Step(b"", name)


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    """``a=value,b=value,...`` as pairs; a part without ``=`` or with an empty name is refused."""
    pairs = []
    for part in text.split(","):
        name, equals, value = part.partition("=")
        if not equals or not name:
            raise AuthenticationFailed(f"{what}: {part[:40]!r} is not an attribute")
        pairs.append((name, value))
    return pairs


def _saslname(value: str) -> str:
    """RFC 5802's saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is refused."""
    if value.replace("=2C", "").replace("=3D", "").count("="):
        raise AuthenticationFailed("a user name with a bad '=' escape")
    return value.replace("=2C", ",").replace("=3D", "=")


def _nonce(value: str) -> str:
    if not value or any(not 0x21 <= ord(c) <= 0x7E for c in value):
        raise AuthenticationFailed("a nonce that is empty or not printable ASCII")
    return value


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise AuthenticationFailed(f"{what} is not base64") from None


class ScramExchange:
    """RFC 5802 for one of ``SCRAM_DIGESTS``. ``unknown_salt_key`` makes the salt an unknown user is
    shown; ``token_credential`` finds a delegation token's (None: tokens are refused); ``server_nonce`` is
    for tests (default: random)."""

    blocking = False

    def __init__(
        self,
        mechanism: str,
        users: Users,
        unknown_salt_key: bytes,
        server_nonce: str | None = None,
        token_credential: TokenCredential | None = None,
    ) -> None:
        if mechanism not in SCRAM_DIGESTS:
            raise ValueError(f"{mechanism!r} is not a SCRAM mechanism")
        self._mechanism = mechanism
        self._digest = SCRAM_DIGESTS[mechanism]
        self._users = users
        self._unknown_salt_key = unknown_salt_key
        self._server_nonce = server_nonce or base64.b64encode(os.urandom(SERVER_NONCE_BYTES)).decode()
        self._state = "first"  # then "final", then "done" (or "failed")
        self._token_credential = token_credential
        self._user = ""
        self._token_id: str | None = None  # a delegation token's, once the client named one
        self._credential: ScramCredential | None = None  # None: an unknown user, refused at the proof
        self._gs2_header = b""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    def step(self, message: bytes) -> Step:
        state, self._state = self._state, "failed"  # until this step succeeds
        if state == "first":
            answer = self._first(message)
            self._state = "final"
        elif state == "final":
            answer = self._final(message)
            self._state = "done"
        else:
            raise AuthenticationFailed(f"a {self._mechanism} message after the exchange {state}")
        return answer

    def _first(self, message: bytes) -> Step:
        text = _text(message, "client-first message")
        flag, comma, rest = text.partition(",")
        authzid, comma2, bare = rest.partition(",")
        if not comma or not comma2:
            raise AuthenticationFailed("a client-first message without its GS2 header")
        if flag.startswith("p="):
            raise AuthenticationFailed(f"channel binding {flag[2:]!r} asked for; none is offered")
        if flag not in ("n", "y"):
            raise AuthenticationFailed(f"a GS2 channel-binding flag {flag[:10]!r}")
        attributes = _attributes(bare, "client-first message")
        if attributes[0][0] == "m":
            raise AuthenticationFailed("a mandatory extension (m=) that is not supported")
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise AuthenticationFailed("a client-first message is n=user,r=nonce[,extensions]")
        user = _saslname(attributes[0][1])
        if not user:
            raise AuthenticationFailed("an empty user name")
        if authzid and (not authzid.startswith("a=") or _saslname(authzid[2:]) != user):
            raise AuthenticationFailed(f"user {user!r} asked to act as {authzid[:40]!r}")
        token = any(name == "tokenauth" and value.lower() == "true" for name, value in attributes[2:])
        if token and self._token_credential is None:
            raise AuthenticationFailed("a delegation token (tokenauth): this listener takes none")
        self._user = user
        if token and self._token_credential is not None:
            self._token_id = user
            found = self._token_credential(self._mechanism, user)
            # an unknown token fails at the proof, as an unknown user does
            self._user, self._credential = found if found is not None else (user, None)
        else:
            self._credential = next(
                (c for c in self._users.get(user, ()) if c.mechanism == self._mechanism), None
            )
        if self._credential is not None:
            salt, iterations = self._credential.salt, self._credential.iterations
        else:
            salt = hmac.new(self._unknown_salt_key, f"{self._mechanism}\0{user}".encode(), "sha256").digest()
            iterations = ITERATIONS_DEFAULT
        self._gs2_header = f"{flag},{authzid},".encode()
        self._nonce = _nonce(attributes[1][1]) + self._server_nonce
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return Step(self._server_first.encode())

    def _final(self, message: bytes) -> Step:
        text = _text(message, "client-final message")
        without_proof, separator, proof_text = text.rpartition(",p=")
        if not separator:
            raise AuthenticationFailed("a client-final message without a proof")
        attributes = _attributes(without_proof, "client-final message")
        if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise AuthenticationFailed("a client-final message is c=binding,r=nonce[,extensions],p=proof")
        binding = _b64decode(attributes[0][1], "the channel binding")
        if not hmac.compare_digest(binding, self._gs2_header):
            raise AuthenticationFailed("a channel binding other than the GS2 header sent first")
        # Kafka's broker takes a nonce that ends with the one agreed, and librdkafka 2.0 (Debian's kcat)
        # sends its own nonce again in front of it; what matters, our fresh part at the end, is checked
        nonce, agreed = attributes[1][1].encode(), self._nonce.encode()
        if len(nonce) < len(agreed) or not hmac.compare_digest(nonce[len(nonce) - len(agreed) :], agreed):
            raise AuthenticationFailed("a nonce other than the one agreed (a replayed or forged message)")
        proof = _b64decode(proof_text, "the proof")
        size = hashlib.new(self._digest).digest_size
        if len(proof) != size:
            raise AuthenticationFailed(f"a proof of {len(proof)} bytes ({self._mechanism}'s is {size})")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        stored_key = credential.stored_key if credential is not None else bytes(size)
        signature = hmac.new(stored_key, auth_message, self._digest).digest()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        matched = hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), stored_key)
        what = f"user {self._user!r}" if self._token_id is None else f"delegation token {self._token_id!r}"
        if credential is None:
            unknown = "unknown user" if self._token_id is None else "not held, expired or its owner gone"
            raise AuthenticationFailed(f"{self._mechanism} {what}: {unknown}")
        if not matched:
            raise AuthenticationFailed(f"{self._mechanism} {what}: wrong password")
        server_signature = hmac.new(credential.server_key, auth_message, self._digest).digest()
        return Step(b"v=" + base64.b64encode(server_signature), self._user, self._token_id)
