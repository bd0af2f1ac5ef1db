"""Users: ``GET /v1/users``, ``POST /v1/users`` (create, or set a new password), ``DELETE
/v1/users/{user}`` (its API tokens go with it); a user's API tokens: ``POST /v1/users/{user}/tokens``
(make one: its text is answered this once), ``GET /v1/users/{user}/tokens``, ``DELETE
/v1/users/{user}/tokens/{token_id}`` (revoke). Admin endpoints: the admin token, or with ACLs enforced a
user as its ACLs allow (``ROUTES`` says which; a user's own tokens need none).

The password is turned into SCRAM credentials here, where it entered (``partitions.security.users``: a
random salt per mechanism, 4096 PBKDF2 iterations unless asked for more), and only those travel to the
controller leader and are replicated; no node stores or logs a password. The credentials serve HTTP Basic on
the data API (``api/auth.py``) and Kafka's SASL/SCRAM.

A token is made here too (``partitions.security.tokens.issue_token``: random id and secret from ``secrets``,
this node's clock for its creation and expiry) and only its id, user, the SHA-256 of its text, description
and times travel to the controller leader; the text is in this answer and nowhere else.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from api import state
from api.access import ALTER, DESCRIBE, cluster, needs
from api.admin import _object
from api.errors import BadRequest
from api.openapi import Operation
from partitions.errors import UnknownUser
from partitions.metadata.service import AdminService
from partitions.names import check_user_name
from partitions.security.tokens import check_token_id, issue_token, token_expiry
from partitions.security.users import ITERATIONS_DEFAULT, MECHANISMS, check_password, make_credential
from raftlog_contract import USERS_PATH, user_tokens_path


async def list_users(request: web.Request) -> web.Response:
    users = state.node(request).metadata.users()
    return web.json_response(
        {
            "users": [
                {"name": name, "mechanisms": sorted(c.mechanism for c in creds)}
                for name, creds in sorted(users.items())
            ]
        }
    )


async def set_user(request: web.Request) -> web.Response:
    body = await _object(request, {"name", "password", "mechanisms", "iterations"})
    name = check_user_name(body.get("name"), "name")
    password = check_password(body.get("password"))
    mechanisms = body.get("mechanisms", sorted(MECHANISMS))
    if not isinstance(mechanisms, list) or not mechanisms or any(m not in MECHANISMS for m in mechanisms):
        raise BadRequest(f"mechanisms: a non-empty list of {sorted(MECHANISMS)}")
    if len(set(mechanisms)) != len(mechanisms):
        raise BadRequest("mechanisms: each at most once")
    iterations = body.get("iterations", ITERATIONS_DEFAULT)
    if not isinstance(iterations, int) or isinstance(iterations, bool):
        raise BadRequest("iterations: an integer")
    existed = name in state.node(request).metadata.users()
    # PBKDF2 costs milliseconds per mechanism: off the event loop
    credentials = await asyncio.to_thread(
        lambda: [make_credential(m, password, iterations) for m in sorted(mechanisms)]
    )
    stored = await state.node(request).cluster.admin.call(AdminService.set_user, name, credentials)
    return web.json_response({"name": name, "mechanisms": stored, "created": not existed})


async def delete_user(request: web.Request) -> web.Response:
    await state.node(request).cluster.admin.call(
        AdminService.delete_user, check_user_name(request.match_info["user"], "user")
    )
    return web.Response(status=204)


def _user(request: web.Request) -> str:
    """The user the path names, known to this node's controller metadata (404 otherwise)."""
    name = check_user_name(request.match_info["user"], "user")
    if name not in state.node(request).metadata.users():
        raise UnknownUser(name)
    return name


async def create_token(request: web.Request) -> web.Response:
    """``{"description"?, "expires_ms"? | "lifetime_ms"?}`` (no body: no description, and neither: it
    expires after the node's default lifetime, ``serve --api-token-lifetime-ms``)."""
    # not asked of this node's metadata: a user made a moment ago elsewhere may not have reached it yet, and
    # the controller refuses a token of an unknown user anyway
    name = check_user_name(request.match_info["user"], "user")
    fields = {"description", "expires_ms", "lifetime_ms"}
    body = await _object(request, fields) if request.can_read_body else {}
    app_state = state.state(request)
    now_ms = app_state.clock_ms()
    expires_ms = token_expiry(
        now_ms,
        expires_ms=body.get("expires_ms"),
        lifetime_ms=body.get("lifetime_ms"),
        default_lifetime_ms=app_state.settings.token_lifetime_ms,
    )
    text, token = issue_token(name, now_ms, expires_ms, body.get("description", ""))
    made = await state.node(request).cluster.admin.call(AdminService.create_token, token)
    return web.json_response({"token": text, **made.to_json(now_ms)}, status=201)


async def list_tokens(request: web.Request) -> web.Response:
    name = _user(request)
    now_ms = state.state(request).clock_ms()
    owned = [t for t in state.node(request).metadata.tokens().values() if t.user == name]
    owned.sort(key=lambda t: (t.created_ms, t.token_id))
    return web.json_response({"tokens": [t.to_json(now_ms) for t in owned]})


async def delete_token(request: web.Request) -> web.Response:
    name = check_user_name(request.match_info["user"], "user")
    token_id = check_token_id(request.match_info["token_id"], "path parameter token_id")
    await state.node(request).cluster.admin.call(AdminService.delete_token, name, token_id)
    return web.Response(status=204)


_TOKENS = user_tokens_path.template  # as the clients build it (raftlog_contract)

ROUTES: tuple[Operation, ...] = (
    Operation(
        "GET", USERS_PATH, list_users, "listUsers", "Users and their SCRAM mechanisms (never a password)",
        "admin", ok_schema="Users", local=True,
        access=needs(cluster(DESCRIBE)),
    ),
    Operation(
        "POST", USERS_PATH, set_user, "setUser",
        "Create a user, or set its password (created: false); stored as salted SCRAM credentials", "admin",
        body="UserRequest", ok_schema="User", errors=(400, 415), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "DELETE", "/v1/users/{user}", delete_user, "deleteUser", "Delete a user and revoke its tokens",
        "admin", ok_status=204, errors=(404,), write=True,
        access=needs(cluster(ALTER)),
    ),
    Operation(
        "POST", _TOKENS, create_token, "createUserToken",
        "Make an API token of the user (its text answered once: only a hash is kept)", "admin",
        body="TokenRequest", body_required=False, ok_status=201, ok_schema="CreatedToken",
        errors=(404, 409, 415, 507), write=True,
        access=needs(cluster(ALTER, unless_caller="user", password_only=True)),  # a token makes no token
    ),
    Operation(
        "GET", _TOKENS, list_tokens, "listUserTokens", "The user's API tokens (never their text)", "admin",
        ok_schema="Tokens", errors=(404,), local=True,
        access=needs(cluster(DESCRIBE, unless_caller="user")),
    ),
    Operation(
        "DELETE", f"{_TOKENS}/{{token_id}}", delete_token, "deleteUserToken",
        "Revoke one of the user's API tokens", "admin", ok_status=204, errors=(404, 507), write=True,
        access=needs(cluster(ALTER, unless_caller="user")),
    ),
)  # fmt: skip
