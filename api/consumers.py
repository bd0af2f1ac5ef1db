"""Consumer-group endpoints in the Confluent REST Proxy v2 shape: consumer instances, subscriptions,
assignments, positions, records and offsets, plus the admin view of groups and their lag.

Every instance request is served by the group's coordinator: the leader of the ``__consumer_groups``
partition the group hashes to (``partitions.groups.coordinator``). On any other node the coordinator
raises ``NotLeader`` and the app's middleware forwards the whole request there, so an instance works
behind any node. The coordinator then reads and commits the data partitions itself, locally when it
leads them, else by forwarding the partition-level request (``GET .../records``, ``POST
/consumers/{group}/offsets``) to their leaders.

Instance records are fetched from every assigned partition at once, first without waiting (every
partition's answer is kept); when none had records, a long poll on all of them that the first partition
with records ends (the others are cancelled: reads, nothing to undo). Each partition gets ``max_bytes``
divided by the number of assigned partitions. A partition whose position fell out of its log
(retention) is reset by the instance's ``auto.offset.reset``.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from api import errors
from api.bodies import read_body
from api.errors import BadRequest, UnsupportedMediaType
from api.forwarding import Forwarded, Forwarder
from api.openapi import Operation, Param
from api.routing import HOPS_HEADER, forward_target, parse_hops
from api.schemas import (
    OFFSETS_MAX,
    RECORD_CONTENT_TYPES,
    Flavour,
    dump_json,
    parse_json,
    query_int,
    reject_unknown,
    render_record,
    require_int,
    require_object,
)
from partitions.broker import Broker
from partitions.errors import UnknownPartition, UnknownTopic
from partitions.groups.assignors import ASSIGNORS, TopicPartition
from partitions.groups.coordinator import GROUPS_TOPIC, SUBSCRIBED_TOPICS_MAX, InstanceView
from partitions.groups.errors import InvalidConsumerConfig, StaleGeneration
from partitions.groups.state import SESSION_TIMEOUT_MS_DEFAULT, SESSION_TIMEOUT_MS_MAX, SESSION_TIMEOUT_MS_MIN
from partitions.names import check_group_name, check_instance_name, check_topic_name, check_user_topic_name
from raftlog.consensus.errors import ConsensusError, NotLeader
from raftlog.errors import RaftlogError, check
from raftlog.storage.errors import OffsetOutOfRange
from raftlog_client.contract import BINARY_V2, GENERATION_HEADER, HIGH_WATERMARK_HEADER, JSON_V2, KAFKA_V2

RECORDS_TIMEOUT_MS_MAX = 60_000
RECORDS_MAX_BYTES_DEFAULT = 1024 * 1024
RECORDS_MAX_BYTES_MAX = 64 * 1024 * 1024
ASSIGNMENT_POLL_S = 0.05  # how often a member with no partitions looks for a new assignment while it waits
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Context:
    broker: Broker
    forwarder: Forwarder
    forward_timeout_s: float
    commit_timeout_ms: int
    request_bytes_max: int


CONTEXT = web.AppKey("raftlog_consumers", Context)


class _Answered(Exception):
    """A partition-level request a leader answered with an error: pass its answer on as it is."""

    def __init__(self, status: int, payload: dict[str, Any]) -> None:
        super().__init__(f"{status}: {payload}")
        self.status = status
        self.payload = payload

    @classmethod
    def of(cls, error: RaftlogError) -> _Answered:
        return cls(errors.lookup(error).status, errors.body(error))

    @classmethod
    def forwarded(cls, answer: Forwarded) -> _Answered:
        return cls(answer.status, answer.error_payload())

    def response(self) -> web.Response:
        headers = {"Retry-After": str(errors.RETRY_AFTER_S)} if self.status == 503 else {}
        return web.json_response(self.payload, status=self.status, headers=headers)


# -- request parsing -----------------------------------------------------------------------------------


def _require_json(request: web.Request) -> None:
    content_type = request.content_type.strip().lower()
    if content_type != KAFKA_V2 and content_type not in RECORD_CONTENT_TYPES:
        raise UnsupportedMediaType(request.content_type)


async def _body(request: web.Request, *, optional: bool = False) -> dict[str, Any]:
    raw = await read_body(request, request.app[CONTEXT].request_bytes_max)
    if not raw and optional:
        return {}
    _require_json(request)
    return require_object(parse_json(raw), "body")


def _group(request: web.Request) -> str:
    return check_group_name(request.match_info["group"], "group")


def _instance(request: web.Request) -> str:
    return check_instance_name(request.match_info["instance"], "instance")


def _config_str(body: Mapping[str, Any], key: str, default: str) -> str:
    value = body.get(key, default)
    if not isinstance(value, str):
        raise BadRequest(f"{key}: must be a string")
    return value


def _partitions(body: Mapping[str, Any], field: str = "partitions") -> list[TopicPartition]:
    items = body.get(field)
    if not isinstance(items, list) or not 1 <= len(items) <= OFFSETS_MAX:
        raise BadRequest(f"{field}: must be a list of 1 to {OFFSETS_MAX} {{topic, partition}} objects")
    out = []
    for i, item in enumerate(items):
        entry = require_object(item, f"{field}[{i}]")
        reject_unknown(entry, {"topic", "partition"}, f"{field}[{i}]")
        out.append(_topic_partition(entry, f"{field}[{i}]"))
    return out


def _topic_partition(entry: Mapping[str, Any], where: str) -> TopicPartition:
    for key in ("topic", "partition"):
        if key not in entry:
            raise BadRequest(f"{where}.{key}: missing")
    return TopicPartition(
        check_topic_name(entry["topic"], f"{where}.topic"),
        require_int(entry["partition"], f"{where}.partition", maximum=2**31 - 1),
    )


def _offsets(body: Mapping[str, Any], extra: frozenset[str] = frozenset()) -> dict[TopicPartition, int]:
    items = body.get("offsets")
    if not isinstance(items, list) or not 1 <= len(items) <= OFFSETS_MAX:
        raise BadRequest(
            f"offsets: must be a list of 1 to {OFFSETS_MAX} {{topic, partition, offset}} objects"
        )
    out: dict[TopicPartition, int] = {}
    for i, item in enumerate(items):
        where = f"offsets[{i}]"
        entry = require_object(item, where)
        reject_unknown(entry, {"topic", "partition", "offset", *extra}, where)
        if "offset" not in entry:
            raise BadRequest(f"{where}.offset: missing")
        out[_topic_partition(entry, where)] = require_int(entry["offset"], f"{where}.offset")
    return out


def _tp_json(tp: TopicPartition) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition}


# -- partition-level calls: here when this node leads the partition, else forwarded to its leader -------


def _ctx(request: web.Request) -> Context:
    return request.app[CONTEXT]


async def _on_partition(
    request: web.Request,
    tp: TopicPartition,
    local: Callable[[], Awaitable[T]],
    method: str,
    path_qs: str,
    body: bytes = b"",
    *,
    write: bool = False,
    accept: str = JSON_V2,
    extra_timeout_s: float = 0.0,
) -> T | Forwarded:
    ctx = _ctx(request)
    broker = ctx.broker
    try:
        meta = broker.topic(tp.topic)
    except UnknownTopic as exc:  # answered here: the coordinator is not the controller's to forward to
        raise _Answered.of(exc) from None
    if not 0 <= tp.partition < meta.partitions:
        raise _Answered.of(UnknownPartition(tp.topic, tp.partition))
    try:
        if broker.node_id not in meta.replicas[tp.partition]:
            hint = broker.leader_hint(tp.topic, tp.partition)
            raise NotLeader(meta.group_id(tp.partition), hint or meta.replicas[tp.partition][0])
        return await local()
    except NotLeader as refusal:
        address = broker.http_address(refusal.leader_hint) if refusal.leader_hint else None
        hops = parse_hops(request.headers.get(HOPS_HEADER))
        target = forward_target(broker.node_id, refusal.leader_hint, address, hops, refusal.group_id)
        if isinstance(target, RaftlogError):
            raise target from None
        headers = {"Content-Type": "application/json", "Accept": accept}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        timeout_s = ctx.forward_timeout_s + extra_timeout_s
        return await ctx.forwarder.send(target, method, path_qs, headers, body, timeout_s, write=write)


def _quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="")


async def _bounds(request: web.Request, tp: TopicPartition) -> tuple[int, int]:
    """(log start offset, high watermark) of a partition, from its leader."""
    broker = _ctx(request).broker

    async def local() -> tuple[int, int]:
        offsets = broker.offsets(tp.topic, tp.partition)
        return offsets.log_start_offset, offsets.high_watermark

    path = f"/topics/{_quoted(tp.topic)}/partitions/{tp.partition}/offsets"
    done = await _on_partition(request, tp, local, "GET", path)
    if not isinstance(done, Forwarded):
        return done
    if done.status != 200:
        raise _Answered.forwarded(done)
    answer = parse_json(done.body)
    return int(answer["beginning_offset"]), int(answer["end_offset"])


async def _committed(request: web.Request, group: str, tp: TopicPartition) -> int | None:
    """The group's committed offset of a partition (kept with the partition), from its leader."""
    broker = _ctx(request).broker

    async def local() -> int | None:
        return broker.committed_offset(group, tp.topic, tp.partition)

    query = urllib.parse.urlencode({"topic": tp.topic, "partition": tp.partition})
    done = await _on_partition(request, tp, local, "GET", f"/consumers/{_quoted(group)}/offsets?{query}")
    if not isinstance(done, Forwarded):
        if done is not None:
            broker.groups.note_committed(group, tp, done)
        return done
    if done.status != 200:
        raise _Answered.forwarded(done)
    rows = parse_json(done.body).get("offsets", [])
    if not rows:
        return None
    committed = int(rows[0]["offset"])
    broker.groups.note_committed(group, tp, committed)
    return committed


async def _commit(request: web.Request, group: str, tp: TopicPartition, offset: int) -> None:
    ctx = _ctx(request)

    async def local() -> int:
        return await ctx.broker.commit_offset(
            group, tp.topic, tp.partition, offset, False, ctx.commit_timeout_ms
        )

    body = dump_json({"offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": offset}]})
    done = await _on_partition(
        request, tp, local, "POST", f"/consumers/{_quoted(group)}/offsets", body, write=True
    )
    if isinstance(done, Forwarded) and done.status != 204:
        raise _Answered.forwarded(done)
    stored = offset if isinstance(done, Forwarded) else done  # a partition's offset never goes backwards
    ctx.broker.groups.note_committed(group, tp, stored)


async def _starting_offset(request: web.Request, group: str, view: InstanceView, tp: TopicPartition) -> int:
    committed = await _committed(request, group, tp)
    if committed is not None:
        return committed
    beginning, end = await _bounds(request, tp)
    return beginning if view.member.offset_reset == "earliest" else end


@dataclass(frozen=True, slots=True)
class _Fetched:
    rows: list[dict[str, Any]]
    reset_to: int | None = None  # the position fell out of the log: start again here


async def _fetch_partition(
    request: web.Request,
    group: str,
    view: InstanceView,
    tp: TopicPartition,
    offset: int,
    timeout_ms: int,
    max_bytes: int,
) -> _Fetched:
    broker = _ctx(request).broker
    flavour = Flavour(view.member.format)

    async def local() -> tuple[list[dict[str, Any]], int | None]:
        records = await broker.fetch(tp.topic, tp.partition, offset, max_bytes, timeout_ms)
        try:
            end: int | None = broker.offsets(tp.topic, tp.partition).high_watermark
        except ConsensusError:  # leadership moved during the long poll: no lag hint this time
            end = None
        return [render_record(tp.topic, tp.partition, r, flavour) for r in records], end

    query = urllib.parse.urlencode({"offset": offset, "timeout": timeout_ms, "max_bytes": max_bytes})
    path = f"/topics/{_quoted(tp.topic)}/partitions/{tp.partition}/records?{query}"
    accept = BINARY_V2 if flavour is Flavour.BINARY else JSON_V2
    try:
        done = await _on_partition(
            request, tp, local, "GET", path, accept=accept, extra_timeout_s=timeout_ms / 1000
        )
    except OffsetOutOfRange as exc:
        return _Fetched(
            [], exc.log_start_offset if view.member.offset_reset == "earliest" else exc.end_offset
        )
    if isinstance(done, Forwarded):
        if done.status == 416:
            answer = parse_json(done.body)
            key = "log_start_offset" if view.member.offset_reset == "earliest" else "end_offset"
            return _Fetched([], int(answer[key]))
        if done.status != 200:
            raise _Answered.forwarded(done)
        rows = parse_json(done.body)
        check(isinstance(rows, list), f"leader answered a fetch with {str(rows)[:200]}")
        end_header = done.headers.get(HIGH_WATERMARK_HEADER)
        end = int(end_header) if end_header and end_header.isdigit() else None
    else:
        rows, end = done
    if end is not None:
        broker.groups.note_end_offset(group, tp, end)
    return _Fetched(rows)


async def _first_records(
    tasks: dict[TopicPartition, asyncio.Task[_Fetched]], *, first: bool
) -> tuple[dict[TopicPartition, _Fetched], list[_Answered]]:
    """Wait until every partition answered or, with ``first``, one answered with records; cancel the
    rest."""
    results: dict[TopicPartition, _Fetched] = {}
    failures: list[_Answered] = []
    by_task = {task: tp for tp, task in tasks.items()}
    pending: set[asyncio.Task[_Fetched]] = set(tasks.values())
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                error = task.exception()
                if isinstance(error, _Answered):
                    failures.append(error)
                elif isinstance(error, RaftlogError):
                    failures.append(_Answered.of(error))
                elif error is not None:
                    raise error
                else:
                    results[by_task[task]] = task.result()
            if first and any(f.rows for f in results.values()):
                break
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return results, failures


# -- handlers ------------------------------------------------------------------------------------------


Handler = Callable[[web.Request], Awaitable[web.Response]]


def _answering(handler: Handler) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        try:
            return await handler(request)
        except _Answered as answered:
            return answered.response()

    handle.__name__ = handler.__name__
    handle.__doc__ = handler.__doc__
    return handle


@_answering
async def create_instance(request: web.Request) -> web.Response:
    """Confluent's body: ``{"name"?, "format"?, "auto.offset.reset"?, "auto.commit.enable"?}``, plus
    ``"session.timeout.ms"`` and ``"partition.assignment.strategy"`` (``range`` | ``round_robin``)."""
    broker = _ctx(request).broker
    group = _group(request)
    body = await _body(request, optional=True)
    reject_unknown(
        body,
        {
            "name", "format", "auto.offset.reset", "auto.commit.enable", "session.timeout.ms",
            "partition.assignment.strategy",
        },
        "",
    )  # fmt: skip
    name = check_instance_name(body["name"], "name") if body.get("name") is not None else None
    auto_commit = body.get("auto.commit.enable", "false")
    if auto_commit not in ("false", False):
        raise InvalidConsumerConfig(
            "auto.commit.enable: only false is supported; commit with POST .../instances/{instance}/offsets"
        )
    timeout_ms = body.get("session.timeout.ms", SESSION_TIMEOUT_MS_DEFAULT)
    if isinstance(timeout_ms, str) and timeout_ms.isascii() and timeout_ms.isdigit():
        timeout_ms = int(timeout_ms)  # Confluent passes consumer configs as strings
    session_timeout_ms = require_int(
        timeout_ms, "session.timeout.ms", SESSION_TIMEOUT_MS_MIN, SESSION_TIMEOUT_MS_MAX
    )
    assignor = _config_str(body, "partition.assignment.strategy", "range").replace(
        "roundrobin", "round_robin"
    )
    if assignor not in ASSIGNORS:
        raise InvalidConsumerConfig(f"partition.assignment.strategy {assignor!r}: use {sorted(ASSIGNORS)}")
    member = await broker.groups.create_instance(
        group,
        name,
        format=_config_str(body, "format", "json"),
        offset_reset=_config_str(body, "auto.offset.reset", "latest"),
        session_timeout_ms=session_timeout_ms,
        assignor=assignor,
    )
    base = (broker.http_address(broker.node_id) or "").rstrip("/")
    uri = f"{base}/consumers/{_quoted(group)}/instances/{_quoted(member.instance_id)}"
    return web.json_response({"instance_id": member.instance_id, "base_uri": uri})


@_answering
async def delete_instance(request: web.Request) -> web.Response:
    await _ctx(request).broker.groups.delete_instance(_group(request), _instance(request))
    return web.Response(status=204)


@_answering
async def subscribe(request: web.Request) -> web.Response:
    groups = _ctx(request).broker.groups
    group, instance = _group(request), _instance(request)
    body = await _body(request)
    reject_unknown(body, {"topics"}, "")
    topics = body.get("topics")
    if not isinstance(topics, list) or not 1 <= len(topics) <= SUBSCRIBED_TOPICS_MAX:
        raise BadRequest(f"topics: must be a list of 1 to {SUBSCRIBED_TOPICS_MAX} topic names")
    names = [check_user_topic_name(t, f"topics[{i}]") for i, t in enumerate(topics)]
    await groups.subscribe(group, instance, names)
    return web.Response(status=204)


@_answering
async def subscription(request: web.Request) -> web.Response:
    view = _ctx(request).broker.groups.view(_group(request), _instance(request))
    return web.json_response({"topics": list(view.member.topics)})


@_answering
async def unsubscribe(request: web.Request) -> web.Response:
    await _ctx(request).broker.groups.subscribe(_group(request), _instance(request), [])
    return web.Response(status=204)


@_answering
async def assignments(request: web.Request) -> web.Response:
    view = await _ctx(request).broker.groups.heartbeat(_group(request), _instance(request))
    return web.json_response(
        {"partitions": [_tp_json(tp) for tp in view.assigned], "generation": view.generation},
        headers={GENERATION_HEADER: str(view.generation)},
    )


@_answering
async def seek(request: web.Request) -> web.Response:
    groups = _ctx(request).broker.groups
    group, instance = _group(request), _instance(request)
    body = await _body(request)
    reject_unknown(body, {"offsets"}, "")
    groups.seek(group, instance, _offsets(body))
    return web.Response(status=204)


async def _seek_to(request: web.Request, end: bool) -> web.Response:
    groups = _ctx(request).broker.groups
    group, instance = _group(request), _instance(request)
    body = await _body(request)
    reject_unknown(body, {"partitions"}, "")
    wanted = _partitions(body)
    groups.check_assigned(group, instance, None, wanted)  # refused before any lookup when not assigned
    offsets = {}
    for tp in wanted:
        beginning, high_watermark = await _bounds(request, tp)
        offsets[tp] = high_watermark if end else beginning
    groups.seek(group, instance, offsets)
    return web.Response(status=204)


@_answering
async def seek_beginning(request: web.Request) -> web.Response:
    return await _seek_to(request, end=False)


@_answering
async def seek_end(request: web.Request) -> web.Response:
    return await _seek_to(request, end=True)


@_answering
async def records(request: web.Request) -> web.Response:
    """Records of every assigned partition from the instance's positions; a heartbeat. With nothing
    assigned yet it waits (up to ``timeout``) for a rebalance to assign something. With ``generation``
    (the one the member last saw), a rebalance since is answered 409/40905 instead of records."""
    groups = _ctx(request).broker.groups
    group, instance = _group(request), _instance(request)
    timeout_ms = query_int(request.query, "timeout", 0, 0, RECORDS_TIMEOUT_MS_MAX) or 0
    max_bytes = query_int(request.query, "max_bytes", RECORDS_MAX_BYTES_DEFAULT, 1, RECORDS_MAX_BYTES_MAX)
    check(max_bytes is not None, "max_bytes has a default")
    generation = query_int(request.query, "generation", None, 0, 2**31 - 1)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    view = await groups.heartbeat(group, instance)
    if generation is not None and generation != view.generation:
        raise StaleGeneration(group, instance, generation, view.generation)
    out: list[dict[str, Any]] = []
    failures: list[_Answered] = []
    with groups.fetching(group, instance):
        while not view.assigned and loop.time() < deadline:
            await asyncio.sleep(min(ASSIGNMENT_POLL_S, max(0.0, deadline - loop.time())))
            view = groups.view(group, instance)
        positions = groups.positions(group, instance)
        for tp in view.assigned:
            if tp in positions:
                continue
            try:
                start = await _starting_offset(request, group, view, tp)
            except _Answered as answered:
                failures.append(answered)
                continue
            except RaftlogError as exc:  # that partition has no leader right now: read the others
                failures.append(_Answered.of(exc))
                continue
            if groups.advance(group, instance, tp, start):
                positions[tp] = start
        readable = [tp for tp in view.assigned if tp in positions]
        budget = max(1, (max_bytes or 1) // max(1, len(readable)))
        # first what every partition has now, then (if none had anything) the first to get something
        results: dict[TopicPartition, _Fetched] = {}
        for wait in (False, True):
            wait_ms = max(0, int((deadline - loop.time()) * 1000)) if wait else 0
            if wait and (wait_ms == 0 or any(f.rows or f.reset_to is not None for f in results.values())):
                break
            tasks = {
                tp: asyncio.create_task(
                    _fetch_partition(request, group, view, tp, positions[tp], wait_ms, budget)
                )
                for tp in readable
            }
            results, fetch_failures = await _first_records(tasks, first=wait)
            failures += fetch_failures
        for tp, fetched in sorted(results.items()):
            if fetched.reset_to is not None:
                groups.advance(group, instance, tp, fetched.reset_to)
            elif fetched.rows and groups.advance(group, instance, tp, int(fetched.rows[-1]["offset"]) + 1):
                out.extend(fetched.rows)
    if not out and failures:
        raise failures[0]
    generation = groups.view(group, instance).generation
    return web.json_response(out, headers={GENERATION_HEADER: str(generation)})


@_answering
async def commit(request: web.Request) -> web.Response:
    """``{"offsets": [{"topic", "partition", "offset"}], "generation"?}``; without offsets, the positions
    of every assigned partition (what was fetched). Fenced by the coordinator, then committed on each
    partition's leader (where ``GET /consumers/{group}/offsets`` reads them)."""
    groups = _ctx(request).broker.groups
    group, instance = _group(request), _instance(request)
    body = await _body(request, optional=True)
    reject_unknown(body, {"offsets", "generation"}, "")
    generation = None if body.get("generation") is None else require_int(body["generation"], "generation")
    offsets = (
        _offsets(body, frozenset({"metadata"})) if body.get("offsets") else groups.positions(group, instance)
    )
    groups.check_assigned(group, instance, generation, list(offsets))
    await asyncio.gather(*(_commit(request, group, tp, offset) for tp, offset in offsets.items()))
    return web.Response(status=204)


@_answering
async def committed(request: web.Request) -> web.Response:
    """Committed offsets of the given partitions (``?topic=&partition=``, or a Confluent-style body
    ``{"partitions": [...]}``), by default of every assigned partition."""
    groups = _ctx(request).broker.groups
    group, instance = _group(request), _instance(request)
    view = await groups.heartbeat(group, instance)
    wanted: list[TopicPartition] = list(view.assigned)
    topic = request.query.get("topic")
    partition = query_int(request.query, "partition", None, 0, 2**31 - 1)
    if topic is not None and partition is not None:
        wanted = [TopicPartition(check_topic_name(topic, "topic"), partition)]
    elif topic is not None or partition is not None:
        raise BadRequest("query parameters topic and partition go together")
    elif request.can_read_body:
        body = await _body(request, optional=True)
        if body:
            reject_unknown(body, {"partitions"}, "")
            wanted = _partitions(body)
    rows = []
    for tp in wanted:
        offset = await _committed(request, group, tp)
        if offset is not None:
            rows.append({**_tp_json(tp), "offset": offset, "metadata": ""})
    return web.json_response({"offsets": rows})


# -- admin ---------------------------------------------------------------------------------------------


def _summary(group: Any, partition: int) -> dict[str, Any]:
    return {
        "group": group.name,
        "generation": group.generation,
        "assignor": group.assignor,
        "members": len(group.members),
        "coordinator_partition": partition,
    }


@_answering
async def list_groups(request: web.Request) -> web.Response:
    """Every group with members, asking the leader of each ``__consumer_groups`` partition (or only
    partition ``coordinator_partition``, as a leader is asked)."""
    ctx = _ctx(request)
    groups = ctx.broker.groups
    only = query_int(request.query, "coordinator_partition", None, 0, 2**31 - 1)
    try:
        count = groups.partitions()
    except UnknownTopic:
        return web.json_response({"groups": []})
    if only is not None:
        if only >= count:
            raise UnknownPartition(GROUPS_TOPIC, only)
        return web.json_response({"groups": [_summary(g, only) for g in groups.groups_of(only)]})
    out: list[dict[str, Any]] = []
    for partition in range(count):
        tp = TopicPartition(GROUPS_TOPIC, partition)

        async def local(partition: int = partition) -> list[dict[str, Any]]:
            return [_summary(g, partition) for g in groups.groups_of(partition)]

        path = f"/v1/consumer-groups?coordinator_partition={partition}"
        done = await _on_partition(request, tp, local, "GET", path)
        if isinstance(done, Forwarded):
            if done.status != 200:
                raise _Answered.forwarded(done)
            done = parse_json(done.body)["groups"]
        out.extend(done)
    return web.json_response({"groups": sorted(out, key=lambda g: g["group"])})


@_answering
async def describe_group(request: web.Request) -> web.Response:
    """Members, their partitions, positions, committed offsets and lag (end offset - committed offset;
    null while nothing is committed). Served by the group's coordinator."""
    groups = _ctx(request).broker.groups
    name = _group(request)
    group, positions = groups.describe(name)
    members = []
    total = 0
    for instance_id, member in sorted(group.members.items()):
        rows = []
        for tp in group.assignment.get(instance_id, ()):
            committed_offset = await _committed(request, name, tp)
            _, end = await _bounds(request, tp)
            groups.note_end_offset(name, tp, end)
            lag = None if committed_offset is None else max(0, end - committed_offset)
            total += lag or 0
            rows.append(
                {
                    **_tp_json(tp),
                    "position": positions.get(instance_id, {}).get(tp),
                    "committed_offset": committed_offset,
                    "end_offset": end,
                    "lag": lag,
                }
            )
        members.append({"instance_id": instance_id, "topics": list(member.topics), "partitions": rows})
    summary = _summary(group, groups.coordinator_partition(name))
    return web.json_response({**summary, "members": members, "lag": total})


_GROUP = "/consumers/{group}"
_INSTANCE = "/consumers/{group}/instances/{instance}"
_CONSUMER_TYPES = (KAFKA_V2, "application/json")

ROUTES: tuple[Operation, ...] = (
    Operation(
        "POST", _GROUP, create_instance, "createConsumer",
        "Create a consumer instance in a group (its coordinator holds it)", "client",
        body="CreateConsumerRequest", body_types=_CONSUMER_TYPES, ok_schema="CreatedConsumer",
        errors=(409, 415, 504), write=True,
    ),
    Operation(
        "DELETE", _INSTANCE, delete_instance, "deleteConsumer", "Remove a consumer instance (rebalances)",
        "client", ok_status=204, errors=(404, 504), write=True,
    ),
    Operation(
        "POST", f"{_INSTANCE}/subscription", subscribe, "subscribe", "Subscribe to topics (rebalances)",
        "client", body="SubscriptionRequest", body_types=_CONSUMER_TYPES, ok_status=204,
        errors=(404, 415, 504), write=True,
    ),
    Operation(
        "GET", f"{_INSTANCE}/subscription", subscription, "getSubscription", "Subscribed topics", "client",
        ok_schema="Subscription", errors=(404,),
    ),
    Operation(
        "DELETE", f"{_INSTANCE}/subscription", unsubscribe, "unsubscribe", "Unsubscribe (rebalances)",
        "client", ok_status=204, errors=(404, 504), write=True,
    ),
    Operation(
        "GET", f"{_INSTANCE}/assignments", assignments, "getAssignments",
        "Partitions assigned to the instance and the group's generation", "client",
        ok_schema="Assignments", errors=(404,),
    ),
    Operation(
        "POST", f"{_INSTANCE}/positions", seek, "seek", "Set the next offset to fetch", "client",
        body="SeekRequest", body_types=_CONSUMER_TYPES, ok_status=204, errors=(404, 409, 415),
    ),
    Operation(
        "POST", f"{_INSTANCE}/positions/beginning", seek_beginning, "seekToBeginning",
        "Fetch from the first offset of the partitions", "client", body="PartitionsRequest",
        body_types=_CONSUMER_TYPES, ok_status=204, errors=(404, 409, 415),
    ),
    Operation(
        "POST", f"{_INSTANCE}/positions/end", seek_end, "seekToEnd", "Fetch only records written from now on",
        "client", body="PartitionsRequest", body_types=_CONSUMER_TYPES, ok_status=204,
        errors=(404, 409, 415),
    ),
    Operation(
        "GET", f"{_INSTANCE}/records", records, "consumerRecords",
        "Records of the assigned partitions (long poll; a heartbeat)", "client",
        query=(
            Param("timeout", "integer", "ms to wait for a record", minimum=0, maximum=RECORDS_TIMEOUT_MS_MAX),
            Param("max_bytes", "integer", "byte budget", minimum=1, maximum=RECORDS_MAX_BYTES_MAX),
            Param(
                "generation", "integer", "the group generation the member knows (409 when stale)",
                minimum=0, maximum=2**31 - 1,
            ),
        ),
        ok_schema="FetchResponse", errors=(404, 409), long_poll=True,
    ),
    Operation(
        "POST", f"{_INSTANCE}/offsets", commit, "commitConsumerOffsets",
        "Commit offsets of assigned partitions (fenced by generation)", "client",
        body="ConsumerCommitRequest", body_types=_CONSUMER_TYPES, ok_status=204,
        errors=(404, 409, 415, 504), write=True,
    ),
    Operation(
        "GET", f"{_INSTANCE}/offsets", committed, "getConsumerOffsets", "The group's committed offsets",
        "client",
        query=(
            Param("topic", "string", "one topic (with partition)"),
            Param("partition", "integer", "one partition (with topic)", minimum=0, maximum=2**31 - 1),
        ),
        ok_schema="ConsumerOffsets", errors=(404,),
    ),
    Operation(
        "GET", "/v1/consumer-groups", list_groups, "listConsumerGroups", "Consumer groups with members",
        "admin",
        query=(
            Param(
                "coordinator_partition", "integer", "only the groups of this __consumer_groups partition",
                minimum=0, maximum=2**31 - 1,
            ),
        ),
        ok_schema="ConsumerGroups", errors=(404,),
    ),
    Operation(
        "GET", "/v1/consumer-groups/{group}", describe_group, "describeConsumerGroup",
        "Members, assignments, positions, committed offsets and lag of a group", "admin",
        ok_schema="ConsumerGroup", errors=(404,),
    ),
)  # fmt: skip
