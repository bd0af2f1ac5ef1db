"""The node's HTTP API: client endpoints (Confluent REST v2 style) and admin endpoints (Redpanda style).

``build_app(broker)`` returns an ``aiohttp`` application over any ``partitions.broker.Broker``. Handlers
only parse (``api.schemas``), decide (``api.routing``) and call the broker; two middlewares do the rest:

- ``_observe`` (outermost) times every request for ``/metrics`` and stamps ``X-Raftlog-Leader``;
- ``_errors`` checks the admin token, turns every typed error into its HTTP answer through the one table
  in ``api.errors``, forwards a request the broker refused with ``NotLeader`` to the leader, and turns
  anything else into a logged 500 (error_code 50000).

``X-Raftlog-Leader`` names the node that served the request: the partition's leader for partition-scoped
requests (all of them, comma-separated, for a produce that spanned partitions led by several nodes), this
node for metadata and cluster requests, and is empty when the request failed because no leader is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from aiohttp import web

from api import admin, consumers, errors
from api.bodies import read_body
from api.columnar import columnar_encoding, encode_columnar
from api.errors import (
    BadRequest,
    MethodNotAllowed,
    NotReady,
    Overloaded,
    RequestTooLarge,
    RouteNotFound,
    Unauthorized,
)
from api.forwarding import Forwarded, Forwarder
from api.metrics import HttpMetrics
from api.openapi import RECORD_TYPES, Handler, Operation, Param, document
from api.routing import (
    HOPS_HEADER,
    INTERNAL_PREFIX,
    RoundRobin,
    assign_partitions,
    forward_target,
    group_by_partition,
    keyless_partition,
    parse_hops,
)
from api.schemas import (
    INT64_MAX,
    OffsetCommit,
    ParsedRecord,
    batch_produced_answer,
    check_group,
    dump_json,
    is_record_batch,
    parse_commit_offsets,
    parse_create_topic,
    parse_json,
    parse_produce,
    path_partition,
    produce_answer,
    produce_entry,
    produce_error_entry,
    query_int,
    query_str,
    render_record,
    request_flavour,
    require_json_body,
    response_flavour,
    wants_record_batches,
)
from partitions.broker import Broker, PartitionState
from partitions.controller import CONTROLLER_GROUP, TopicMetadata
from partitions.errors import InvalidTopic, UnknownPartition, UnknownTopic
from partitions.groups.coordinator import is_internal
from raftlog.consensus.errors import ConsensusError, NoLeader, NotLeader
from raftlog.errors import InvariantViolation, RaftlogError, check
from raftlog.storage.batch import ProducerRecord
from raftlog_client.contract import (
    COLUMNAR_JSON,
    COLUMNAR_MSGPACK,
    HIGH_WATERMARK_HEADER,
    LEADER_HEADER,
    RECORD_BATCH_V1,
)

log = logging.getLogger(__name__)

FETCH_TIMEOUT_MS_MAX = 60_000
FETCH_MAX_BYTES_DEFAULT = 1024 * 1024
FETCH_MAX_BYTES_MAX = 64 * 1024 * 1024
REQUEST_BYTES_MAX = 16 * 1024 * 1024
REPLICATION_FACTOR_DEFAULT_MAX = 3
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settings:
    admin_token: str | None
    forward_timeout_s: float
    produce_timeout_ms: int
    admin_timeout_ms: int
    request_bytes_max: int


WRITES_IN_FLIGHT_MAX = 2048  # produce and offset-commit requests being served by one node at once
LONG_POLLS_IN_FLIGHT_MAX = 4096  # fetches that may wait for records at once


class AppState:
    def __init__(self, broker: Broker, settings: Settings) -> None:
        self.broker = broker
        self.settings = settings
        self.admission = Admission(WRITES_IN_FLIGHT_MAX, LONG_POLLS_IN_FLIGHT_MAX)
        self.forwarder = Forwarder()
        self.metrics = HttpMetrics()
        self.round_robin = RoundRobin()
        self.retriable_log = RetriableLog(RETRIABLE_LOG_INTERVAL_S)


RETRIABLE_LOG_INTERVAL_S = 10.0


class RetriableLog:
    """Says which typed error retriable 5xx answers (503 not done, 504 outcome unknown) carried, so the
    node's log explains what a client saw, without one line per answer during an election: at most one
    line per error code per interval, with how many answers it stands for."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._seen: dict[int, tuple[float, int]] = {}  # error_code -> (last line at, answers since)

    def record(self, error_code: int, now: float) -> int | None:
        """The number of answers to report now (this one included), or None to stay quiet."""
        last, since = self._seen.get(error_code, (-self._interval_s, 0))
        if now - last < self._interval_s:
            self._seen[error_code] = (last, since + 1)
            return None
        self._seen[error_code] = (now, 0)
        return since + 1


STATE = web.AppKey("raftlog_state", AppState)
_LEADER = web.RequestKey("raftlog_leader", str)  # who served the request (X-Raftlog-Leader)


def _state(request: web.Request) -> AppState:
    return request.app[STATE]


# -- request helpers -----------------------------------------------------------------------------------


async def _body(request: web.Request) -> bytes:
    return await read_body(request, _state(request).settings.request_bytes_max)


async def _json(request: web.Request) -> Any:
    return parse_json(await _body(request))


def _partition(request: web.Request) -> int:
    return path_partition(request.match_info["partition"])


def _topic_partition(broker: Broker, topic: str, partition: int) -> TopicMetadata:
    meta = broker.topic(topic)
    if not 0 <= partition < meta.partitions:
        raise UnknownPartition(topic, partition)
    return meta


def _served_here(state: AppState, meta: TopicMetadata, partition: int) -> None:
    """Raise ``NotLeader`` (so the request is forwarded) for a partition this node holds no replica of."""
    replicas = meta.replicas[partition]
    node_id = state.broker.node_id
    if node_id in replicas:
        return
    hint = state.broker.leader_hint(meta.name, partition)
    if hint is None or hint == node_id:
        hint = replicas[0]  # a replica knows its leader better than this node does
    raise NotLeader(meta.group_id(partition), hint)


async def _forward(
    request: web.Request,
    error: NotLeader,
    method: str,
    path_qs: str,
    body: bytes,
    *,
    write: bool,
    long_poll: bool = False,
) -> Forwarded:
    state = _state(request)
    broker = state.broker
    address = broker.http_address(error.leader_hint) if error.leader_hint else None
    hops = parse_hops(request.headers.get(HOPS_HEADER))
    target = forward_target(broker.node_id, error.leader_hint, address, hops, error.group_id)
    if isinstance(target, RaftlogError):
        raise target
    timeout_s = state.settings.forward_timeout_s
    if long_poll:
        timeout_ms = query_int(request.query, "timeout", 0, 0, FETCH_TIMEOUT_MS_MAX) or 0
        timeout_s += timeout_ms / 1000
    state.metrics.forwarded += 1
    return await state.forwarder.send(target, method, path_qs, request.headers, body, timeout_s, write=write)


async def _local_or_forwarded(
    request: web.Request,
    meta: TopicMetadata,
    partition: int,
    local: Callable[[], Awaitable[T]],
    method: str,
    path_qs: str,
    body: bytes,
    *,
    write: bool,
) -> T | Forwarded:
    """Serve one partition's part of a request here, or send that part to the partition's leader."""
    try:
        _served_here(_state(request), meta, partition)
        return await local()
    except NotLeader as exc:
        return await _forward(request, exc, method, path_qs, body, write=write)


@dataclass(frozen=True, slots=True)
class _Failure:
    """One part of a multi-partition request that failed: the HTTP answer it would have had alone."""

    status: int
    payload: dict[str, Any]
    headers: dict[str, str]

    @classmethod
    def of(cls, error: RaftlogError) -> _Failure:
        headers = {LEADER_HEADER: ""} if isinstance(error, NotLeader | NoLeader) else {}
        return cls(errors.lookup(error).status, errors.body(error), headers)

    @classmethod
    def forwarded(cls, answer: Forwarded) -> _Failure:
        kept = {k: v for k, v in answer.headers.items() if k in ("Retry-After", LEADER_HEADER)}
        return cls(answer.status, answer.error_payload(), kept)

    def response(self, leader: str) -> web.Response:
        headers = {LEADER_HEADER: leader, **self.headers}
        if self.status == 503:
            headers.setdefault("Retry-After", str(errors.RETRY_AFTER_S))
        return web.json_response(self.payload, status=self.status, headers=headers)


def _forwarded_json(answer: Forwarded) -> Any:
    try:
        return parse_json(answer.body)
    except BadRequest:
        raise InvariantViolation(
            f"leader answered {answer.status} with a body that is not JSON: {answer.body[:80]!r}"
        ) from None


# -- client API ----------------------------------------------------------------------------------------


Failures = dict[tuple[str, int], dict[str, str]]  # (topic, partition) -> node -> why it cannot open or replay
VIEW_FORWARDS_MAX = 16  # partitions of one topic asked of their leaders at once


def _failures(broker: Broker) -> Failures:
    table: Failures = {}
    for failure in broker.failed_replicas():
        table.setdefault((failure.topic, failure.partition), {})[failure.node] = failure.error
    return table


def _replica_views(
    meta: TopicMetadata,
    partition: int,
    leader: str | None,
    detail: PartitionState | None,
    failed: dict[str, str],
) -> list[dict[str, Any]]:
    """The replicas of one partition: ``in_sync`` from the leader's view (``detail``), unknown (None)
    without it; a replica that cannot open or replay is never in sync and carries its error."""
    states = {} if detail is None else {r.node: r for r in detail.replicas}
    views = []
    for node in meta.replicas[partition]:
        state = states.get(node)
        error = state.error if state is not None and state.error is not None else failed.get(node)
        in_sync = False if error is not None else (None if state is None else state.in_sync)
        views.append({"node": node, "leader": node == leader, "in_sync": in_sync, "error": error})
    return views


def _view_here(broker: Broker, meta: TopicMetadata, partition: int, failures: Failures) -> dict[str, Any]:
    """One partition as this node can tell it: led here, the leader's view; no leader known, the leader is
    null and ``in_sync`` unknown. NotLeader when another node is known to lead it (ask that node)."""
    group_id = meta.group_id(partition)
    leader = broker.known_leader(meta.name, partition)  # never a routing guess
    detail = None
    if leader is not None:
        if leader != broker.node_id:
            raise NotLeader(group_id, leader)
        try:
            detail = broker.partition_state(meta.name, partition)
        except NoLeader:
            leader = None  # lost it this moment, no successor known
        else:
            leader = detail.leader
            if leader is not None and leader != broker.node_id:
                raise NotLeader(group_id, leader)
    failed = failures.get((meta.name, partition), {})
    return {
        "partition": partition,
        "leader": leader,
        "replicas": _replica_views(meta, partition, leader, detail, failed),
    }


async def _view(
    request: web.Request, meta: TopicMetadata, partition: int, failures: Failures
) -> dict[str, Any]:
    """One partition as its leader tells it (asked over HTTP when it is another node: only the leader knows
    whether its followers are in sync). A leader that cannot be asked is still named; ``in_sync`` is then
    unknown."""
    try:
        return _view_here(_state(request).broker, meta, partition, failures)
    except NotLeader as exc:
        refusal = exc
    path = f"/topics/{urllib.parse.quote(meta.name, safe='')}/partitions/{partition}"
    try:
        answer = await _forward(request, refusal, "GET", path, b"", write=False)
    except RaftlogError as exc:
        reason = str(exc)
    else:
        if answer.status == 200:
            view = _forwarded_json(answer)
            check(
                isinstance(view, dict) and view.get("partition") == partition and "replicas" in view,
                f"leader {refusal.leader_hint} answered {str(view)[:200]} for {meta.name}/{partition}",
            )
            return dict(view)
        reason = f"answered {answer.status}: {answer.error_payload()['message']}"
    log.info(
        "%s/%d: leader %s not asked for its view (%s)", meta.name, partition, refusal.leader_hint, reason
    )
    leader = refusal.leader_hint
    failed = failures.get((meta.name, partition), {})
    return {
        "partition": partition,
        "leader": leader,
        "replicas": _replica_views(meta, partition, leader, None, failed),
    }


async def _partition_views(request: web.Request, meta: TopicMetadata) -> list[dict[str, Any]]:
    failures = _failures(_state(request).broker)
    semaphore = asyncio.Semaphore(VIEW_FORWARDS_MAX)

    async def one(partition: int) -> dict[str, Any]:
        async with semaphore:
            return await _view(request, meta, partition, failures)

    return list(await asyncio.gather(*(one(p) for p in range(meta.partitions))))


async def list_topics(request: web.Request) -> web.Response:
    return web.json_response(sorted(t for t in _state(request).broker.topics() if not is_internal(t)))


async def get_topic(request: web.Request) -> web.Response:
    state = _state(request)
    meta = state.broker.topic(request.match_info["topic"])
    return web.json_response(
        {
            "name": meta.name,
            "partitions": await _partition_views(request, meta),
            "replication_factor": len(meta.replicas[0]) if meta.replicas else 0,
            "configs": meta.configs,
        }
    )


async def get_partitions(request: web.Request) -> web.Response:
    state = _state(request)
    meta = state.broker.topic(request.match_info["topic"])
    return web.json_response(await _partition_views(request, meta))


async def get_partition(request: web.Request) -> web.Response:
    state = _state(request)
    partition = _partition(request)
    meta = _topic_partition(state.broker, request.match_info["topic"], partition)
    return web.json_response(await _view(request, meta, partition, _failures(state.broker)))


async def get_offsets(request: web.Request) -> web.Response:
    state = _state(request)
    partition = _partition(request)
    meta = _topic_partition(state.broker, request.match_info["topic"], partition)
    _served_here(state, meta, partition)
    offsets = state.broker.offsets(meta.name, partition)
    request[_LEADER] = state.broker.node_id
    return web.json_response(
        {"beginning_offset": offsets.log_start_offset, "end_offset": offsets.high_watermark}
    )


def _producer_records(records: Sequence[ParsedRecord], indexes: Sequence[int]) -> list[ProducerRecord]:
    return [ProducerRecord(records[i].value, records[i].key, records[i].headers) for i in indexes]


def _refuse_internal(topic: str) -> None:
    """Records are never produced into the consumer groups' own topic (its state is group commands)."""
    if is_internal(topic):
        raise InvalidTopic(f"topic {topic!r} is internal (consumer groups): records cannot be produced to it")


async def produce_to_partition(request: web.Request) -> web.Response:
    state = _state(request)
    _refuse_internal(request.match_info["topic"])
    if is_record_batch(request.content_type):
        return await _produce_record_batch(request)
    flavour = request_flavour(request.content_type)
    partition = _partition(request)
    meta = _topic_partition(state.broker, request.match_info["topic"], partition)
    _served_here(state, meta, partition)  # before parsing: a request for another leader goes on as is
    parsed = parse_produce(await _json(request), flavour, partition)
    result = await state.broker.produce(
        meta.name,
        partition,
        _producer_records(parsed.records, range(len(parsed.records))),
        parsed.producer_id,
        parsed.sequence,
        state.settings.produce_timeout_ms,
    )
    _check_produced(result.base_offset, result.end_offset, len(parsed.records))
    request[_LEADER] = state.broker.node_id
    answer = produce_answer(partition, result.base_offset, len(parsed.records))
    return web.Response(body=answer, content_type="application/json")


async def _produce_record_batch(request: web.Request) -> web.Response:
    """The body is one record batch the producer encoded: no JSON, no base64 and nothing built per record
    here; the broker checks it and replicates it as it came."""
    state = _state(request)
    partition = _partition(request)
    meta = _topic_partition(state.broker, request.match_info["topic"], partition)
    _served_here(state, meta, partition)
    batch = await _body(request)
    result = await state.broker.produce_batch(meta.name, partition, batch, state.settings.produce_timeout_ms)
    count = result.end_offset - result.base_offset
    if count <= 0 or result.base_offset < 0:
        raise InvariantViolation(f"broker produced offsets [{result.base_offset}, {result.end_offset})")
    request[_LEADER] = state.broker.node_id
    answer = batch_produced_answer(partition, result.base_offset, count)
    return web.Response(body=answer, content_type="application/json")


def _check_produced(base_offset: int, end_offset: int, count: int) -> None:
    if end_offset - base_offset != count or base_offset < 0:
        raise InvariantViolation(f"broker produced offsets [{base_offset}, {end_offset}) for {count} records")


async def produce_to_topic(request: web.Request) -> web.Response:
    """Records are split by partition and each partition's part is one batch, produced concurrently
    (forwarded to its leader when that is another node). One answer per record, in request order; if every
    record failed, the answer is the first failure's HTTP error so that a client retries as a whole."""
    state = _state(request)
    broker = state.broker
    _refuse_internal(request.match_info["topic"])
    flavour = request_flavour(request.content_type)
    body = await _json(request)
    meta = broker.topic(request.match_info["topic"])
    parsed = parse_produce(body, flavour)
    for record in parsed.records:
        if record.partition is not None and record.partition >= meta.partitions:
            raise UnknownPartition(meta.name, record.partition)
    keyless = keyless_partition(meta.partitions, parsed.producer_id, parsed.sequence, state.round_robin)
    groups = group_by_partition(assign_partitions(parsed.records, meta.partitions, keyless))
    quoted = urllib.parse.quote(meta.name, safe="")

    async def one(partition: int, indexes: list[int]) -> tuple[list[dict[str, Any]], str] | _Failure:
        async def local() -> tuple[list[dict[str, Any]], str]:
            result = await broker.produce(
                meta.name,
                partition,
                _producer_records(parsed.records, indexes),
                parsed.producer_id,
                parsed.sequence,
                state.settings.produce_timeout_ms,
            )
            _check_produced(result.base_offset, result.end_offset, len(indexes))
            rows = [produce_entry(partition, result.base_offset + i) for i in range(len(indexes))]
            return rows, broker.node_id

        sub: dict[str, Any] = {"records": [parsed.raw_records[i] for i in indexes]}
        if parsed.producer_id is not None:
            sub.update(producer_id=parsed.producer_id, sequence=parsed.sequence)
        try:
            done = await _local_or_forwarded(
                request,
                meta,
                partition,
                local,
                "POST",
                f"/topics/{quoted}/partitions/{partition}",
                dump_json(sub),
                write=True,
            )
        except RaftlogError as exc:
            return _Failure.of(exc)
        if not isinstance(done, Forwarded):
            return done
        if done.status != 200:
            return _Failure.forwarded(done)
        answer = _forwarded_json(done)
        entries = answer.get("offsets") if isinstance(answer, dict) else None
        if not isinstance(entries, list) or len(entries) != len(indexes):
            raise InvariantViolation(f"leader answered {len(indexes)} records with {str(answer)[:200]}")
        return entries, done.headers.get(LEADER_HEADER, "")

    outcomes = await asyncio.gather(*(one(p, indexes) for p, indexes in groups.items()))
    failures = [o for o in outcomes if isinstance(o, _Failure)]
    if len(failures) == len(outcomes):
        return failures[0].response(failures[0].headers.get(LEADER_HEADER, broker.node_id))
    entries: list[dict[str, Any] | None] = [None] * len(parsed.records)
    leaders: set[str] = set()
    for (partition, indexes), outcome in zip(groups.items(), outcomes, strict=True):
        if isinstance(outcome, _Failure):
            code, message = outcome.payload["error_code"], str(outcome.payload.get("message", ""))
            for i in indexes:
                entries[i] = produce_error_entry(partition, code, message)
        else:
            rows, leader = outcome
            leaders.add(leader)
            for i, row in zip(indexes, rows, strict=True):
                entries[i] = row
    check(all(e is not None for e in entries), "a produced record has no answer")
    request[_LEADER] = ",".join(sorted(leaders))
    return web.json_response({"offsets": entries})


async def fetch(request: web.Request) -> web.Response:
    state = _state(request)
    partition = _partition(request)
    offset = query_int(request.query, "offset", None, 0, INT64_MAX)
    if offset is None:
        raise BadRequest("query parameter offset: missing")
    timeout_ms = query_int(request.query, "timeout", 0, 0, FETCH_TIMEOUT_MS_MAX) or 0
    max_bytes = query_int(request.query, "max_bytes", FETCH_MAX_BYTES_DEFAULT, 1, FETCH_MAX_BYTES_MAX)
    check(max_bytes is not None, "max_bytes has a default")
    accept = request.headers.get("Accept")
    flavour = response_flavour(accept)
    encoding = columnar_encoding(accept)
    meta = _topic_partition(state.broker, request.match_info["topic"], partition)
    _served_here(state, meta, partition)
    if wants_record_batches(accept):
        data = await state.broker.fetch_batches(meta.name, partition, offset, max_bytes or 1, timeout_ms)
        request[_LEADER] = state.broker.node_id
        headers = _high_watermark_header(state.broker, meta.name, partition)
        headers["Content-Type"] = RECORD_BATCH_V1
        return web.Response(body=data, headers=headers)
    records = await state.broker.fetch(meta.name, partition, offset, max_bytes or 1, timeout_ms)
    request[_LEADER] = state.broker.node_id
    headers = _high_watermark_header(state.broker, meta.name, partition)
    if encoding is not None:
        headers["Content-Type"] = encoding.value
        return web.Response(body=encode_columnar(meta.name, partition, records, encoding), headers=headers)
    return web.json_response(
        [render_record(meta.name, partition, r, flavour) for r in records], headers=headers
    )


def _high_watermark_header(broker: Broker, topic: str, partition: int) -> dict[str, str]:
    with contextlib.suppress(ConsensusError):  # leadership moved during a long poll: no lag hint then
        return {HIGH_WATERMARK_HEADER: str(broker.offsets(topic, partition).high_watermark)}
    return {}


async def replica_batches(request: web.Request) -> web.Response:
    """Committed raw batches of this node's replica, for a peer replica catching up (never forwarded:
    the caller asks the replicas it knows one by one)."""
    state = _state(request)
    partition = _partition(request)
    offset = query_int(request.query, "offset", None, 0, INT64_MAX)
    if offset is None:
        raise BadRequest("query parameter offset: missing")
    max_bytes = query_int(request.query, "max_bytes", FETCH_MAX_BYTES_DEFAULT, 1, FETCH_MAX_BYTES_MAX)
    check(max_bytes is not None, "max_bytes has a default")
    meta = _topic_partition(state.broker, request.match_info["topic"], partition)
    data = state.broker.read_batches(meta.name, partition, offset, max_bytes or 1)
    return web.Response(body=data, content_type="application/octet-stream")


async def leadership(request: web.Request) -> web.Response:
    """This node's leadership claims, for peers whose gossip said the table changed but could not carry
    it (too large for a datagram)."""
    broker = _state(request).broker
    version, claims = broker.leadership()
    return web.json_response({"node": broker.node_id, "version": version, "claims": claims})


async def commit_offsets(request: web.Request) -> web.Response:
    """Each (topic, partition) is committed on its leader; entries for the same partition in order."""
    state = _state(request)
    broker = state.broker
    require_json_body(request.content_type)
    group = check_group(request.match_info["group"])
    entries = parse_commit_offsets(await _json(request))
    metas = {}
    for entry in entries:
        metas[entry.topic] = _topic_partition(broker, entry.topic, entry.partition)
    by_partition: dict[tuple[str, int], list[OffsetCommit]] = {}
    for entry in entries:
        by_partition.setdefault((entry.topic, entry.partition), []).append(entry)
    path = f"/consumers/{urllib.parse.quote(group, safe='')}/offsets"

    async def one(commits: list[OffsetCommit]) -> _Failure | None:
        for commit in commits:
            meta = metas[commit.topic]

            async def local(commit: OffsetCommit = commit) -> int:
                return await broker.commit_offset(
                    group,
                    commit.topic,
                    commit.partition,
                    commit.offset,
                    commit.reset,
                    state.settings.produce_timeout_ms,
                )

            sub = {"offsets": [asdict(commit)]}
            try:
                done = await _local_or_forwarded(
                    request, meta, commit.partition, local, "POST", path, dump_json(sub), write=True
                )
            except RaftlogError as exc:
                return _Failure.of(exc)
            if isinstance(done, Forwarded) and done.status != 204:
                return _Failure.forwarded(done)
        return None

    outcomes = await asyncio.gather(*(one(commits) for commits in by_partition.values()))
    for outcome in outcomes:
        if outcome is not None:
            return outcome.response(outcome.headers.get(LEADER_HEADER, broker.node_id))
    return web.Response(status=204)


async def committed_offsets(request: web.Request) -> web.Response:
    state = _state(request)
    broker = state.broker
    group = check_group(request.match_info["group"])
    topic = query_str(request.query, "topic")
    if topic is None:
        raise BadRequest("query parameter topic: missing")
    partition = query_int(request.query, "partition", None, 0, 2**31 - 1)
    meta = broker.topic(topic) if partition is None else _topic_partition(broker, topic, partition)
    wanted = range(meta.partitions) if partition is None else [partition]
    path = f"/consumers/{urllib.parse.quote(group, safe='')}/offsets"

    async def one(p: int) -> int | _Failure | None:
        async def local() -> int | None:
            return broker.committed_offset(group, meta.name, p)

        query = urllib.parse.urlencode({"topic": meta.name, "partition": p})
        try:
            done = await _local_or_forwarded(
                request, meta, p, local, "GET", f"{path}?{query}", b"", write=False
            )
        except RaftlogError as exc:
            return _Failure.of(exc)
        if not isinstance(done, Forwarded):
            return done
        if done.status != 200:
            return _Failure.forwarded(done)
        answer = _forwarded_json(done)
        rows = answer.get("offsets") if isinstance(answer, dict) else None
        check(isinstance(rows, list) and len(rows) <= 1, f"leader answered {str(answer)[:200]}")
        return int(rows[0]["offset"]) if rows else None

    outcomes = await asyncio.gather(*(one(p) for p in wanted))
    rows = []
    for p, outcome in zip(wanted, outcomes, strict=True):
        if isinstance(outcome, _Failure):
            return outcome.response(outcome.headers.get(LEADER_HEADER, broker.node_id))
        if outcome is not None:
            rows.append({"topic": meta.name, "partition": p, "offset": outcome})
    return web.json_response({"offsets": rows})


# -- admin API -----------------------------------------------------------------------------------------


async def cluster_health(request: web.Request) -> web.Response:
    """Redpanda's shape, from this node's view. A partition is leaderless when no leader is known (this
    node's replica, or gossiped claims: never a routing guess, never a replica that cannot open or
    replay); under-replicated when a replica's node is not alive, a replica cannot open or replay (on any
    node: each gossips its own), or this node leads it and a replica is not in sync. Healthy needs a
    controller, no node down, no failed replica, and no leaderless or under-replicated partition."""
    broker = _state(request).broker
    nodes = broker.nodes()
    failed = broker.failed_replicas()
    failed_partitions = {(f.topic, f.partition) for f in failed}
    states = {node.node_id: node.state for node in nodes}
    retired = admin.decommissioned(broker, nodes)  # emptied by a decommission: expected to be gone
    down = sorted(n for n, s in states.items() if s in ("dead", "left") and n not in retired)
    leaderless = []
    under_replicated = []
    for name in sorted(broker.topics()):
        try:
            meta = broker.topic(name)
        except RaftlogError:
            continue  # deleted while we looked
        for partition, replicas in enumerate(meta.replicas):
            where = {"topic": name, "partition": partition}
            if broker.known_leader(name, partition) is None:
                leaderless.append(where)
            lagging = (name, partition) in failed_partitions or any(
                states.get(n) != "alive" for n in replicas
            )
            if not lagging and broker.node_id in replicas:
                try:
                    detail = broker.partition_state(name, partition)
                except ConsensusError:
                    pass  # not led here: the membership view above is what this node knows
                else:
                    led_here = detail.leader == broker.node_id
                    lagging = led_here and not all(r.in_sync for r in detail.replicas)
            if lagging:
                under_replicated.append(where)
    controller = broker.controller()
    return web.json_response(
        {
            "is_healthy": (
                controller is not None and not down and not failed and not leaderless and not under_replicated
            ),
            "controller": controller,
            "nodes": sorted(states),
            "nodes_down": down,
            "leaderless_partitions": leaderless,
            "under_replicated_partitions": under_replicated,
            "failed_replicas": [asdict(f) for f in failed],
            **admin.health_extras(broker, nodes),
        }
    )


async def list_nodes(request: web.Request) -> web.Response:
    nodes = _state(request).broker.nodes()
    return web.json_response([asdict(node) for node in sorted(nodes, key=lambda n: n.node_id)])


async def create_topic(request: web.Request) -> web.Response:
    state = _state(request)
    broker = state.broker
    require_json_body(request.content_type)
    wanted = parse_create_topic(await _json(request))
    factor = wanted.replication_factor
    if factor is None:
        alive = sum(1 for node in broker.nodes() if node.state == "alive")
        factor = min(REPLICATION_FACTOR_DEFAULT_MAX, max(1, alive))
    meta = await broker.create_topic(wanted.name, wanted.partitions, factor, wanted.configs)
    return web.json_response(
        {
            "name": meta.name,
            "partitions": meta.partitions,
            "replication_factor": len(meta.replicas[0]) if meta.replicas else factor,
            "replicas": [list(r) for r in meta.replicas],
            "configs": meta.configs,
        },
        status=201,
    )


async def delete_topic(request: web.Request) -> web.Response:
    if is_internal(request.match_info["topic"]):
        raise InvalidTopic(
            f"topic {request.match_info['topic']!r} is internal (consumer groups) and cannot be deleted"
        )
    await _state(request).broker.delete_topic(request.match_info["topic"])
    return web.Response(status=204)


async def partition_state(request: web.Request) -> web.Response:
    state = _state(request)
    partition = _partition(request)
    meta = _topic_partition(state.broker, request.match_info["topic"], partition)
    _served_here(state, meta, partition)
    detail = state.broker.partition_state(meta.name, partition)
    if detail.leader is not None and detail.leader != state.broker.node_id:
        # Only the leader knows every replica's match offset and lag: answer with its view.
        raise NotLeader(meta.group_id(partition), detail.leader)
    request[_LEADER] = detail.leader or ""
    return web.json_response(asdict(detail))


async def transfer_leadership(request: web.Request) -> web.Response:
    state = _state(request)
    partition = _partition(request)
    target = query_str(request.query, "target")
    meta = _topic_partition(state.broker, request.match_info["topic"], partition)
    if target is not None and target not in meta.replicas[partition]:
        raise BadRequest(f"query parameter target: {target!r} is not a replica of {meta.name}/{partition}")
    _served_here(state, meta, partition)
    await state.broker.transfer_leadership(meta.name, partition, target, state.settings.admin_timeout_ms)
    leader = state.broker.known_leader(meta.name, partition)  # the one it saw take over, never a guess
    return web.json_response({"topic": meta.name, "partition": partition, "leader": leader})


# -- operations ----------------------------------------------------------------------------------------


async def metrics(request: web.Request) -> web.Response:
    state = _state(request)
    text = state.metrics.render(state.broker.metrics())
    return web.Response(
        body=text.encode("utf-8"), headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
    )


def _identity(request: web.Request) -> dict[str, Any]:
    """Which node and process answer: a supervisor (``raftlog dev``) checks that a port it probes is
    answered by the process it started, not by another one that holds the port."""
    return {"node_id": _state(request).broker.node_id, "pid": os.getpid()}


async def live(request: web.Request) -> web.Response:
    return web.json_response({"status": "live", **_identity(request)})


async def ready(request: web.Request) -> web.Response:
    if _state(request).broker.controller() is None:
        raise NotReady("no controller known yet")
    return web.json_response({"status": "ready", **_identity(request)})


async def openapi(request: web.Request) -> web.Response:
    token = _state(request).settings.admin_token is not None
    return web.json_response(document(ROUTES, admin_token=token))


_TOPIC = "/topics/{topic}"
_PARTITION = "/topics/{topic}/partitions/{partition}"
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
        maximum=FETCH_MAX_BYTES_MAX,
    ),
)

ROUTES: tuple[Operation, ...] = (
    Operation(
        "GET", "/replication/leadership", leadership, "leadershipClaims",
        "This node's leadership claims (Raft group -> term) and their version", "operations",
        forward=False,
    ),
    Operation(
        "GET", "/replication/partitions/{topic}/{partition}/batches", replica_batches, "replicaBatches",
        "Committed raw record batches of this node's replica, for replica catch-up", "operations",
        query=(
            Param("offset", "integer", "first offset (a batch boundary)", required=True, minimum=0),
            Param(
                "max_bytes", "integer", "byte budget (at least one batch is returned if any)", minimum=1,
                maximum=FETCH_MAX_BYTES_MAX,
            ),
        ),
        ok_type="application/octet-stream", errors=(404, 416, 503), forward=False,
    ),
    Operation("GET", "/topics", list_topics, "listTopics", "Topic names", "client", ok_schema="TopicNames"),
    Operation(
        "GET", _TOPIC, get_topic, "getTopic", "A topic, its partitions and configs", "client",
        ok_schema="Topic", errors=(404,),
    ),
    Operation(
        "POST", _TOPIC, produce_to_topic, "produce", "Produce records (key -> murmur2 partition)", "client",
        body="ProduceRequest", body_types=RECORD_TYPES, ok_schema="ProduceResponse",
        errors=(404, 413, 415, 422, 504), write=True,
    ),
    Operation(
        "GET", f"{_TOPIC}/partitions", get_partitions, "listPartitions",
        "A topic's partitions: each leader, and which replicas are in sync as their leader says", "client",
        ok_schema="Partitions", errors=(404,),
    ),
    Operation(
        "GET", _PARTITION, get_partition, "getPartition",
        "A partition: its leader, and which replicas are in sync as the leader says", "client",
        ok_schema="Partition", errors=(404,),
    ),
    Operation(
        "POST", _PARTITION, produce_to_partition, "produceToPartition", "Produce records to one partition",
        "client", body="ProduceRequest", body_types=RECORD_TYPES, ok_schema="PartitionProduceResponse",
        body_alternatives=((RECORD_BATCH_V1, None),),
        errors=(404, 413, 415, 422, 504), write=True,
    ),
    Operation(
        "GET", f"{_PARTITION}/offsets", get_offsets, "getOffsets", "First and next offset of a partition",
        "client", ok_schema="PartitionOffsets", errors=(404,),
    ),
    Operation(
        "GET", f"{_PARTITION}/records", fetch, "fetch", "Fetch committed records (long poll)", "client",
        query=_FETCH_QUERY, ok_schema="FetchResponse", errors=(404, 416), long_poll=True,
        ok_alternatives=((COLUMNAR_JSON, "ColumnarPage"), (COLUMNAR_MSGPACK, None), (RECORD_BATCH_V1, None)),
    ),
    Operation(
        "POST", "/consumers/{group}/offsets", commit_offsets, "commitOffsets",
        "Commit a group's next offsets to read (never backwards unless reset)", "client",
        body="CommitOffsetsRequest", body_types=RECORD_TYPES, ok_status=204, errors=(404, 415, 504),
        write=True,
    ),
    Operation(
        "GET", "/consumers/{group}/offsets", committed_offsets, "getCommittedOffsets",
        "A group's committed offsets", "client",
        query=(
            Param("topic", "string", "topic name", required=True),
            Param("partition", "integer", "one partition (default: all)", minimum=0, maximum=2**31 - 1),
        ),
        ok_schema="CommittedOffsets", errors=(404,),
    ),
    Operation(
        "GET", "/v1/cluster/health", cluster_health, "clusterHealth", "Cluster health overview", "admin",
        ok_schema="Health",
    ),
    Operation("GET", "/v1/nodes", list_nodes, "listNodes", "Known nodes", "admin", ok_schema="Nodes"),
    Operation(
        "POST", "/v1/topics", create_topic, "createTopic", "Create a topic", "admin",
        body="CreateTopicRequest", ok_status=201, ok_schema="CreatedTopic", errors=(409, 415), write=True,
    ),
    Operation(
        "DELETE", "/v1/topics/{topic}", delete_topic, "deleteTopic", "Delete a topic", "admin",
        ok_status=204, errors=(404,), write=True,
    ),
    Operation(
        "GET", "/v1/partitions/{topic}/{partition}", partition_state, "getPartitionState",
        "Leader, term, high watermark and replica progress of a partition", "admin",
        ok_schema="PartitionState", errors=(404,),
    ),
    Operation(
        "POST", "/v1/partitions/{topic}/{partition}/transfer_leadership", transfer_leadership,
        "transferLeadership", "Move a partition's leadership (to target, or any caught-up replica)", "admin",
        query=(Param("target", "string", "node id of a replica to lead"),),
        ok_schema="TransferResult", errors=(404, 409), write=True,
    ),
    *admin.ROUTES,
    Operation(
        "GET", "/metrics", metrics, "metrics", "Prometheus metrics", "operations",
        ok_type="text/plain", forward=False,
    ),
    Operation("GET", "/status/live", live, "live", "The process is up", "operations", ok_schema="Status",
              forward=False),
    Operation(
        "GET", "/status/ready", ready, "ready", "The node knows a controller (503 otherwise)", "operations",
        ok_schema="Status", errors=(503,), forward=False,
    ),
    Operation(
        "GET", "/openapi.json", openapi, "openapi", "This document", "operations",
        ok_type="application/json", forward=False,
    ),
)  # fmt: skip
ROUTES += consumers.ROUTES  # consumer groups: instances, subscriptions, records, fenced commits, lag


# -- middlewares ---------------------------------------------------------------------------------------


def _error_response(request: web.Request, error: RaftlogError) -> web.Response:
    mapped = errors.lookup(error)
    headers: dict[str, str] = {}
    if isinstance(error, NotLeader | NoLeader):
        headers[LEADER_HEADER] = ""
    if mapped.status == 503:
        headers["Retry-After"] = str(errors.RETRY_AFTER_S)
    if isinstance(error, Unauthorized):
        headers["WWW-Authenticate"] = 'Bearer realm="raftlog"'
    if isinstance(error, MethodNotAllowed):
        headers["Allow"] = ", ".join(error.allowed)
    if mapped.status >= 500 and not mapped.retriable:
        log.error("%s %s failed: %s", request.method, request.path, error, exc_info=error)
    elif mapped.status >= 500:
        count = _state(request).retriable_log.record(mapped.error_code, time.monotonic())
        if count is not None:
            log.info(
                "%s %s answered %d (error_code %d): %s (%d answers with this code since its last line)",
                request.method, request.path, mapped.status, mapped.error_code, error, count,
            )  # fmt: skip
    return web.json_response(errors.body(error), status=mapped.status, headers=headers)


def _ask_controller(broker: Broker, error: UnknownTopic) -> NotLeader:
    """A topic unknown here may be one this node has not learned yet (metadata reaches followers of the
    controller group a heartbeat later): send the request to the controller leader, which knows every
    committed topic. On the controller leader itself the topic really does not exist."""
    controller = broker.controller()
    if controller is None:
        # right after a start the controller replica has not caught up: "unknown" is not "absent"
        raise NotReady(f"{error}: this node has no controller yet and cannot tell; retry") from error
    if controller == broker.node_id:
        raise error
    return NotLeader(CONTROLLER_GROUP, controller)


def _check_token(request: web.Request, token: str) -> None:
    given = request.headers.get("Authorization", "")
    scheme, _, credentials = given.partition(" ")
    ok = scheme.lower() == "bearer" and hmac.compare_digest(
        credentials.strip().encode("utf-8"), token.encode("utf-8")
    )
    if not ok:
        raise Unauthorized("admin API: missing or wrong 'Authorization: Bearer <token>'")


def _check_internal(request: web.Request, broker: Broker) -> None:
    """Node-to-node endpoints (under ``INTERNAL_PREFIX``) answer only a peer: the cluster credential
    (derived from the cluster secret) as a bearer token; anyone else gets 401 and learns nothing."""
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not broker.internal_credential_ok(credential.strip()):
        raise Unauthorized("internal endpoint: missing or wrong cluster credential")


def _from_http_exception(request: web.Request, exc: web.HTTPException) -> RaftlogError:
    if isinstance(exc, web.HTTPNotFound):
        return RouteNotFound(f"no endpoint at {request.method} {request.path}")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return MethodNotAllowed(request.method, request.path, list(exc.allowed_methods))
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return RequestTooLarge(_state(request).settings.request_bytes_max)
    return BadRequest(f"{exc.status} {exc.reason}: {exc.text}")


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = _state(request)
    try:
        token = state.settings.admin_token
        if token is not None and (request.path == "/v1" or request.path.startswith("/v1/")):
            _check_token(request, token)
        if request.path.startswith(INTERNAL_PREFIX):
            _check_internal(request, state.broker)
        parse_hops(request.headers.get(HOPS_HEADER))
        try:
            return await handler(request)
        except (NotLeader, UnknownTopic) as exc:
            operation: Operation | None = request.get(_OPERATION)
            if operation is None or not operation.forward:
                raise
            refusal = exc if isinstance(exc, NotLeader) else _ask_controller(state.broker, exc)
            answer = await _forward(
                request,
                refusal,
                request.method,
                request.raw_path,
                await _body(request),
                write=operation.write,
                long_poll=operation.long_poll,
            )
            return web.Response(status=answer.status, body=answer.body, headers=answer.headers)
    except web.HTTPException as exc:
        return _error_response(request, _from_http_exception(request, exc))
    except RaftlogError as exc:
        return _error_response(request, exc)
    except Exception as exc:  # a bug: answer 500 and log it with its traceback
        log.exception("%s %s: unexpected error", request.method, request.path)
        return web.json_response(
            {"error_code": errors.INTERNAL.error_code, "message": f"internal error: {type(exc).__name__}"},
            status=500,
        )


@web.middleware
async def _observe(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = _state(request)
    started = time.perf_counter()
    response = await handler(request)
    if LEADER_HEADER not in response.headers:
        response.headers[LEADER_HEADER] = request.get(_LEADER, state.broker.node_id)
    route = request.match_info.route.resource
    name = route.canonical if route is not None else "unmatched"
    state.metrics.observe(request.method, name, response.status, time.perf_counter() - started)
    return response


_OPERATION = web.RequestKey("raftlog_operation", Operation)  # the matched route


def _bind(operation: Operation) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        request[_OPERATION] = operation
        admission = _state(request).admission
        kind = "write" if operation.write else "long-poll" if operation.long_poll else None
        if kind is None:
            return await operation.handler(request)
        admission.enter(kind)
        try:
            return await operation.handler(request)
        finally:
            admission.leave(kind)

    return handle


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


async def _close(app: web.Application) -> None:
    await app[STATE].forwarder.close()


def build_app(
    broker: Broker,
    *,
    admin_token: str | None = None,
    forward_timeout_s: float = 15.0,
    produce_timeout_ms: int = 10_000,
    admin_timeout_ms: int = 10_000,
    request_bytes_max: int = REQUEST_BYTES_MAX,
    writes_in_flight_max: int = WRITES_IN_FLIGHT_MAX,
    long_polls_in_flight_max: int = LONG_POLLS_IN_FLIGHT_MAX,
) -> web.Application:
    """The HTTP API of one node over ``broker``. ``forward_timeout_s`` bounds a forwarded request (plus
    the long-poll ``timeout`` of a fetch) and should exceed ``produce_timeout_ms``."""
    if admin_token is not None and not admin_token:
        raise ValueError("admin_token must be None (no auth) or a non-empty string")
    if forward_timeout_s <= 0 or produce_timeout_ms <= 0 or admin_timeout_ms <= 0 or request_bytes_max <= 0:
        raise ValueError("timeouts and request_bytes_max must be positive")
    settings = Settings(
        admin_token, forward_timeout_s, produce_timeout_ms, admin_timeout_ms, request_bytes_max
    )
    app = web.Application(middlewares=[_observe, _errors], client_max_size=request_bytes_max)
    app[STATE] = AppState(broker, settings)
    app[STATE].admission = Admission(writes_in_flight_max, long_polls_in_flight_max)
    app[consumers.CONTEXT] = consumers.Context(
        broker, app[STATE].forwarder, forward_timeout_s, produce_timeout_ms, request_bytes_max
    )
    app[admin.CONTEXT] = admin.Context(broker, admin_timeout_ms, request_bytes_max)
    for operation in ROUTES:
        app.router.add_route(operation.method, operation.path, _bind(operation))
    app.on_cleanup.append(_close)
    return app
