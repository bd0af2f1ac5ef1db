"""Who is calling the data API (``raftlog serve --require-auth``): HTTP Basic with a user of
``/v1/users`` and its password or one of its API tokens (``rlt_...``, ``/v1/users/{user}/tokens``) in
the password's place, such a token as a bearer token, or the admin token as a bearer token. The
``Caller`` found is kept on the request for the route's ACLs (``access.py``): a user's token calls as
that user. Every client route needs one of them (``users_log_in``); ``/status/*`` (liveness: the node's
id and pid, no names of data), ``/openapi.json`` (probes) and the console's files (``api.console``: the
page asks for credentials itself) stay open, ``/metrics`` takes the metrics
token or the admin token, or with ``--enforce-acls`` a user who may DESCRIBE the cluster
(``app._check_metrics``; open with ``--public-metrics``), ``/internal/v1`` its cluster credential.
``/v1`` takes the admin token alone (``app._check_token``), unless ACLs are enforced: then it takes any
of the above, and the user's ACLs decide what it may do there.

A password is checked against the user's SCRAM credential as the controller holds it now
(``partitions.security.users.Verifier``): PBKDF2 runs off the event loop the first time a password is seen,
and a password that matched is remembered until the credential changes, so that a client's next requests cost
a hash. A user deleted or given a new password is refused from the next request on.

A user's token is checked against the tokens the controller holds now
(``partitions.security.tokens.check_token``: found by its id, the SHA-256 of the text compared in constant
time, its expiry against this node's clock): one revoked, expired, unknown or wrong is refused in the same
words as a wrong admin token, from the next request on every node that applied the change. A token lets its
user in as a password would (``Caller.by_token`` says which let it in: a token makes no token).
So does a Kafka delegation token, its id and HMAC in base64 as HTTP Basic's user and password (as SCRAM
takes them with ``tokenauth=true``): it calls as its owner while it is held and has not expired.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import time

from aiohttp import web

from api import console
from api.errors import Unauthorized
from api.logins import Logins
from api.state import Caller
from partitions.peers.cluster import FrontDoor
from partitions.security.acls import client_host
from partitions.security.delegation_tokens import TokenSecrets
from partitions.security.tokens import check_token, is_token, is_users_token
from partitions.security.users import Verifier

OPEN_PATHS = ("/status/", "/metrics", "/openapi.json")
WRONG_BEARER = "wrong, expired or revoked bearer token"  # the same words whatever was wrong


def authorization(request: web.Request) -> tuple[str, str] | None:
    """The ``Authorization`` header's scheme (lower case) and credentials; None when it carries anything
    but ASCII (aiohttp hands such bytes on as lone surrogates): no token, base64 text or password of
    ours can be such, so it is a wrong credential, never an error of the node."""
    header = request.headers.get("Authorization", "")
    if not header.isascii():
        return None
    scheme, _, credentials = header.partition(" ")
    return scheme.lower(), credentials.strip()


def is_admin(path: str) -> bool:
    """Whether the path is the admin API's (``/v1``)."""
    return path == "/v1" or path.startswith("/v1/")


def needs_user(path: str) -> bool:
    """Whether ``--require-auth`` asks a user of this path (the client routes)."""
    if is_admin(path) or path.startswith("/internal/") or path.startswith(OPEN_PATHS):
        return False
    return not console.is_console(path)  # the page asks for credentials itself and carries no data


def users_log_in(path: str, require_auth: bool, enforce_acls: bool) -> bool:
    """Whether ``authenticate`` finds the caller of this path: the client routes with ``--require-auth``,
    and ``/v1`` too with ``--enforce-acls`` (the users' ACLs decide there; without them ``/v1`` takes only
    the admin token, since nothing would stop a user)."""
    return (require_auth and needs_user(path)) or (enforce_acls and is_admin(path))


def claimed_user(request: web.Request) -> str | None:
    """The user name HTTP Basic credentials claim, when they are well formed."""
    found = authorization(request)
    if found is None or found[0] != "basic":
        return None
    try:
        text = base64.b64decode(found[1], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, colon, _ = text.partition(":")
    return name if colon else None


async def authenticate(
    request: web.Request,
    node: FrontDoor,
    admin_token: str | None,
    verifier: Verifier,
    now_ms: int,
    logins: Logins,
    token_secrets: TokenSecrets,
) -> Caller:
    """Who calls: the principal (``User:NAME``, or ``User:admin`` for the admin token) from the client's
    address; else ``Unauthorized``, or ``TooManyLoginFailures`` before anything is checked when the
    address or the user name failed too often lately. ``now_ms``: this node's clock, against which
    tokens expire."""
    host = client_host(request.remote)
    user = claimed_user(request)
    now_s = time.monotonic()
    logins.check(host, user, now_s)
    try:
        return await _authenticate(request, node, admin_token, verifier, now_ms, host, token_secrets)
    except Unauthorized as refused:
        logins.failed(host, user, now_s, str(refused))
        raise


async def _authenticate(
    request: web.Request,
    node: FrontDoor,
    admin_token: str | None,
    verifier: Verifier,
    now_ms: int,
    host: str,
    token_secrets: TokenSecrets,
) -> Caller:
    found = authorization(request)
    if found is None:
        raise Unauthorized("the Authorization header is not ASCII: no credential of this node is")
    scheme, credentials = found
    if scheme == "bearer":
        return _bearer(node, credentials, admin_token, host, now_ms)
    if scheme != "basic":
        raise Unauthorized(
            "this node requires 'Authorization: Basic <base64 of user:password>' or "
            "'Authorization: Bearer <token>'"
        )
    try:
        name, colon, password = base64.b64decode(credentials, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthorized("Basic credentials are not base64 of UTF-8 'user:password'") from None
    if not colon:
        raise Unauthorized("Basic credentials need 'user:password'")
    users = node.metadata.users()
    if is_users_token(node.metadata.tokens(), users, name, password, now_ms):
        return Caller(f"User:{name}", host, by_token=True)  # one of its API tokens in its password's place
    # a Kafka delegation token: its id and HMAC (base64), as SCRAM takes them; it calls as its owner
    owner = token_secrets.owner_logging_in(node.metadata.delegation_tokens(), users, name, password, now_ms)
    if owner is not None:
        return Caller(f"User:{owner}", host, by_token=True)
    if not verifier.known(users, name, password):
        matched = await asyncio.to_thread(verifier.verify, users, name, password)
        if not matched:
            raise Unauthorized("unknown user or wrong password")  # the same words for both
    return Caller(f"User:{name}", host)


def _bearer(node: FrontDoor, presented: str, admin_token: str | None, host: str, now_ms: int) -> Caller:
    """The admin token (compared first: it may look like anything), else a user's token."""
    given = presented.encode("utf-8", "surrogatepass")
    if admin_token is not None and hmac.compare_digest(given, admin_token.encode("utf-8")):
        return Caller("User:admin", host, admin_token=True)
    if is_token(presented):
        token = check_token(node.metadata.tokens(), presented, now_ms)
        # a deleted user's tokens go with it in the same change; checked here too, as cheap as it is sure
        if token is not None and token.user in node.metadata.users():
            return Caller(f"User:{token.user}", host, by_token=True)
    raise Unauthorized(WRONG_BEARER)
