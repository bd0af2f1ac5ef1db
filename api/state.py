"""What every handler of a node's HTTP API shares: the node (as a ``FrontDoor``), the settings, the
limits, the metrics, and the few helpers that read a request. No handler imports ``api.app``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.bodies import read_body
from api.errors import Overloaded
from api.http_limits import BODY_TIMEOUT_S_DEFAULT, GUARD, QuietLog
from api.json_work import JsonWork
from api.logins import Logins
from api.metrics import HttpMetrics
from api.schemas import json_document, path_partition
from partitions.peers.cluster import FrontDoor
from partitions.security.acls import Authorizers, client_host
from partitions.security.delegation_tokens import TokenSecrets
from partitions.security.holds import RequestBytes
from partitions.security.login_failures import LoginFailures
from partitions.security.tokens import TOKEN_LIFETIME_MS_DEFAULT
from partitions.security.users import Verifier
from raftlog.errors import InvariantViolation

log = logging.getLogger("api")

WRITES_IN_FLIGHT_MAX = 2048  # produce and offset-commit requests being served by one node at once
LONG_POLLS_IN_FLIGHT_MAX = 4096  # fetches that may wait for records at once
RETRIABLE_LOG_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class Settings:
    admin_token: str | None
    produce_timeout_ms: int
    admin_timeout_ms: int
    request_bytes_max: int
    require_auth: bool = False  # the client routes need a user (api/auth.py)
    enforce_acls: bool = False  # the client and /v1 routes check the caller's ACLs (api/access.py)
    super_users: frozenset[str] = frozenset()  # user names ACLs do not apply to
    body_timeout_s: float = BODY_TIMEOUT_S_DEFAULT  # a request body must be whole within it (bodies.py)
    # with require_auth, /metrics (which names every topic, group and offset) needs this token or the
    # admin token as a bearer token, unless public_metrics
    metrics_token: str | None = None
    public_metrics: bool = False
    # a user's API token made without an expiry expires after this (``partitions.security.tokens``)
    token_lifetime_ms: int = TOKEN_LIFETIME_MS_DEFAULT


class Admission:
    """Bounds the writes and long polls a node holds in flight, so overload answers 503 + Retry-After at
    once instead of queueing without limit (every write holds a Raft proposal and memory until it
    commits). Event-loop only."""

    def __init__(self, writes_max: int, long_polls_max: int) -> None:
        if writes_max < 1 or long_polls_max < 1:
            raise ValueError("writes_max and long_polls_max must be >= 1")
        self.limits = {"write": writes_max, "long-poll": long_polls_max}
        self.in_flight = {"write": 0, "long-poll": 0}

    def enter(self, kind: str) -> None:
        if self.in_flight[kind] >= self.limits[kind]:
            raise Overloaded(kind, self.limits[kind])
        self.in_flight[kind] += 1

    def leave(self, kind: str) -> None:
        if self.in_flight[kind] <= 0:
            raise InvariantViolation(f"admission: leave {kind} with none in flight")
        self.in_flight[kind] -= 1


class AppState:
    def __init__(
        self,
        node: FrontDoor,
        settings: Settings,
        admission: Admission,
        login_failures: LoginFailures,
        request_bytes: RequestBytes,
    ) -> None:
        self.node = node
        self.settings = settings
        self.admission = admission
        self.metrics = HttpMetrics()
        # Which typed error retriable 5xx answers (503 not done, 504 outcome unknown) carried, so the node's
        # log explains what a client saw, without one line per answer during an election: at most one line
        # per error code per interval, with how many answers it stands for.
        self.retriable_log = QuietLog(RETRIABLE_LOG_INTERVAL_S)
        self.verifier = Verifier()  # passwords checked lately (api/auth.py)
        # Kafka's delegation tokens' HMACs (api/auth.py): from the cluster secret, set by ``build_app``
        self.token_secrets = TokenSecrets(os.urandom(32))
        self.json_work = JsonWork()  # large JSON bodies, parsed in a process of their own
        self.logins = Logins(login_failures)  # failed logins, refused past their bounds (api/auth.py)
        # bytes of request bodies being read or served, in all and per caller (api/bodies.py)
        self.request_bytes = request_bytes
        # the wall clock, ms since the epoch: when a token is made, and whether one expired (tests move it)
        self.clock_ms: Callable[[], int] = wall_clock_ms
        # the authorizer of the ACLs the node holds now (api/access.py); None: ACLs are not enforced
        self.authorizers = (
            Authorizers(f"User:{name}" for name in settings.super_users) if settings.enforce_acls else None
        )


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Caller:
    """Who made a request to a client route (or to ``/v1`` with ACLs enforced), as ``auth.authenticate``
    found them."""

    principal: str  # ``User:NAME``; ``User:admin`` for the admin token
    host: str  # the client's address as this node sees it (``partitions.security.acls.client_host``)
    admin_token: bool = False  # authenticated with the admin token: ACLs do not apply
    by_token: bool = False  # authenticated with one of the user's API tokens, not its password


STATE = web.AppKey("raftlog_state", AppState)
LEADER = web.RequestKey("raftlog_leader", str)  # who served the request (X-Raftlog-Leader)
ANSWER_TYPE = web.RequestKey("raftlog_answer_type", str)  # the media type negotiated (api.negotiation)
CALLER = web.RequestKey("raftlog_caller", Caller)  # who made a request to a client route (api.auth)
ADMIN_TOKEN = web.RequestKey("raftlog_admin_token", bool)  # a /v1 request the admin token's check passed
# whether the request presented a credential the node checked and took (a user, the admin, metrics or
# cluster token): with --require-auth only such a caller is told X-Raftlog-Leader
AUTHENTICATED = web.RequestKey("raftlog_authenticated", bool)


def state(request: web.Request) -> AppState:
    return request.app[STATE]


def node(request: web.Request) -> FrontDoor:
    return request.app[STATE].node


async def body(request: web.Request) -> bytes:
    app_state = state(request)
    settings = app_state.settings
    caller = request.get(CALLER)
    if caller is not None:
        holder = caller.principal
    elif request.get(ADMIN_TOKEN, False):
        holder = "User:admin"  # the admin token's principal: a super user's share and reserve
    else:
        holder = f"address:{client_host(request.remote)}"
    limit, timeout_s = settings.request_bytes_max, settings.body_timeout_s
    guard = request.app[GUARD]
    limits = guard.limits

    def shed(why: str) -> None:
        guard.note("over_share", f"HTTP body of {holder} cut: {why}")

    return await read_body(
        request, limit, timeout_s, app_state.request_bytes, holder, limits.body_grace_s,
        limits.body_rate_min_bytes_per_s, shed,
    )  # fmt: skip


async def json_body(request: web.Request) -> Any:
    return await json_of(request, await body(request))


async def json_of(request: web.Request, raw: bytes) -> Any:
    """The document of a JSON body, parsed off the event loop when it is large (``api.json_work``)."""
    return await state(request).json_work.run(json_document, raw)


def partition(request: web.Request) -> int:
    return path_partition(request.match_info["partition"])


def answer_type(request: web.Request) -> str:
    """The media type the route's negotiation chose from the request's ``Accept``."""
    return request[ANSWER_TYPE]


def served_by(request: web.Request, node_id: str) -> None:
    """Name the node that served the request (``X-Raftlog-Leader``)."""
    request[LEADER] = node_id


def leader_header(request: web.Request) -> str | None:
    """What the answer's ``X-Raftlog-Leader`` says: the node that served the request (this one unless
    ``served_by`` named another), or None (no header) for a caller a ``--require-auth`` node did not log
    in (refused, or on an open route): a stranger learns nothing of the node, not even its id."""
    if state(request).settings.require_auth and not request.get(AUTHENTICATED, False):
        return None
    leader: str = request.get(LEADER, node(request).node_id)
    return leader
