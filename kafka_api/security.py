"""Who may do what on the Kafka listener: the listener's settings (``Security``) and each connection's
``Session`` (its SASL exchange and, once it authenticated, its user).

With ``require_auth`` (``raftlog serve --require-auth``) a connection may send only ApiVersions,
SaslHandshake and SaslAuthenticate until it has authenticated; anything else closes it, as Kafka does
(``KafkaServer``). Without it SASL is still offered: a client configured for SASL authenticates and its
connection carries its user, one that is not goes on anonymously, and a failed authentication closes the
connection either way.

A handler reads the connection's principal from ``door.session`` (``User:NAME``, None when anonymous) and
asks ``Door.allows`` whether it may: with ``enforce_acls`` (``raftlog serve --enforce-acls``, which needs
``require_auth``) the ACLs of the node's controller metadata decide, as Kafka's authorizer does, from the
client's address (``Session.host``), and a super user (``raftlog serve --super-user NAME``, as Kafka's
``super.users``) may do anything; without it every connection may do everything. Who may manage SCRAM
credentials over Kafka (``may_manage_users``): with ACLs, whoever may ALTER (DESCRIBE, to describe) the
cluster; else a super user, or anyone when authentication is not required.

Kafka's delegation tokens (``delegation_token_apis``): ``token_secrets`` derives their HMACs and SCRAM
credentials from the cluster secret; their max lifetime and renew interval are the node's options. A
connection that logged in with a token (``Session.token_authenticated``) may not make, renew, expire or
describe tokens, as in Kafka.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafka_api.sasl import Exchange
from partitions.security.acls import CLUSTER_NAME, AclBinding, AclOperation, Authorizers, ResourceType
from partitions.security.defaults import (
    DELEGATION_TOKEN_EXPIRY_TIME_MS_DEFAULT,
    DELEGATION_TOKEN_MAX_LIFETIME_MS_DEFAULT,
)
from partitions.security.delegation_tokens import DelegationToken, TokenSecrets
from partitions.security.login_failures import LoginFailures
from partitions.security.tokens import ApiToken
from partitions.security.users import ScramCredential, Verifier

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
    # failed logins, refused past their bounds: the node's, shared with its HTTP door (``raftlog serve``)
    login_failures: LoginFailures = field(default_factory=LoginFailures)
    clock_ms: Callable[[], int] = field(default=lambda: time.time_ns() // 1_000_000)  # tokens expire by it
    enforce_acls: bool = False  # every API checks the connection's ACLs (needs require_auth)
    # Kafka's delegation tokens: their secrets (from the cluster secret, ``raftlog serve``) and lifetimes
    token_secrets: TokenSecrets = field(default_factory=lambda: TokenSecrets(os.urandom(32)))
    delegation_token_max_lifetime_ms: int = DELEGATION_TOKEN_MAX_LIFETIME_MS_DEFAULT
    delegation_token_expiry_time_ms: int = DELEGATION_TOKEN_EXPIRY_TIME_MS_DEFAULT
    authorizers: Authorizers = field(init=False)  # the authorizer of the ACLs the node holds now

    def __post_init__(self) -> None:
        if self.enforce_acls and not self.require_auth:
            raise ValueError("enforce_acls needs require_auth: ACLs name authenticated users")
        object.__setattr__(self, "authorizers", Authorizers(f"User:{n}" for n in self.super_users))

    def allows(
        self,
        session: Session,
        acls: tuple[AclBinding, ...],
        operation: AclOperation,
        resource_type: ResourceType,
        name: str | None,
    ) -> bool:
        """Whether the connection may (always, when ACLs are not enforced) on the resource ``name``, or,
        with ``name`` None, on some resource of the type (Kafka's ``authorizeByResourceType``)."""
        if not self.enforce_acls:
            return True
        principal = session.principal
        if principal is None:
            return False
        authorizer = self.authorizers.of(acls)
        if name is None:
            return authorizer.allows_any(principal, session.host, operation, resource_type)
        return authorizer.allows(principal, session.host, operation, resource_type, name)

    def may_manage_users(
        self, session: Session, acls: tuple[AclBinding, ...], operation: AclOperation
    ) -> bool:
        """Whether this connection may describe (``operation`` DESCRIBE) or change (ALTER) SCRAM
        credentials: the cluster's ACLs with ``enforce_acls``, else a super user's call (anyone's
        without ``require_auth``)."""
        if self.enforce_acls:
            return self.allows(session, acls, operation, ResourceType.CLUSTER, CLUSTER_NAME)
        return not self.require_auth or session.user in self.super_users

    def credential_gone(
        self,
        session: Session,
        users: Mapping[str, tuple[ScramCredential, ...]],
        tokens: Mapping[str, ApiToken],
        delegation_tokens: Mapping[str, DelegationToken],
    ) -> str | None:
        """Why the credential the connection authenticated with no longer holds in the node's metadata
        now (its user deleted, its token revoked or expired, its password changed), or None: the
        listener then cuts the connection, as Kafka's re-authentication (KIP-368) would refuse it."""
        name = session.user
        if name is None:
            return None
        credentials = users.get(name)
        if credentials is None:
            return f"user {name!r} was deleted"
        if session.delegation_token_id is not None:
            delegation = delegation_tokens.get(session.delegation_token_id)
            holder = None if delegation is None else delegation.owner
            expired = delegation is not None and delegation.expired(self.clock_ms())
            return _token_gone(f"delegation token {session.delegation_token_id}", name, holder, expired)
        if session.token_id is not None:
            token = tokens.get(session.token_id)
            holder = None if token is None else token.user
            expired = token is not None and token.expired(self.clock_ms())
            return _token_gone(f"token {session.token_id}", name, holder, expired)
        if credentials is not session.credentials and credentials != session.credentials:
            return f"the password of {name!r} changed"
        return None

    def admits(self, session: Session, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be served on this connection now."""
        return session.user is not None or not self.require_auth or api_key in BEFORE_AUTHENTICATION


def _token_gone(what: str, name: str, holder: str | None, expired: bool) -> str | None:
    """Why the token a connection of ``name`` logged in with no longer holds (``holder``: whose it is now,
    None when it is gone), or None."""
    if holder != name:
        return f"the {what} of {name!r} was revoked"
    return f"the {what} of {name!r} expired" if expired else None


@dataclass(slots=True)
class Session:
    """One connection's authentication, changed only by the SASL handlers (which the listener runs one
    at a time, before reading the connection's next request)."""

    mechanism: str | None = None  # chosen by SaslHandshake
    exchange: Exchange | None = None  # the SASL exchange under way
    user: str | None = None  # once authenticated
    # what it authenticated with, re-checked by the listener (``Security.credential_gone``): the id of the
    # token given in place of the password (SASL/PLAIN), else the user's SCRAM credentials then
    token_id: str | None = None
    credentials: tuple[ScramCredential, ...] = ()
    delegation_token_id: str | None = None  # a delegation token's (SASL/SCRAM with tokenauth=true)
    closing: str | None = None  # why to close the connection once this answer is sent
    host: str = ""  # the client's address as the node sees it (``partitions.security.acls.client_host``)

    @property
    def member_host(self) -> str:
        """The client's address as Kafka names a group member's host (``InetAddress.toString()``:
        ``/127.0.0.1``), for every group protocol alike; empty when the node did not see one."""
        return f"/{self.host}" if self.host else ""

    @property
    def token_authenticated(self) -> bool:
        """Whether it logged in with a token (a delegation token, or an API token in a password's place):
        such a connection may not make or renew tokens (Kafka's ``allowTokenRequests``)."""
        return self.token_id is not None or self.delegation_token_id is not None

    @property
    def principal(self) -> str | None:
        """``User:NAME`` once authenticated (Kafka's principal), None for an anonymous connection."""
        return None if self.user is None else f"User:{self.user}"
