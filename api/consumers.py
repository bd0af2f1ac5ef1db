"""Consumer-group endpoints in the Confluent REST Proxy v2 shape: consumer instances, subscriptions,
assignments, positions, records and offsets, plus the admin view of groups and their lag.

Every instance call is served by the group's coordinator (``partitions.consumers.service``: the leader of the
``__consumer_groups`` partition the group hashes to); the cluster-wide group service runs it there, so an
instance works behind any node. The coordinator commits on the data partitions' leaders. A records read
is granted by the coordinator and done by this node, from each partition's leader
(``partitions.consumers.reader``): the stored batches are decoded and rendered here, in the member's format.
"""

from __future__ import annotations

import asyncio
import datetime
import re
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from aiohttp import web

from api import access, answers, negotiation, state, typed_records
from api.access import DELETE, DESCRIBE, GROUP, READ, needs
from api.errors import BadRequest, UnsupportedMediaType
from api.openapi import Operation, Param
from api.records import RENDER_INLINE_BYTES_MAX, by_batch, rows_by
from api.rendering import rows_of, rows_text
from api.schemas import (
    INT64_MAX,
    OFFSETS_MAX,
    RECORD_CONTENT_TYPES,
    Flavour,
    query_int,
    reject_unknown,
    require_int,
    require_object,
)
from api.typed_records import SCHEMA_TYPES
from partitions.consumers.protocol import ConsumerRecords, GroupService, MemberPartition
from partitions.errors import UnknownPartition
from partitions.groups.assignors import ASSIGNORS, TopicPartition
from partitions.groups.coordinator import SUBSCRIBED_TOPICS_MAX
from partitions.groups.errors import InvalidConsumerConfig
from partitions.groups.group_model import (
    DEFAULT_READS,
    SESSION_TIMEOUT_MS_DEFAULT,
    InstanceConfig,
    ReadConfig,
)
from partitions.names import (
    GROUPS_TOPIC,
    check_group_name,
    check_instance_name,
    check_topic_name,
    check_user_topic_name,
)
from partitions.peers.cluster import ClusterGroups
from partitions.security.acls import CLUSTER_NAME, client_host
from partitions.security.quotas import CONSUMER_BYTE_RATE
from raftlog.errors import check
from raftlog_contract import (
    BINARY_V2,
    CONSUMER_GROUPS_PATH,
    GENERATION_HEADER,
    JSON_V2,
    KAFKA_V2,
    PLAIN_JSON,
    SCHEMA_FORMATS,
    group_path,
    instance_path,
)

# an instance's format -> its records' media type
EMBEDDED_TYPES = {"json": JSON_V2, "binary": BINARY_V2, **SCHEMA_FORMATS}
RECORDS_TIMEOUT_MS_MAX = 60_000
RECORDS_MAX_BYTES_DEFAULT = 1024 * 1024
RECORDS_MAX_BYTES_MAX = 64 * 1024 * 1024


def quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


# -- request parsing -----------------------------------------------------------------------------------


def _require_json(request: web.Request) -> None:
    content_type = request.content_type.strip().lower()
    if content_type != KAFKA_V2 and content_type not in RECORD_CONTENT_TYPES:
        raise UnsupportedMediaType(request.content_type)


async def _body(request: web.Request, *, optional: bool = False) -> dict[str, Any]:
    raw = await state.body(request)
    if not raw and optional:
        return {}
    _require_json(request)
    return require_object(await state.json_of(request, raw), "body")


def _group(request: web.Request) -> str:
    return check_group_name(request.match_info["group"], "group")


def _instance(request: web.Request) -> str:
    return check_instance_name(request.match_info["instance"], "instance")


def _isolation(body: Mapping[str, Any]) -> bool:
    """Kafka's ``isolation.level``: read_uncommitted (the default) or read_committed."""
    level = _config_str(body, "isolation.level", "read_uncommitted").lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise InvalidConsumerConfig(f"isolation.level {level!r}: use read_uncommitted or read_committed")
    return level == "read_committed"


def _config_str(body: Mapping[str, Any], key: str, default: str) -> str:
    value = body.get(key, default)
    if not isinstance(value, str):
        raise InvalidConsumerConfig(f"{key} {value!r}: must be a string")
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


def _offsets(
    body: Mapping[str, Any], extra: frozenset[str] = frozenset(), field: str = "offsets"
) -> dict[TopicPartition, int]:
    return {tp: require_int(value, where) for tp, value, where in _entries(body, field, "offset", extra)}


def _entries(
    body: Mapping[str, Any], field: str, key: str, extra: frozenset[str]
) -> list[tuple[TopicPartition, Any, str]]:
    """The ``{topic, partition, <key>}`` objects of a list field: each one's partition, value and place."""
    items = body.get(field)
    if not isinstance(items, list) or not 1 <= len(items) <= OFFSETS_MAX:
        raise BadRequest(f"{field}: must be a list of 1 to {OFFSETS_MAX} {{topic, partition, {key}}} objects")
    out = []
    for i, item in enumerate(items):
        where = f"{field}[{i}]"
        entry = require_object(item, where)
        reject_unknown(entry, {"topic", "partition", key, *extra}, where)
        if key not in entry:
            raise BadRequest(f"{where}.{key}: missing")
        out.append((_topic_partition(entry, where), entry[key], f"{where}.{key}"))
    return out


def _timestamps(body: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {
        tp: _epoch_ms(value, where)
        for tp, value, where in _entries(body, "timestamps", "timestamp", frozenset({"metadata"}))
    }


def _epoch_ms(value: Any, where: str) -> int:
    """An ISO 8601 date-time with its zone (Confluent's form, ``2026-11-23T04:00:00Z``) or ms since the
    epoch."""
    if isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value.strip())
        except ValueError:
            raise BadRequest(f"{where}: {value!r} is not an ISO 8601 date-time") from None
        if moment.tzinfo is None:
            raise BadRequest(f"{where}: {value!r} has no time zone (add Z or an offset such as +01:00)")
        return max(0, round(moment.timestamp() * 1000))
    return require_int(value, where, 0, INT64_MAX)


def _tp_json(tp: TopicPartition) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition}


# -- handlers ------------------------------------------------------------------------------------------


def _groups(request: web.Request) -> ClusterGroups:
    return state.node(request).cluster.groups


_INTEGER = re.compile(r"-?[0-9]{1,18}")
_CREATE_FIELDS = frozenset(
    {
        "name", "id", "format", "auto.offset.reset", "auto.commit.enable", "auto.commit.interval.ms",
        "fetch.min.bytes", "consumer.request.timeout.ms", "session.timeout.ms", "isolation.level",
        "partition.assignment.strategy",
    }
)  # fmt: skip


def _config_int(body: Mapping[str, Any], key: str, default: int) -> int:
    """A numeric config as a JSON number or a string of digits (Confluent's clients send strings)."""
    value = body.get(key, default)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        value = int(value)
    if type(value) is not int:
        raise InvalidConsumerConfig(f"{key} {value!r}: must be an integer")
    return value


def _config_bool(body: Mapping[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise InvalidConsumerConfig(f"{key} {value!r}: must be true or false")
    return value


async def create_instance(request: web.Request) -> web.Response:
    """Confluent's body, every field optional, numbers and booleans also as strings: ``name`` (``id``
    overrides it), ``format`` (binary | json | avro | jsonschema | protobuf, any case; binary by default, as
    Confluent), ``auto.offset.reset``,
    ``auto.commit.enable``, ``fetch.min.bytes``, ``consumer.request.timeout.ms``; and Kafka's
    ``auto.commit.interval.ms``, ``session.timeout.ms``, ``partition.assignment.strategy`` (``range`` |
    ``round_robin``). A field it does not know, or a value out of range: 422/42204 naming it."""
    group = _group(request)
    body = await _body(request, optional=True)
    unknown = sorted(set(body) - _CREATE_FIELDS)
    if unknown:
        raise InvalidConsumerConfig(f"unknown consumer configs {unknown}: use {sorted(_CREATE_FIELDS)}")
    field = "id" if body.get("id") is not None else "name"
    name = check_instance_name(body[field], field) if body.get(field) is not None else None
    session_timeout_ms = _config_int(body, "session.timeout.ms", SESSION_TIMEOUT_MS_DEFAULT)
    assignor = _config_str(body, "partition.assignment.strategy", "range").replace(
        "roundrobin", "round_robin"
    )
    if assignor not in ASSIGNORS:
        raise InvalidConsumerConfig(f"partition.assignment.strategy {assignor!r}: use {sorted(ASSIGNORS)}")
    defaults = DEFAULT_READS
    reads = ReadConfig(
        _config_int(body, "fetch.min.bytes", defaults.fetch_min_bytes),
        _config_int(body, "consumer.request.timeout.ms", defaults.request_timeout_ms),
        _config_bool(body, "auto.commit.enable", defaults.auto_commit),
        _config_int(body, "auto.commit.interval.ms", defaults.auto_commit_interval_ms),
        _isolation(body),
    )
    config = InstanceConfig(
        _config_str(body, "format", "binary").lower(),
        _config_str(body, "auto.offset.reset", "latest").lower(),
        session_timeout_ms,
        assignor,
        reads,
    )
    created = await _groups(request).call(
        GroupService.create_instance, group, name, config, client_host(request.remote)
    )
    # the instance's requests go best to the node coordinating the group
    base = (state.node(request).metadata.http_address(created.coordinator) or "").rstrip("/")
    uri = f"{base}/consumers/{quote(group)}/instances/{quote(created.instance_id)}"
    return web.json_response({"instance_id": created.instance_id, "base_uri": uri})


async def delete_instance(request: web.Request) -> web.Response:
    await _groups(request).call(GroupService.delete_instance, _group(request), _instance(request))
    return web.Response(status=204)


async def subscribe(request: web.Request) -> web.Response:
    group, instance = _group(request), _instance(request)
    body = await _body(request)
    reject_unknown(body, {"topics"}, "")
    topics = body.get("topics")
    if not isinstance(topics, list) or not 1 <= len(topics) <= SUBSCRIBED_TOPICS_MAX:
        raise BadRequest(f"topics: must be a list of 1 to {SUBSCRIBED_TOPICS_MAX} topic names")
    names = [check_user_topic_name(t, f"topics[{i}]") for i, t in enumerate(topics)]
    access.authorize_topics(request, DESCRIBE, names)
    await _groups(request).call(GroupService.subscribe, group, instance, names)
    return web.Response(status=204)


async def subscription(request: web.Request) -> web.Response:
    topics = await _groups(request).call(GroupService.subscription, _group(request), _instance(request))
    return web.json_response({"topics": topics})


async def unsubscribe(request: web.Request) -> web.Response:
    await _groups(request).call(GroupService.subscribe, _group(request), _instance(request), [])
    return web.Response(status=204)


async def assignments(request: web.Request) -> web.Response:
    assignment = await _groups(request).call(GroupService.assignment, _group(request), _instance(request))
    return web.json_response(
        {"partitions": [_tp_json(tp) for tp in assignment.partitions], "generation": assignment.generation},
        headers={GENERATION_HEADER: str(assignment.generation)},
    )


async def seek(request: web.Request) -> web.Response:
    """Confluent's body: ``offsets`` (``{topic, partition, offset, metadata?}``: the next offset to read)
    and/or ``timestamps`` (``{topic, partition, timestamp, metadata?}``: from the first record at or after
    the time, an ISO 8601 date-time with its zone or ms since the epoch; at the end when none is that
    late)."""
    group, instance = _group(request), _instance(request)
    body = await _body(request)
    reject_unknown(body, {"offsets", "timestamps"}, "")
    if body.get("offsets") is None and body.get("timestamps") is None:
        raise BadRequest("offsets or timestamps: at least one is required")
    groups = _groups(request)
    times = _timestamps(body) if body.get("timestamps") is not None else None
    offsets = _offsets(body, frozenset({"metadata"})) if body.get("offsets") is not None else None
    access.authorize_topics(request, DESCRIBE, (tp.topic for part in (times, offsets) for tp in part or ()))
    if times is not None:
        await groups.call(GroupService.seek_to_times, group, instance, times)
    if offsets is not None:
        await groups.call(GroupService.seek, group, instance, offsets)
    return web.Response(status=204)


async def _seek_to(request: web.Request, end: bool) -> web.Response:
    group, instance = _group(request), _instance(request)
    body = await _body(request)
    reject_unknown(body, {"partitions"}, "")
    partitions = _partitions(body)
    access.authorize_topics(request, DESCRIBE, (tp.topic for tp in partitions))
    await _groups(request).call(GroupService.seek_to, group, instance, partitions, end)
    return web.Response(status=204)


async def seek_beginning(request: web.Request) -> web.Response:
    return await _seek_to(request, end=False)


async def seek_end(request: web.Request) -> web.Response:
    return await _seek_to(request, end=True)


async def records(request: web.Request) -> web.StreamResponse:
    """Records of every assigned partition from the instance's positions; a heartbeat. Waits up to
    ``timeout`` (default: the instance's ``consumer.request.timeout.ms``) until ``fetch.min.bytes`` came;
    with nothing assigned yet, for a rebalance to assign something. With ``generation`` (the one the
    member last saw), a rebalance since is answered 409/40905 instead of records. An ``Accept`` naming the
    other format's type than the instance's is refused 406/40601 before anything is read."""
    timeout_ms = query_int(request.query, "timeout", None, 0, RECORDS_TIMEOUT_MS_MAX)
    max_bytes = query_int(request.query, "max_bytes", RECORDS_MAX_BYTES_DEFAULT, 1, RECORDS_MAX_BYTES_MAX)
    check(max_bytes is not None, "max_bytes has a default")
    generation = query_int(request.query, "generation", None, 0, 2**31 - 1)
    accept = request.headers.get("Accept")
    asked = next((f for f, media in EMBEDDED_TYPES.items() if negotiation.names(accept, media)), None)

    def may_read(topics: Sequence[str]) -> None:
        access.authorize_topics(request, READ, topics)

    # the answer's bytes in the listener's budget, from before it is read until written out (api.answers)
    hold, max_bytes = await answers.answer_room(request, max_bytes or 1)
    try:
        fetched = await _groups(request).records(
            _group(request),
            _instance(request),
            timeout_ms,
            max_bytes,
            generation,
            asked,
            authorize=may_read if access.enforced(request) else None,  # no call for a subscription otherwise
        )
        size = sum(len(part.data) for part in fetched.parts)
        await hold.settle(size)
        media = state.answer_type(request)
        if asked is None and media != PLAIN_JSON:  # */*, none: the type of the instance's own format
            media = EMBEDDED_TYPES[fetched.format]
        headers = {GENERATION_HEADER: str(fetched.generation), "Content-Type": media}
        if fetched.format in SCHEMA_TYPES:
            rows = iter([rows_text(await _schema_rows(request, fetched))])
            return await answers.streamed(request, hold, size, answers.json_array(rows, False), headers)
        rows = _rows(fetched)
        return await answers.streamed(
            request, hold, size, answers.json_array(rows, size > RENDER_INLINE_BYTES_MAX), headers
        )
    except BaseException:
        hold.give_back()
        raise


async def _schema_rows(request: web.Request, fetched: ConsumerRecords) -> list[str]:
    """The rows of a schema format's instance (``api.typed_records``). A partition whose records stop at
    one that does not decode has its position set back to that record, so its next read starts there, as
    Confluent's consumer's poll fails at it; when no record came before one, the read is that failure."""
    parts = [
        (part.tp.topic, part.tp.partition, records)
        for part in fetched.parts
        for records in [[r for batch in by_batch(part.data, part.offset, part.aborted) for r in batch]]
    ]
    rendered = await typed_records.render(request.app[typed_records.SCHEMAS], fetched.format, parts)
    if rendered.undecodable:
        back = {TopicPartition(u.topic, u.partition): u.offset for u in rendered.undecodable}
        await _groups(request).call(GroupService.seek, _group(request), _instance(request), back)
        if not rendered.rows:
            raise rendered.undecodable[0].error()
    return rendered.rows


def _rows(fetched: ConsumerRecords) -> Iterator[list[bytes]]:
    """The JSON rows of the records, a batch at a time (``api.answers.json_array``)."""
    flavour = Flavour(fetched.format)
    for part in fetched.parts:
        batches = rows_by(part.data, part.offset, part.aborted)
        yield from rows_of(part.tp.topic, part.tp.partition, batches, flavour)


async def commit(request: web.Request) -> web.Response:
    """``{"offsets": [{"topic", "partition", "offset", "metadata"?}], "generation"?}`` (Redpanda's
    ``partitions`` is the same list); each offset is the next one to read, stored as given (as Redpanda
    and Kafka's OffsetCommit; Confluent adds 1), with its ``metadata`` string (``GET`` answers it).
    Without offsets: the positions of every assigned partition (what was fetched). Fenced by the
    coordinator, then committed on each partition's leader (where ``GET /consumers/{group}/offsets``
    reads them). Answers 200 ``[]``, as Confluent."""
    group, instance = _group(request), _instance(request)
    body = await _body(request, optional=True)
    reject_unknown(body, {"offsets", "partitions", "generation"}, "")
    if body.get("offsets") is not None and body.get("partitions") is not None:
        raise BadRequest("offsets and partitions are the same list: send one")
    generation = None if body.get("generation") is None else require_int(body["generation"], "generation")
    field = "partitions" if body.get("partitions") is not None else "offsets"
    offsets = _offsets(body, frozenset({"metadata"}), field) if body.get(field) else None
    metadata = _metadata(body, field) if offsets is not None else {}
    groups = _groups(request)
    if offsets is not None:
        access.authorize_topics(request, READ, (tp.topic for tp in offsets))
    elif access.enforced(request):  # the positions: of the topics it subscribed
        access.authorize_topics(request, READ, await groups.call(GroupService.subscription, group, instance))
    await groups.call(GroupService.commit, group, instance, offsets, generation, metadata or None)
    return web.json_response([])


def _metadata(body: Mapping[str, Any], field: str) -> dict[TopicPartition, str]:
    """The ``metadata`` strings of a commit's entries (checked by ``_offsets`` first): kept with their
    offsets, as a Kafka client's (its bound is the partitions' rule, ``commands.check_offset_metadata``)."""
    found = {}
    for i, entry in enumerate(body[field]):
        text = entry.get("metadata")
        if text is None:
            continue
        if not isinstance(text, str):
            raise BadRequest(f"{field}[{i}].metadata: must be a string")
        if text:
            found[_topic_partition(entry, f"{field}[{i}]")] = text
    return found


async def committed(request: web.Request) -> web.Response:
    """Committed offsets of the given partitions (``?topic=&partition=``, or a Confluent-style body
    ``{"partitions": [...]}``), by default of every assigned partition."""
    group, instance = _group(request), _instance(request)
    wanted: list[TopicPartition] | None = None
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
    access.authorize_topics(request, DESCRIBE, (tp.topic for tp in wanted or ()))
    rows = await _groups(request).call(GroupService.committed, group, instance, wanted)
    shown = [row for row in rows if access.allowed(request, access.TOPIC, DESCRIBE, row.tp.topic)]
    return web.json_response(
        {"offsets": [{**_tp_json(row.tp), "offset": row.offset, "metadata": row.metadata} for row in shown]}
    )


# -- admin ---------------------------------------------------------------------------------------------


# Kafka's ListGroups: every group to whom may DESCRIBE the cluster, else those it may DESCRIBE
LIST_GROUPS_NEEDS = "lists only the groups the caller may DESCRIBE (every one with DESCRIBE cluster)"


async def list_groups(request: web.Request) -> web.Response:
    """Every group (with members, or empty for less than 7 days), asking the leader of each
    ``__consumer_groups`` partition (or only partition ``coordinator_partition``); with ACLs enforced,
    those the caller may see (``LIST_GROUPS_NEEDS``)."""
    groups = _groups(request)
    only = query_int(request.query, "coordinator_partition", None, 0, 2**31 - 1)
    count = await groups.call(GroupService.coordinator_partitions)
    if only is not None and only >= count:
        raise UnknownPartition(GROUPS_TOPIC, only)
    wanted = range(count) if only is None else [only]
    listed = await asyncio.gather(*(groups.call(GroupService.list_groups, p) for p in wanted))
    every = access.allowed(request, access.CLUSTER, DESCRIBE, CLUSTER_NAME)
    shown = (s for part in listed for s in part if every or access.allowed(request, GROUP, DESCRIBE, s.group))
    summaries = sorted(shown, key=lambda s: s.group)
    return web.json_response({"groups": [asdict(s) for s in summaries]})  # a GroupSummary each


def _partition_json(row: MemberPartition) -> dict[str, Any]:
    return {
        **_tp_json(row.tp),
        "position": row.position,
        "committed_offset": row.committed_offset,
        "end_offset": row.end_offset,
        "lag": row.lag,
    }


async def describe_group(request: web.Request) -> web.Response:
    """Members, their partitions, positions, committed offsets and lag (end offset - committed offset;
    null while nothing is committed); ``unassigned``: the partitions of its topics no member holds (all
    of them once the last member left: the group stays, empty, for 7 days). Served by the group's
    coordinator."""
    described = await _groups(request).call(GroupService.describe, _group(request))
    members = [
        {
            "instance_id": member.instance_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "topics": list(member.topics),
            "partitions": [_partition_json(row) for row in member.partitions],
        }
        for member in described.members
    ]
    unassigned = [_partition_json(row) for row in described.unassigned]
    return web.json_response(
        {**asdict(described.summary), "members": members, "unassigned": unassigned, "lag": described.lag}
    )


async def delete_group(request: web.Request) -> web.Response:
    """Kafka's DeleteGroups: an empty group and its committed offsets; 409/40916 while a member of either
    door is live. Served by the group's coordinator."""
    deleted = await _groups(request).call(GroupService.delete_group, _group(request))
    return web.json_response({"group": deleted.group, "offsets_deleted": deleted.offsets_deleted})


_GROUP = group_path.template  # as the clients build them (raftlog_contract)
_INSTANCE = instance_path.template
_CONSUMER_TYPES = (KAFKA_V2, "application/json")
_SCHEMA_ANSWERS = tuple((media, "FetchResponse") for media in SCHEMA_FORMATS.values())
_SEEK = needs(access.group(READ), in_handler="DESCRIBE topic: each topic of the body (Kafka's ListOffsets)")

ROUTES: tuple[Operation, ...] = (
    Operation(
        "POST", _GROUP, create_instance, "createConsumer",
        "Create a consumer instance in a group (its coordinator holds it)", "client",
        body="CreateConsumerRequest", body_types=_CONSUMER_TYPES, ok_schema="CreatedConsumer",
        errors=(409, 415, 422, 504, 507), write=True,
        access=needs(access.group(READ)),
    ),
    Operation(
        "DELETE", _INSTANCE, delete_instance, "deleteConsumer", "Remove a consumer instance (rebalances)",
        "client", ok_status=204, errors=(404, 504, 507), write=True,
        access=needs(access.group(READ)),
    ),
    Operation(
        "POST", f"{_INSTANCE}/subscription", subscribe, "subscribe", "Subscribe to topics (rebalances)",
        "client", body="SubscriptionRequest", body_types=_CONSUMER_TYPES, ok_status=204,
        errors=(404, 415, 504, 507), write=True,
        access=needs(access.group(READ), in_handler="DESCRIBE topic: each topic subscribed"),
    ),
    Operation(
        "GET", f"{_INSTANCE}/subscription", subscription, "getSubscription", "Subscribed topics", "client",
        ok_schema="Subscription", errors=(404,),
        access=needs(access.group(READ)),
    ),
    Operation(
        "DELETE", f"{_INSTANCE}/subscription", unsubscribe, "unsubscribe", "Unsubscribe (rebalances)",
        "client", ok_status=204, errors=(404, 504, 507), write=True,
        access=needs(access.group(READ)),
    ),
    Operation(
        "GET", f"{_INSTANCE}/assignments", assignments, "getAssignments",
        "Partitions assigned to the instance and the group's generation", "client",
        ok_schema="Assignments", errors=(404,),
        access=needs(access.group(READ)),
    ),
    Operation(
        "POST", f"{_INSTANCE}/positions", seek, "seek",
        "Set the next offset to fetch, or the first at or after a time", "client",
        body="SeekRequest", body_types=_CONSUMER_TYPES, ok_status=204, errors=(404, 409, 415),
        access=_SEEK,
    ),
    Operation(
        "POST", f"{_INSTANCE}/positions/beginning", seek_beginning, "seekToBeginning",
        "Fetch from the first offset of the partitions", "client", body="PartitionsRequest",
        body_types=_CONSUMER_TYPES, ok_status=204, errors=(404, 409, 415),
        access=_SEEK,
    ),
    Operation(
        "POST", f"{_INSTANCE}/positions/end", seek_end, "seekToEnd", "Fetch only records written from now on",
        "client", body="PartitionsRequest", body_types=_CONSUMER_TYPES, ok_status=204,
        errors=(404, 409, 415),
        access=_SEEK,
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
        ok_schema="FetchResponse", errors=(404, 406, 409, 429), long_poll=True, quota=CONSUMER_BYTE_RATE,
        ok_type=BINARY_V2,
        ok_alternatives=((JSON_V2, "FetchResponse"), *_SCHEMA_ANSWERS),
        access=needs(access.group(READ), in_handler="READ topic: each topic subscribed and assigned"),
    ),
    Operation(
        "POST", f"{_INSTANCE}/offsets", commit, "commitConsumerOffsets",
        "Commit offsets of assigned partitions (fenced by generation)", "client",
        body="ConsumerCommitRequest", body_types=_CONSUMER_TYPES, ok_schema="CommitAnswer",
        errors=(404, 409, 415, 504), write=True,
        access=needs(
            access.group(READ), in_handler="READ topic: each topic committed (no body: each subscribed)"
        ),
    ),
    Operation(
        "GET", f"{_INSTANCE}/offsets", committed, "getConsumerOffsets", "The group's committed offsets",
        "client",
        query=(
            Param("topic", "string", "one topic (with partition)"),
            Param("partition", "integer", "one partition (with topic)", minimum=0, maximum=2**31 - 1),
        ),
        ok_schema="ConsumerOffsets", errors=(404,),
        access=needs(
            access.group(DESCRIBE), in_handler="DESCRIBE topic: the topic asked for; others' offsets left out"
        ),
    ),
    Operation(
        "GET", CONSUMER_GROUPS_PATH, list_groups, "listConsumerGroups", "Consumer groups with members",
        "admin",
        query=(
            Param(
                "coordinator_partition", "integer", "only the groups of this __consumer_groups partition",
                minimum=0, maximum=2**31 - 1,
            ),
        ),
        ok_schema="ConsumerGroups", errors=(404,),
        access=needs(in_handler=LIST_GROUPS_NEEDS),
    ),
    Operation(
        "GET", "/v1/consumer-groups/{group}", describe_group, "describeConsumerGroup",
        "Members, assignments, positions, committed offsets and lag of a group", "admin",
        ok_schema="ConsumerGroup", errors=(404,),
        access=needs(access.group(DESCRIBE)),
    ),
    Operation(
        "DELETE", "/v1/consumer-groups/{group}", delete_group, "deleteConsumerGroup",
        "Delete an empty group and its committed offsets", "admin",
        ok_schema="DeletedGroup", errors=(404, 409), write=True,
        access=needs(access.group(DELETE)),
    ),
)  # fmt: skip
