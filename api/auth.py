"""Who is calling the data API (``raftlog serve --require-auth``): HTTP Basic with a user of
``/v1/users``, or the admin token as a bearer token. The ``Caller`` found is kept on the request for the
route's ACLs (``access.py``). Every client route needs one of them; ``/status/*``,
``/metrics`` and ``/openapi.json`` stay open (probes, scrapers), ``/v1`` keeps its admin token and
``/internal/v1`` its cluster credential.

A password is checked against the user's SCRAM credential as the controller holds it now
(``partitions.users.Verifier``): PBKDF2 runs off the event loop the first time a password is seen, and a
password that matched is remembered until the credential changes, so that a client's next requests cost
a hash. A user deleted or given a new password is refused from the next request on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac

from aiohttp import web

from api.errors import Unauthorized
from api.state import Caller
from partitions.cluster import FrontDoor
from partitions.services import Verifier, client_host

OPEN_PATHS = ("/status/", "/metrics", "/openapi.json")


def needs_user(path: str) -> bool:
    """Whether ``--require-auth`` asks a user of this path (the client routes)."""
    return not (path == "/v1" or path.startswith(("/v1/", "/internal/")) or path.startswith(OPEN_PATHS))


async def authenticate(
    request: web.Request, node: FrontDoor, admin_token: str | None, verifier: Verifier
) -> Caller:
    """Who calls: the principal (``User:NAME``, or ``User:admin`` for the admin token) from the client's
    address; else ``Unauthorized``."""
    host = client_host(request.remote)
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer" and admin_token is not None:
        if hmac.compare_digest(credentials.strip().encode("utf-8"), admin_token.encode("utf-8")):
            return Caller("User:admin", host, admin_token=True)
        raise Unauthorized("wrong bearer token")
    if scheme != "basic":
        raise Unauthorized("this node requires 'Authorization: Basic <base64 of user:password>'")
    try:
        name, colon, password = (
            base64.b64decode(credentials.strip(), validate=True).decode("utf-8").partition(":")
        )
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthorized("Basic credentials are not base64 of UTF-8 'user:password'") from None
    if not colon:
        raise Unauthorized("Basic credentials need 'user:password'")
    users = node.metadata.users()
    if not verifier.known(users, name, password):
        matched = await asyncio.to_thread(verifier.verify, users, name, password)
        if not matched:
            raise Unauthorized("unknown user or wrong password")  # the same words for both
    return Caller(f"User:{name}", host)
