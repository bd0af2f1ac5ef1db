"""Who may do what on the Kafka listener: the listener's settings (``Security``) and each connection's
``Session`` (its SASL exchange and, once it authenticated, its user).

With ``require_auth`` (``raftlog serve --require-auth``) a connection may send only ApiVersions,
SaslHandshake and SaslAuthenticate until it has authenticated; anything else closes it, as Kafka does
(``KafkaServer``). Without it SASL is still offered: a client configured for SASL authenticates and its
connection carries its user, one that is not goes on anonymously, and a failed authentication closes the
connection either way.

A handler reads the connection's principal from ``door.session`` (``User:NAME``, None when anonymous):
ACLs will be decided there. Until they exist the only decision is who may manage SCRAM credentials over
Kafka (``may_manage_users``): a super user (``raftlog serve --super-user NAME``, as Kafka's
``super.users``, which will also bypass ACLs), or anyone when authentication is not required.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kafka_api.sasl import Exchange
from partitions.services import Verifier

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
SASL_APIS = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})


@dataclass(frozen=True, slots=True)
class Security:
    require_auth: bool = False
    super_users: frozenset[str] = frozenset()  # user names
    # makes the salt an unknown user is shown (kafka_api.sasl): derive it from the cluster secret so that
    # every node shows the same one
    unknown_salt_key: bytes = field(default_factory=lambda: os.urandom(32))
    verifier: Verifier = field(default_factory=Verifier)  # SASL/PLAIN passwords checked lately

    def may_manage_users(self, session: Session) -> bool:
        """Whether this connection may describe and change SCRAM credentials."""
        return not self.require_auth or session.user in self.super_users

    def admits(self, session: Session, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be served on this connection now."""
        return session.user is not None or not self.require_auth or api_key in BEFORE_AUTHENTICATION


@dataclass(slots=True)
class Session:
    """One connection's authentication, changed only by the SASL handlers (which the listener runs one
    at a time, before reading the connection's next request)."""

    mechanism: str | None = None  # chosen by SaslHandshake
    exchange: Exchange | None = None  # the SASL exchange under way
    user: str | None = None  # once authenticated
    closing: str | None = None  # why to close the connection once this answer is sent

    @property
    def principal(self) -> str | None:
        """``User:NAME`` once authenticated (Kafka's principal), None for an anonymous connection."""
        return None if self.user is None else f"User:{self.user}"
