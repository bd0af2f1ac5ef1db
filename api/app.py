"""The node's HTTP API: client endpoints (Confluent REST v2 style), admin endpoints (Redpanda style), and
the node-to-node endpoints of peer calls.

``build_app(node)`` returns an ``aiohttp`` application over any ``partitions.peers.cluster.FrontDoor``.
``ROUTES`` is the one route table: the app registers exactly those routes, admission counts their writes
and long polls, and ``/openapi.json`` describes them. Handlers only parse (``api.schemas``), call the
node's cluster-wide services (which run each call where it must: the partition's leader, the controller
leader, the group's coordinator) and render. Two middlewares do the rest:

- ``_observe`` (outermost) times every request for ``/metrics`` and stamps ``X-Raftlog-Leader``;
- ``_errors`` authenticates the caller (``api.auth``: a user on client routes with ``--require-auth``, and
  on ``/v1`` with ``--enforce-acls``; else the admin token on ``/v1``), checks the metrics token on
  ``/metrics`` and the cluster credential on ``INTERNAL_PREFIX``, turns
  every typed error into its HTTP answer through the one table in ``api.errors``, and anything else into
  a logged 500 (error_code 50000).

``X-Raftlog-Leader`` names the node that served the request: the partition's leader for partition-scoped
requests (all of them, comma-separated, for a produce that spanned partitions led by several nodes), this
node for metadata and cluster requests, and is empty when the request failed because no leader is known.
With ``--require-auth`` it is told only to a caller whose credential the node took (never on an open route,
a refusal before login or any other answer to a stranger).
"""

from __future__ import annotations

import hmac
import logging
import math
import os
import time
from collections.abc import Callable, Mapping

from aiohttp import web

from api import (
    access,
    acls,
    admin,
    auth,
    client_quotas,
    cluster_metrics,
    console,
    consumers,
    cross_site,
    errors,
    internal,
    negotiation,
    prometheus,
    records,
    registry_routes,
    share_groups,
    state,
    topics,
    transactions,
    typed_records,
    users,
)
from api.access import (
    ALTER,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    READ,
    WRITE,
    cluster,
    group,
    needs,
    open_to_users,
    topic,
)
from api.bodies import end_if_cut, give_back
from api.errors import (
    BadRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotReady,
    RecordNotDeserializable,
    RequestTimeout,
    RequestTooLarge,
    RouteNotFound,
    TooManyLoginFailures,
    Unauthorized,
)
from api.http_limits import GUARD, SERVER_HEADER, Guard, HttpLimits
from api.openapi import RECORD_TYPES, Handler, Operation, Param, document
from api.routing import RoundRobin
from api.schemas import refuse_legacy_accept
from partitions import errors as broker_errors
from partitions.names import check_group_name, check_instance_name, check_topic_name
from partitions.peers.client import INTERNAL_PREFIX, LEVELS_HEADER, encode_levels, parse_levels
from partitions.peers.cluster import FrontDoor
from partitions.security.acls import CLUSTER_NAME, client_host
from partitions.security.delegation_tokens import TokenSecrets
from partitions.security.holds import RequestBytes, holder_kinds
from partitions.security.login_failures import LoginFailures
from partitions.security.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from partitions.security.tokens import TOKEN_LIFETIME_MS_DEFAULT
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.errors import RaftlogError
from raftlog.histogram import HistogramSnapshot
from raftlog_contract import (
    ADMIN_TOPICS_PATH,
    BINARY_V2,
    COLUMNAR_JSON,
    COLUMNAR_MSGPACK,
    HEALTH_PATH,
    JSON_V2,
    LEADER_HEADER,
    LIVE_PATH,
    METRICS_PATH,
    NODES_PATH,
    PLAIN_JSON,
    READY_PATH,
    RECORD_BATCH,
    SCHEMA_FORMATS,
    TOPICS_PATH,
    delete_records_path,
    partition_path,
    topic_path,
)

log = logging.getLogger(__name__)

REQUEST_BYTES_MAX = 16 * 1024 * 1024
# how long a produce waits for its commit before the node answers it with a timeout error
PRODUCE_TIMEOUT_MS_DEFAULT = 10_000
HTTP_LIMITS_DEFAULT = HttpLimits()
# The node's Kafka listener's counters of connections refused and cut, by reason (its ``Stats``), set by
# the process that runs both doors; the HTTP door only renders them in /metrics
KAFKA_CONNECTION_COUNTS: web.AppKey[Callable[[], Mapping[str, int]]] = web.AppKey(
    "raftlog_kafka_connection_counts"
)
# The node's incremental fetch sessions (``FetchSessions.counts``: sessions held, fetches answered in full
# and from a session, session errors, evictions), set by the process that runs both doors, for /metrics
KAFKA_FETCH_SESSIONS: web.AppKey[Callable[[], Mapping[str, int]]] = web.AppKey("raftlog_kafka_fetch_sessions")
# The node's Kafka listener's request latencies by API name (``KafkaServer.request_latencies``), set by
# the process that runs both doors; rendered in /metrics as raftlog_kafka_request_seconds{api}
KAFKA_REQUEST_SECONDS: web.AppKey[Callable[[], Mapping[str, HistogramSnapshot]]] = web.AppKey(
    "raftlog_kafka_request_seconds"
)
# The node's Kafka listener's budget of request bytes (set by the process that runs both doors), in /metrics
# beside the HTTP door's own
KAFKA_REQUEST_BYTES: web.AppKey[RequestBytes] = web.AppKey("raftlog_kafka_request_bytes")
# Whether the node's Kafka listener is open (set by the process that runs both doors; it opens once the
# node's metadata caught up): /status/ready says ready only then, so a client told so finds it open
KAFKA_LISTENING: web.AppKey[Callable[[], bool]] = web.AppKey("raftlog_kafka_listening")
FETCH_TIMEOUT_MS_MAX = records.FETCH_TIMEOUT_MS_MAX


# -- operations ----------------------------------------------------------------------------------------


async def metrics(request: web.Request) -> web.Response:
    app_state = state.state(request)
    values = dict(app_state.node.metadata.metrics())
    values.update(await topics.partition_health_metrics(state.node(request)))
    failures, guard = app_state.logins.failures, request.app[GUARD]
    values["login_failures"] = failures.failed_total
    values["login_refusals"] = failures.refused_total
    values["http_connections_open"] = guard.connections.open
    for reason, count in sorted(guard.cut.items()):
        values[f'http_connections_cut{{reason="{reason}"}}'] = count
    kafka_counts = request.app.get(KAFKA_CONNECTION_COUNTS)
    for reason, count in sorted(kafka_counts().items() if kafka_counts is not None else ()):
        values[f'kafka_connections_cut{{reason="{reason}"}}'] = count
    fetch_sessions = request.app.get(KAFKA_FETCH_SESSIONS)
    if fetch_sessions is not None:
        counts = fetch_sessions()
        values["kafka_fetch_sessions"] = counts["sessions"]
        values['kafka_fetches{kind="full"}'] = counts["full_fetches"]
        values['kafka_fetches{kind="incremental"}'] = counts["incremental_fetches"]
        values["kafka_fetch_session_errors"] = counts["session_errors"]
        values["kafka_fetch_session_evictions"] = counts["evictions"]
    budgets = {"http": app_state.request_bytes, "kafka": request.app.get(KAFKA_REQUEST_BYTES)}
    for door, budget in budgets.items():
        if budget is not None:
            values[f'request_bytes_held{{door="{door}"}}'] = budget.held
            values[f'request_bytes_waits{{door="{door}"}}'] = budget.waited_total
    kafka_latencies = request.app.get(KAFKA_REQUEST_SECONDS)
    kafka_requests = prometheus.labelled_histogram(
        "kafka_request_seconds", "api", kafka_latencies() if kafka_latencies is not None else {}
    )
    body = app_state.metrics.render(values, app_state.node.metadata.histograms(), [kafka_requests])
    return web.Response(body=body, headers={"Content-Type": prometheus.CONTENT_TYPE})


def _identity(request: web.Request) -> dict[str, object]:
    """Which node and process answer: a supervisor (``raftlog dev``) checks that a port it probes is
    answered by the process it started, not by another one that holds the port. With ``--require-auth``
    only a caller presenting the admin token learns them (a stranger learns nothing of the node)."""
    settings = state.state(request).settings
    if settings.require_auth:
        found = auth.authorization(request)
        token = settings.admin_token
        if token is None or found is None or found[0] != "bearer":
            return {}
        if not hmac.compare_digest(found[1].encode(), token.encode()):
            return {}
    return {"node_id": state.node(request).node_id, "pid": os.getpid()}


async def live(request: web.Request) -> web.Response:
    return web.json_response({"status": "live", **_identity(request)})


async def ready(request: web.Request) -> web.Response:
    metadata = state.node(request).metadata
    if metadata.controller() is None:
        raise NotReady("no controller known yet")
    if not metadata.caught_up():
        raise NotReady("catching up with the controller's metadata since the node started")
    kafka_listening = request.app.get(KAFKA_LISTENING)
    if kafka_listening is not None and not kafka_listening():
        raise NotReady("the Kafka listener is not open yet")
    return web.json_response({"status": "ready", **_identity(request)})


async def openapi(request: web.Request) -> web.Response:
    settings = state.state(request).settings
    token = settings.admin_token is not None
    return web.json_response(document(ROUTES, admin_token=token, acls=settings.enforce_acls))


_TOPIC = topic_path.template  # the clients' builders of these paths and the routes: one declaration
_PARTITION = partition_path.template
# Confluent's schema formats: records as JSON under a schema by text or id (api.typed_records)
_SCHEMA_BODIES = tuple((media, "SchemaProduceRequest") for media in SCHEMA_FORMATS.values())
_PRODUCE_NEEDS = needs(topic(WRITE), in_handler=typed_records.SUBJECT_NEEDS)
_FETCH_QUERY = (
    Param("offset", "integer", "first offset to return", required=True, minimum=0),
    Param(
        "timeout",
        "integer",
        "ms to wait for a record when none is available",
        minimum=0,
        maximum=FETCH_TIMEOUT_MS_MAX,
    ),
    Param(
        "max_bytes",
        "integer",
        "byte budget of the answer (at least one record is returned if any)",
        minimum=1,
        maximum=records.FETCH_MAX_BYTES_MAX,
    ),
    Param(
        "isolation",
        "string",
        "read_uncommitted (default: every committed record) or read_committed (only below the last stable "
        "offset, records of aborted transactions left out; the raw batch media type gets them named in "
        "X-Raftlog-Aborted-Transactions)",
        enum=records.ISOLATIONS,
    ),
)

ROUTES: tuple[Operation, ...] = (
    Operation(
        "GET", "/brokers", topics.list_brokers, "listBrokers", "Broker ids of the known nodes", "client",
        ok_schema="Brokers", local=True,
        access=open_to_users("the brokers, which Kafka's Metadata names to every authenticated client"),
    ),
    Operation("GET", TOPICS_PATH, topics.list_topics, "listTopics", "Topic names", "client",
              ok_schema="TopicNames", local=True,
              access=needs(in_handler="lists only the topics the caller may DESCRIBE")),
    Operation(
        "GET", _TOPIC, topics.get_topic, "getTopic", "A topic, its partitions and configs", "client",
        ok_schema="Topic", errors=(404,), access=needs(topic(DESCRIBE), topic(DESCRIBE_CONFIGS)),
    ),
    Operation(
        "POST", _TOPIC, records.produce_to_topic, "produce", "Produce records (key -> murmur2 partition)",
        "client", body="ProduceRequest", body_types=RECORD_TYPES, ok_schema="ProduceResponse",
        body_alternatives=_SCHEMA_BODIES,
        errors=(404, 413, 415, 422, 429, 504, 507), write=True, access=_PRODUCE_NEEDS,
        quota=PRODUCER_BYTE_RATE,
    ),
    Operation(
        "GET", f"{_TOPIC}/partitions", topics.get_partitions, "listPartitions",
        "A topic's partitions: each leader, and which replicas are in sync as their leader says", "client",
        ok_schema="Partitions", errors=(404,), access=needs(topic(DESCRIBE)),
    ),
    Operation(
        "GET", _PARTITION, topics.get_partition, "getPartition",
        "A partition: its leader, and which replicas are in sync as the leader says", "client",
        ok_schema="Partition", errors=(404,), access=needs(topic(DESCRIBE)),
    ),
    Operation(
        "POST", _PARTITION, records.produce_to_partition, "produceToPartition",
        "Produce records to one partition", "client", body="ProduceRequest", body_types=RECORD_TYPES,
        ok_schema="PartitionProduceResponse", body_alternatives=((RECORD_BATCH, None), *_SCHEMA_BODIES),
        errors=(404, 413, 415, 422, 429, 504, 507), write=True, access=_PRODUCE_NEEDS,
        quota=PRODUCER_BYTE_RATE,
    ),
    Operation(
        "GET", f"{_PARTITION}/offsets", records.get_offsets, "getOffsets",
        "First and next offset of a partition, or the first offset at or after a timestamp", "client",
        query=(Param("timestamp", "integer", "ms since the epoch: answer the first offset whose record's "
                     "timestamp is at or after it", minimum=0, maximum=2**63 - 1),),
        ok_schema="PartitionOffsets", errors=(404,), access=needs(topic(DESCRIBE)),
    ),
    Operation(
        "POST", delete_records_path.template, records.delete_records, "deleteRecords",
        "Delete a partition's records below an offset (-1: every committed one), as Kafka's DeleteRecords",
        "client", body="DeleteRecordsRequest", body_types=RECORD_TYPES, ok_schema="RecordsDeleted",
        errors=(404, 415, 416, 504, 507), write=True, access=needs(topic(DELETE)),
    ),
    Operation(
        "GET", f"{_PARTITION}/records", records.fetch, "fetch", "Fetch committed records (long poll)",
        "client", query=_FETCH_QUERY, ok_schema="FetchResponse", errors=(404, 406, 416, 429), long_poll=True,
        quota=CONSUMER_BYTE_RATE,
        ok_type=JSON_V2, ok_alternatives=(
            (BINARY_V2, "FetchResponse"), (COLUMNAR_JSON, "ColumnarPage"), (COLUMNAR_MSGPACK, None),
            (RECORD_BATCH, None), *((media, "FetchResponse") for media in SCHEMA_FORMATS.values()),
        ),
        access=needs(topic(READ)),
    ),
    Operation(
        "POST", "/consumers/{group}/offsets", records.commit_offsets, "commitOffsets",
        "Commit a group's next offsets to read (never backwards unless reset)", "client",
        query=(
            Param(
                "force", "boolean",
                "with reset: even while the group has live members (their next commit may undo it)",
            ),
        ),
        body="CommitOffsetsRequest", body_types=RECORD_TYPES, ok_status=204, errors=(404, 409, 415, 504, 507),
        write=True, access=needs(group(READ), in_handler="READ topic: each topic of the body"),
    ),
    Operation(
        "GET", "/consumers/{group}/offsets", records.committed_offsets, "getCommittedOffsets",
        "A group's committed offsets", "client",
        query=(
            Param("topic", "string", "topic name", required=True),
            Param("partition", "integer", "one partition (default: all)", minimum=0, maximum=2**31 - 1),
        ),
        ok_schema="CommittedOffsets", errors=(404,),
        access=needs(group(DESCRIBE), topic(DESCRIBE, "topic", query=True)),
    ),
    Operation(
        "GET", HEALTH_PATH, topics.cluster_health, "clusterHealth", "Cluster health overview",
        "admin", ok_schema="Health", local=True, access=needs(cluster(DESCRIBE)),
    ),
    Operation("GET", NODES_PATH, topics.list_nodes, "listNodes", "Known nodes", "admin", ok_schema="Nodes",
              local=True, access=needs(cluster(DESCRIBE))),
    Operation(
        "GET", "/v1/cluster/metrics", cluster_metrics.cluster_metrics, "clusterMetrics",
        "Every live node's /metrics text, asked at once with the caller's credentials", "admin",
        ok_schema="ClusterMetrics", local=True, access=needs(cluster(DESCRIBE)),
    ),
    Operation(
        "POST", ADMIN_TOPICS_PATH, topics.create_topic, "createTopic", "Create a topic", "admin",
        body="CreateTopicRequest", ok_status=201, ok_schema="CreatedTopic", errors=(409, 415, 507),
        write=True, access=needs(in_handler=topics.CREATE_TOPIC_NEEDS),
    ),
    Operation(
        "DELETE", "/v1/topics/{topic}", topics.delete_topic, "deleteTopic", "Delete a topic", "admin",
        ok_status=204, errors=(404, 507), write=True, access=needs(topic(DELETE)),
    ),
    Operation(
        "GET", "/v1/partitions/{topic}/{partition}", topics.partition_state, "getPartitionState",
        "Leader, term, high watermark and replica progress of a partition", "admin",
        ok_schema="PartitionState", errors=(404,), access=needs(topic(DESCRIBE)),
    ),
    Operation(
        "POST", "/v1/partitions/{topic}/{partition}/transfer_leadership", topics.transfer_leadership,
        "transferLeadership", "Move a partition's leadership (to target, or any caught-up replica)", "admin",
        query=(Param("target", "string", "node id of a replica to lead"),),
        ok_schema="TransferResult", errors=(404, 409), write=True, access=needs(cluster(ALTER)),
    ),
    *admin.ROUTES,
    *users.ROUTES,  # users and their SCRAM credentials
    *acls.ROUTES,  # who may do what (ACLs)
    *transactions.ROUTES,  # Kafka's transactional producers, as their coordinators hold them
    Operation(
        "GET", METRICS_PATH, metrics, "metrics", "Prometheus metrics", "operations",
        ok_type="text/plain", local=True,
    ),
    Operation("GET", LIVE_PATH, live, "live", "The process is up", "operations", ok_schema="Status",
              local=True),
    Operation(
        "GET", READY_PATH, ready, "ready",
        "The node knows a controller and caught up with its metadata (503 otherwise)", "operations",
        ok_schema="Status", errors=(503,), local=True,
    ),
    Operation(
        "GET", "/openapi.json", openapi, "openapi", "This document", "operations",
        ok_type="application/json", local=True,
    ),
    *consumers.ROUTES,  # consumer groups: instances, subscriptions, records, fenced commits, lag
    *share_groups.ROUTES,  # share groups (KIP-932): members acquire and acknowledge records
    *registry_routes.ROUTES,  # the schema registry, as Confluent's clients call it
    *internal.ROUTES,  # node-to-node: the server side of peer calls
)  # fmt: skip


# -- middlewares ---------------------------------------------------------------------------------------


def _error_response(request: web.Request, error: RaftlogError) -> web.Response:
    mapped = errors.lookup(error)
    headers: dict[str, str] = {}
    if isinstance(error, NotLeader | NoLeader):
        headers[LEADER_HEADER] = ""
    if mapped.status == 503:
        headers["Retry-After"] = str(errors.RETRY_AFTER_S)
    if isinstance(error, Unauthorized):
        settings = state.state(request).settings
        basic = auth.users_log_in(request.path, settings.require_auth, settings.enforce_acls) or (
            request.path == "/metrics" and settings.enforce_acls
        )
        headers["WWW-Authenticate"] = 'Basic realm="raftlog"' if basic else 'Bearer realm="raftlog"'
    if isinstance(error, TooManyLoginFailures):
        headers["Retry-After"] = str(math.ceil(error.retry_after_s))
    if isinstance(error, broker_errors.QuotaExceeded):
        headers["Retry-After"] = str(max(1, math.ceil(error.retry_after_ms / 1000)))
    if isinstance(error, MethodNotAllowed):
        headers["Allow"] = ", ".join(error.allowed)
    # a record a schema format's reader cannot decode is the client's data, not a bug: its 500 (Confluent's
    # answer) is logged as the retriable ones are, at most a line per 10 s, however often a reader asks
    if mapped.status >= 500 and not mapped.retriable and not isinstance(error, RecordNotDeserializable):
        log.error("%s %s failed: %s", request.method, request.path, error, exc_info=error)
    elif mapped.status >= 500:
        count = state.state(request).retriable_log.record(mapped.error_code, time.monotonic())
        if count is not None:
            log.info(
                "%s %s answered %d (error_code %d): %s (%d answers with this code since its last line)",
                request.method, request.path, mapped.status, mapped.error_code, error, count,
            )  # fmt: skip
    response = web.json_response(
        errors.body(error),
        status=mapped.status,
        headers=headers,
        content_type=negotiation.error_type(request.get(state.ANSWER_TYPE)),
    )
    if isinstance(error, RequestTimeout):
        response.force_close()  # what is left of the body would only be dribbled in too
    return response


def _bearer(request: web.Request) -> str | None:
    found = auth.authorization(request)  # None for one that is not ASCII: no credential of ours is
    if found is None or found[0] != "bearer":
        return None
    return found[1]


def _check_token(request: web.Request, token: str) -> None:
    """The admin token, its failures counted and refused past their bound as a user's password's are."""
    logins, host, now_s = state.state(request).logins, client_host(request.remote), time.monotonic()
    logins.check(host, None, now_s)
    given = _bearer(request)
    if given is None or not hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8")):
        logins.failed(host, None, now_s, "wrong or missing admin token")
        raise Unauthorized("admin API: missing or wrong 'Authorization: Bearer <token>'")


async def _check_metrics(request: web.Request, app_state: state.AppState) -> None:
    """``/metrics`` names every topic, group and offset: with ``--require-auth`` it needs the metrics
    token or the admin token as a bearer token (a scraper's ``authorization`` credentials), or, with
    ``--enforce-acls``, a user who may DESCRIBE the cluster (as Kafka's DescribeCluster asks), unless the
    node was told its network is closed (``--public-metrics``)."""
    settings = app_state.settings
    logins, host, now_s = app_state.logins, client_host(request.remote), time.monotonic()
    logins.check(host, None, now_s)
    given = _bearer(request)
    tokens = [token for token in (settings.metrics_token, settings.admin_token) if token is not None]
    if given is not None and any(
        hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8")) for token in tokens
    ):
        return
    if settings.enforce_acls:  # a user, its failed logins counted by authenticate
        request[state.CALLER] = await _authenticate(request, app_state)
        access.authorize(request, access.CLUSTER, access.DESCRIBE, CLUSTER_NAME)
        return
    logins.failed(host, None, now_s, "wrong or missing metrics token")
    raise Unauthorized("/metrics: missing or wrong 'Authorization: Bearer <metrics token or admin token>'")


async def _authenticate(request: web.Request, app_state: state.AppState) -> state.Caller:
    token, node = app_state.settings.admin_token, app_state.node
    clock_ms, logins = app_state.clock_ms(), app_state.logins
    verifier, token_secrets = app_state.verifier, app_state.token_secrets
    return await auth.authenticate(request, node, token, verifier, clock_ms, logins, token_secrets)


def _check_peer(request: web.Request, node: FrontDoor) -> None:
    """Node-to-node endpoints answer only a peer: the cluster credential (derived from the cluster
    secret) as a bearer token; anyone else gets 401 and learns nothing."""
    given = _bearer(request)
    if given is None or not node.peer_credential_ok(given):
        raise Unauthorized("internal endpoint: missing or wrong cluster credential")
    try:
        announced = parse_levels(request.headers.get(LEVELS_HEADER))
    except broker_errors.PeerProtocolError as exc:
        raise BadRequest(str(exc)) from None
    node.check_peer_levels(f"calling from {request.remote}", announced)


def _from_http_exception(request: web.Request, exc: web.HTTPException) -> RaftlogError:
    if isinstance(exc, web.HTTPNotFound):
        return RouteNotFound(f"no endpoint at {request.method} {request.path}")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return MethodNotAllowed(request.method, request.path, list(exc.allowed_methods))
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return RequestTooLarge(state.state(request).settings.request_bytes_max)
    return BadRequest(f"{exc.status} {exc.reason}: {exc.text}")


def _client_gone(request: web.Request, app_state: state.AppState) -> web.Response:
    """A client that closed or reset its connection while its request's body was on the way (aiohttp's
    ``ConnectionResetError``): nothing was done; one line at most every 10 s says how many there were,
    never a traceback each (a client resetting in a loop wrote 100 KiB of log a second)."""
    count = app_state.retriable_log.record("connection-reset", time.monotonic())
    if count is not None:
        log.info(
            "%s %s: the client closed its connection before its body was whole; nothing done "
            "(%d such since the last line)", request.method, request.path, count,
        )  # fmt: skip
    return _error_response(request, BadRequest("the connection closed before the request's body was whole"))


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    app_state = state.state(request)
    settings = app_state.settings
    try:
        if auth.users_log_in(request.path, settings.require_auth, settings.enforce_acls):
            request[state.CALLER] = await _authenticate(request, app_state)  # for the route's ACLs
            request[state.AUTHENTICATED] = True
        elif settings.admin_token is not None and auth.is_admin(request.path):
            _check_token(request, settings.admin_token)
            request[state.ADMIN_TOKEN] = True  # its body's bytes are the admin's (api.state.body)
            request[state.AUTHENTICATED] = True
        if request.path == "/metrics" and settings.require_auth and not settings.public_metrics:
            await _check_metrics(request, app_state)
            request[state.AUTHENTICATED] = True
        if request.path.startswith(INTERNAL_PREFIX):
            _check_peer(request, app_state.node)
            request[state.AUTHENTICATED] = True
        return await handler(request)
    except web.HTTPException as exc:
        return _error_response(request, _from_http_exception(request, exc))
    except RaftlogError as exc:
        return _error_response(request, exc)
    except ConnectionResetError:  # the client went before its body was whole: ordinary, logged quietly
        return _client_gone(request, app_state)
    except Exception as exc:  # a bug: answer 500 and log it with its traceback
        log.exception("%s %s: unexpected error", request.method, request.path)
        return web.json_response(
            {"error_code": errors.INTERNAL.error_code, "message": f"internal error: {type(exc).__name__}"},
            status=500,
        )


@web.middleware
async def _observe(request: web.Request, handler: Handler) -> web.StreamResponse:
    app_state = state.state(request)
    started = time.perf_counter()
    guard = request.app[GUARD]
    guard.request_started(request.transport)  # the head is in: the listener's head timer stops
    try:
        response = await handler(request)
    finally:
        give_back(request)  # its body's bytes, to the listener's budget
        guard.request_finished(request.transport)
    leader = state.leader_header(request)  # a streamed answer (api.answers) set its own before writing
    if leader is None:
        if not response.prepared:
            response.headers.popall(LEADER_HEADER, None)
    elif LEADER_HEADER not in response.headers and response.status != 401:
        response.headers[LEADER_HEADER] = leader
    if request.path.startswith(INTERNAL_PREFIX) and response.status != 401:  # what its code supports, always
        response.headers[LEVELS_HEADER] = encode_levels(app_state.node.supported_levels())
    route = request.match_info.route.resource
    name = route.canonical if route is not None else "unmatched"
    app_state.metrics.observe(request.method, name, response.status, time.perf_counter() - started)
    await end_if_cut(request, response)
    return response


async def _server_header(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = SERVER_HEADER


# every name a path carries is checked whole before the route runs (``partitions.names``)
_PATH_NAMES: dict[str, Callable[[object, str], str]] = {
    "topic": check_topic_name,
    "group": check_group_name,
    "instance": check_instance_name,
    "member": check_instance_name,
}


async def _stop_json_work(app: web.Application) -> None:
    app[state.STATE].json_work.close()


def _bind(operation: Operation) -> Handler:
    kind = "write" if operation.write else "long-poll" if operation.long_poll else None
    offers, answer_type = operation.offers, operation.answer_type

    async def serve(request: web.Request) -> web.StreamResponse:
        if kind is None:
            return await operation.handler(request)
        admission = state.state(request).admission
        admission.enter(kind)
        try:
            return await operation.handler(request)
        finally:
            admission.leave(kind)

    async def handle(request: web.Request) -> web.StreamResponse:
        """A request a page of another site could send to a state-changing route refused (415, 403:
        ``api.cross_site``), content negotiation (406 when the ``Accept`` header takes none of the route's
        types), then the names in the path (400 naming the parameter), then the route's ACLs (403), before
        anything else; a JSON answer is labelled with the type chosen."""
        cross_site.check(request)
        accept = request.headers.get("Accept")
        chosen = negotiation.choose(accept, offers)
        if chosen is None:
            refuse_legacy_accept(accept)
            raise NotAcceptable(accept or "", f"this endpoint answers {', '.join(offers)}")
        chosen = negotiation.label(chosen, answer_type)
        request[state.ANSWER_TYPE] = chosen
        for param, value in request.match_info.items():
            check_name = _PATH_NAMES.get(param)
            if check_name is not None:
                check_name(value, f"path parameter {param}")
        if operation.access is not None:
            access.check(request, operation.access)  # the route's ACLs (api/access.py)
        response = await client_quotas.served(request, operation.quota, not operation.long_poll, serve)
        if response.content_type == PLAIN_JSON and negotiation.is_json(chosen) and chosen != PLAIN_JSON:
            response.content_type = chosen  # the same JSON, labelled as the client asked
        return response

    return handle


def _request_bytes(http_limits: HttpLimits, super_users: frozenset[str]) -> RequestBytes:
    """The HTTP listener's budget of request bytes: super users and the admin token (``User:admin``)
    take their reserve (``partitions.security.holds``)."""
    return RequestBytes(
        http_limits.request_bytes_max,
        http_limits.request_bytes_per_user_max,
        http_limits.request_bytes_super_user_reserve,
        kind_of=holder_kinds(frozenset(super_users) | {"admin"}, login_required=False),
    )


def _connection_throttle(node: FrontDoor) -> Callable[[str, int], int]:
    def throttle_ms(address: str, now_ms: int) -> int:
        return node.metadata.client_quotas().connection(address, now_ms)

    return throttle_ms


def build_app(
    node: FrontDoor,
    *,
    admin_token: str | None = None,
    require_auth: bool = False,
    enforce_acls: bool = False,
    super_users: frozenset[str] = frozenset(),
    produce_timeout_ms: int = PRODUCE_TIMEOUT_MS_DEFAULT,
    admin_timeout_ms: int = 10_000,
    request_bytes_max: int = REQUEST_BYTES_MAX,
    writes_in_flight_max: int = state.WRITES_IN_FLIGHT_MAX,
    long_polls_in_flight_max: int = state.LONG_POLLS_IN_FLIGHT_MAX,
    http_limits: HttpLimits = HTTP_LIMITS_DEFAULT,
    login_failures: LoginFailures | None = None,
    metrics_token: str | None = None,
    public_metrics: bool = False,
    token_lifetime_ms: int = TOKEN_LIFETIME_MS_DEFAULT,
    token_secrets: TokenSecrets | None = None,
) -> web.Application:
    """The HTTP API of one node. ``require_auth``: a user on every client route; ``enforce_acls`` (which
    needs it): the routes' ACLs, which ``super_users`` (user names) and the admin token pass, and users on
    ``/v1`` too (otherwise the admin token's alone).
    ``login_failures``: the node's count of failed logins (shared with its Kafka listener's SASL).
    ``metrics_token``: with ``require_auth``, ``/metrics`` takes it (or the admin token) as a bearer token,
    and with ``enforce_acls`` a user who may DESCRIBE the cluster; ``public_metrics``: it takes none.
    ``token_lifetime_ms``: when a user's API token made without an expiry expires.
    ``token_secrets``: Kafka's delegation tokens' HMACs (from the cluster secret), which HTTP Basic takes
    with a token's id in the user's place (a random key when None: no token is taken)."""
    if admin_token is not None and not admin_token:
        raise ValueError("admin_token must be None (no auth) or a non-empty string")
    if produce_timeout_ms <= 0 or admin_timeout_ms <= 0 or request_bytes_max <= 0:
        raise ValueError("timeouts and request_bytes_max must be positive")
    if require_auth and admin_token is None:
        raise ValueError("require_auth needs an admin_token: users are managed through /v1/users")
    if enforce_acls and not require_auth:
        raise ValueError("enforce_acls needs require_auth: ACLs name authenticated users")
    settings = state.Settings(
        admin_token,
        produce_timeout_ms,
        admin_timeout_ms,
        request_bytes_max,
        require_auth,
        enforce_acls,
        frozenset(super_users),
        http_limits.body_timeout_s,
        metrics_token,
        public_metrics,
        token_lifetime_ms,
    )
    app = web.Application(middlewares=[_observe, _errors], client_max_size=request_bytes_max)
    app[state.STATE] = state.AppState(
        node,
        settings,
        state.Admission(writes_in_flight_max, long_polls_in_flight_max),
        LoginFailures() if login_failures is None else login_failures,
        _request_bytes(http_limits, super_users),
    )
    if token_secrets is not None:
        app[state.STATE].token_secrets = token_secrets
    app[records.ROUND_ROBIN] = RoundRobin()
    app[typed_records.SCHEMAS] = typed_records.schema_cache(node)  # parsed schemas by id, kept by the node
    # the listener's (api.http_limits.listen) when served by one; a new connection past its address's
    # connection creation rate (KIP-612) is refused by the one rule of both doors' listeners
    app[GUARD] = Guard(http_limits, _connection_throttle(node))
    app.on_response_prepare.append(_server_header)
    app.on_cleanup.append(_stop_json_work)
    for operation in ROUTES:
        app.router.add_route(operation.method, operation.path, _bind(operation))
    console.add_routes(app)  # the web console's page and files: a client of the routes above
    return app
