"""Users: ``GET /v1/users``, ``POST /v1/users`` (create, or set a new password), ``DELETE
/v1/users/{user}``. Admin endpoints (the admin token guards them as every ``/v1`` route).

The password is turned into SCRAM credentials here, where it entered (``partitions.users``: a random salt
per mechanism, 4096 PBKDF2 iterations unless asked for more), and only those travel to the controller
leader and are replicated; no node stores or logs a password. The credentials serve HTTP Basic on the data
API (``api/auth.py``) and, later, Kafka's SASL/SCRAM.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from api import state
from api.admin import _object
from api.errors import BadRequest
from api.openapi import Operation
from partitions.names import check_user_name
from partitions.services import ITERATIONS_DEFAULT, MECHANISMS, check_password, make_credential


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
    stored = await state.node(request).cluster.admin.set_user(name, credentials)
    return web.json_response({"name": name, "mechanisms": stored, "created": not existed})


async def delete_user(request: web.Request) -> web.Response:
    await state.node(request).cluster.admin.delete_user(check_user_name(request.match_info["user"], "user"))
    return web.Response(status=204)


ROUTES: tuple[Operation, ...] = (
    Operation(
        "GET", "/v1/users", list_users, "listUsers", "Users and their SCRAM mechanisms (never a password)",
        "admin", ok_schema="Users", local=True,
    ),
    Operation(
        "POST", "/v1/users", set_user, "setUser",
        "Create a user, or set its password (created: false); stored as salted SCRAM credentials", "admin",
        body="UserRequest", ok_schema="User", errors=(400, 415), write=True,
    ),
    Operation(
        "DELETE", "/v1/users/{user}", delete_user, "deleteUser", "Delete a user", "admin",
        ok_status=204, errors=(404,), write=True,
    ),
)  # fmt: skip
