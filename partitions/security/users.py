"""Users and their SCRAM credentials (pure): what the controller replicates, never a password.

A user's password is kept as Kafka keeps it (RFC 5802, RFC 7677): per mechanism (SCRAM-SHA-256,
SCRAM-SHA-512), a random salt, an iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``
and ``ServerKey = HMAC(SaltedPassword, "Server Key")`` where ``SaltedPassword = PBKDF2(password, salt,
iterations)``. That is all SASL/SCRAM needs, and a password given in the clear (HTTP Basic) is checked by
deriving the same keys again (``Verifier``, which remembers the passwords it checked for as long as the
credential stays the same, so that a request does not pay for PBKDF2 every time; Kafka's SASL/PLAIN
uses it too). A credential is made from a password where the password enters (``make_credential``), or
from a password the client salted itself (``credential_from_salted_password``: Kafka's
AlterUserScramCredentials).

User names are checked by ``names.check_user_name``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from partitions.errors import InvalidName

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
ITERATIONS_DEFAULT = 4096  # Kafka's default; the least RFC 7677 allows
ITERATIONS_MAX = 1_000_000
PASSWORD_BYTES_MAX = 1024
VERIFIED_MAX = 4096  # passwords a node remembers having checked (see Verifier)
SALT_BYTES_MIN, SALT_BYTES_MAX = 8, 1024  # of a salt a client chose (Kafka's AlterUserScramCredentials)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_row(self) -> list[object]:
        return [self.mechanism, self.salt, self.iterations, self.stored_key, self.server_key]

    @classmethod
    def from_row(cls, row: list[object]) -> ScramCredential:
        mechanism, salt, iterations, stored_key, server_key = row
        if (
            mechanism not in MECHANISMS
            or not isinstance(salt, bytes)
            or not isinstance(iterations, int)
            or not isinstance(stored_key, bytes)
            or not isinstance(server_key, bytes)
        ):
            raise InvalidName("credential", str(row)[:80], "is not a SCRAM credential")
        return cls(str(mechanism), salt, iterations, stored_key, server_key)


def check_password(password: object) -> str:
    if not isinstance(password, str) or not password:
        raise InvalidName("password", "(hidden)", "must be a non-empty string")
    if len(password.encode("utf-8")) > PASSWORD_BYTES_MAX:
        raise InvalidName("password", "(hidden)", f"is longer than {PASSWORD_BYTES_MAX} bytes")
    return password


def salted_keys(mechanism: str, password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey) of RFC 5802 for ``password``."""
    digest = MECHANISMS[mechanism]
    return _keys(digest, hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations))


def _keys(digest: str, salted_password: bytes) -> tuple[bytes, bytes, bytes]:
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return client_key, hashlib.new(digest, client_key).digest(), server_key


def _check_mechanism_and_iterations(mechanism: str, iterations: object) -> None:
    if mechanism not in MECHANISMS:
        raise InvalidName("mechanism", mechanism, f"use one of {', '.join(MECHANISMS)}")
    if not isinstance(iterations, int) or not ITERATIONS_DEFAULT <= iterations <= ITERATIONS_MAX:
        raise InvalidName(
            "iterations", str(iterations), f"must be in [{ITERATIONS_DEFAULT}, {ITERATIONS_MAX}]"
        )


def make_credential(
    mechanism: str, password: str, iterations: int = ITERATIONS_DEFAULT, salt: bytes | None = None
) -> ScramCredential:
    """A new credential (a random 32-byte salt unless given). Made where the request enters, never in a
    state machine's apply: every replica must store the same salt."""
    _check_mechanism_and_iterations(mechanism, iterations)
    salt = os.urandom(32) if salt is None else salt
    _, stored_key, server_key = salted_keys(mechanism, check_password(password), salt, iterations)
    return ScramCredential(mechanism, salt, iterations, stored_key, server_key)


def credential_from_salted_password(
    mechanism: str, salt: bytes, iterations: int, salted_password: bytes
) -> ScramCredential:
    """The credential of a password a client salted itself (Kafka's AlterUserScramCredentials sends
    ``SaltedPassword = PBKDF2(password, salt, iterations)``, never the password): StoredKey and ServerKey
    derived from it here. Raises InvalidName for a mechanism, iteration count, salt or salted password
    that cannot be one."""
    _check_mechanism_and_iterations(mechanism, iterations)
    if not SALT_BYTES_MIN <= len(salt) <= SALT_BYTES_MAX:
        raise InvalidName("salt", f"{len(salt)} bytes", f"must be {SALT_BYTES_MIN} to {SALT_BYTES_MAX} bytes")
    digest = MECHANISMS[mechanism]
    size = hashlib.new(digest).digest_size
    if len(salted_password) != size:
        raise InvalidName(
            "salted password",
            f"{len(salted_password)} bytes",
            f"a {mechanism} salted password is {size} bytes",
        )
    _, stored_key, server_key = _keys(digest, salted_password)
    return ScramCredential(mechanism, bytes(salt), iterations, stored_key, server_key)


def password_matches(credential: ScramCredential, password: str) -> bool:
    _, stored_key, _ = salted_keys(credential.mechanism, password, credential.salt, credential.iterations)
    return hmac.compare_digest(stored_key, credential.stored_key)


class Verifier:
    """Checks a user's password against the credentials the controller holds now. A password that
    matched is remembered (its SHA-256, with the credential it matched) up to ``VERIFIED_MAX`` entries,
    least recently used forgotten first; a changed or deleted credential matches nothing remembered."""

    def __init__(self, entries_max: int = VERIFIED_MAX) -> None:
        self._verified: OrderedDict[tuple[str, bytes], ScramCredential] = OrderedDict()
        self._max = entries_max
        # checked in an unknown user's place: the same PBKDF2 as a user made with the defaults (the first
        # mechanism, the one checked), so that a wrong password takes as long whether the user exists
        # or not, and the answer's time does not tell which names are users
        self._stand_in = make_credential(min(MECHANISMS), os.urandom(16).hex())

    @staticmethod
    def _key(name: str, password: str) -> tuple[str, bytes]:
        return name, hashlib.sha256(password.encode("utf-8", "surrogatepass")).digest()

    def known(self, users: Mapping[str, tuple[ScramCredential, ...]], name: str, password: str) -> bool:
        """Whether this password matched the user's current credential before (a dict lookup and a hash:
        cheap enough for the event loop)."""
        key = self._key(name, password)
        remembered = self._verified.get(key)
        if remembered is None or remembered not in users.get(name, ()):
            return False
        self._verified.move_to_end(key)
        return True

    def verify(self, users: Mapping[str, tuple[ScramCredential, ...]], name: str, password: str) -> bool:
        """Whether the password matches the user's credential (PBKDF2: milliseconds, run it off the
        event loop); remembered when it does."""
        credentials = users.get(name)
        if not credentials:
            password_matches(self._stand_in, password)  # as long as a user's check; never a match
            return False
        if self.known(users, name, password):
            return True
        key = self._key(name, password)
        credential = credentials[0]
        if not password_matches(credential, password):
            return False
        self._verified[key] = credential
        while len(self._verified) > self._max:
            self._verified.popitem(last=False)
        return True
