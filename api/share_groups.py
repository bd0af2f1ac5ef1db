"""Share groups (KIP-932) over HTTP: a member joins a share group subscribed to topics, acquires records
(each with its delivery count), acknowledges each ACCEPT, RELEASE or REJECT (or RENEWs its lock,
KIP-1222), and leaves.

Translated only: membership is the group coordinator's (``partitions.groups.share.coordinator``, asked
through ``GroupService.share_heartbeat`` on the node coordinating the group), records are the partition
leaders' (``partitions.data.share_records``, through the cluster-wide ``shares`` service): the same
coordinator and the same replicated share-partition state the Kafka door's ShareGroupHeartbeat, ShareFetch
and ShareAcknowledge use, so a Kafka share consumer and an HTTP one in one group share its records. Every
rule (locks and their expiry, delivery counts, the delivery limit, who holds a record, how many members)
is theirs. The door holds nothing between requests: a member is its id, kept alive by its calls (each a
heartbeat) within the group's session timeout; what it acquired and never acknowledged is delivered again
once its lock expires, or at once when it leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from aiohttp import web

from api import access, answers, state
from api.access import READ, needs
from api.consumers import _body, _group, _tp_json
from api.errors import BadRequest, lookup
from api.openapi import Operation, Param
from api.records import RENDER_INLINE_BYTES_MAX, by_batch
from api.rendering import rows_text
from api.schemas import OFFSETS_MAX, Flavour, query_int, reject_unknown, render_record, require_int
from api.schemas import require_object as _object
from partitions.consumers.protocol import GroupService, ShareMembership
from partitions.data.share_records import ShareService, check_reset
from partitions.groups.assignors import TopicPartition
from partitions.groups.coordinator import SUBSCRIBED_TOPICS_MAX
from partitions.groups.share.partition import ACCEPT, RECORD_LOCKS_MAX, REJECT, RELEASE, RENEW
from partitions.names import check_instance_name, check_user_topic_name
from partitions.peers.cluster import ShareAcquired
from partitions.security.acls import client_host
from partitions.security.quotas import CONSUMER_BYTE_RATE
from raftlog.errors import RaftlogError
from raftlog_contract import KAFKA_V2, share_group_path, share_member_path

ACQUIRE_RECORDS_DEFAULT = 500  # Kafka's max.poll.records
ACQUIRE_RECORDS_MAX = 1_000  # records one acquire may lock
ACQUIRE_TIMEOUT_MS_MAX = 30_000  # the longest an acquire waits for a record (the Kafka door's ShareFetch)
ACQUIRE_BYTES_DEFAULT = 1024 * 1024
ACQUIRE_BYTES_MAX = 64 * 1024 * 1024
ACK_TYPES = {"accept": ACCEPT, "release": RELEASE, "reject": REJECT, "renew": RENEW}
CLIENT_ID = "raftlog-http"


def _member(request: web.Request) -> str:
    return check_instance_name(request.match_info["member"], "member")


def _membership(answer: ShareMembership) -> dict[str, Any]:
    return {
        "member_id": answer.member_id,
        "member_epoch": answer.member_epoch,
        "assignment": [_tp_json(tp) for tp in answer.assignment],
        "heartbeat_interval_ms": answer.heartbeat_interval_ms,
        "session_timeout_ms": answer.session_timeout_ms,
    }


async def _heartbeat(
    request: web.Request, group: str, member: str, epoch: int | None, topics: list[str] | None = None
) -> ShareMembership:
    groups = state.node(request).cluster.groups
    host = client_host(request.remote)
    return await groups.call(GroupService.share_heartbeat, group, member, epoch, topics, CLIENT_ID, host)


async def join(request: web.Request) -> web.Response:
    """``{"topics": [...]}``: a new member (its id made here) subscribed to the topics, each of which
    the caller may DESCRIBE. Answers its id, epoch, assignment (its share of its topics' partitions) and
    ``base_uri``, where its requests go."""
    group = _group(request)
    body = await _body(request)
    reject_unknown(body, {"topics"}, "")
    topics = body.get("topics")
    if not isinstance(topics, list) or not 1 <= len(topics) <= SUBSCRIBED_TOPICS_MAX:
        raise BadRequest(f"topics: must be a list of 1 to {SUBSCRIBED_TOPICS_MAX} topic names")
    names = sorted({check_user_topic_name(t, f"topics[{i}]") for i, t in enumerate(topics)})
    access.authorize_topics(request, access.DESCRIBE, names)
    member = uuid.uuid4().hex
    answer = await _heartbeat(request, group, member, 0, names)
    return web.json_response({**_membership(answer), "base_uri": share_member_path(group, member)})


async def heartbeat(request: web.Request) -> web.Response:
    """The member stays (its session starts again) and is told its epoch and assignment."""
    return web.json_response(_membership(await _heartbeat(request, _group(request), _member(request), None)))


async def leave(request: web.Request) -> web.Response:
    """The member leaves the group; what it holds is released at once (delivered again, its delivery
    counted), as a Kafka share consumer's close does."""
    group, member = _group(request), _member(request)
    answer = await _heartbeat(request, group, member, -1)
    await _release(request, group, member, answer.assignment)
    return web.Response(status=204)


async def _release(
    request: web.Request, group: str, member: str, partitions: tuple[TopicPartition, ...]
) -> None:
    shares = state.node(request).cluster.shares

    async def one(tp: TopicPartition) -> None:
        with contextlib.suppress(RaftlogError):  # not released now: its locks expire instead
            await shares.call(ShareService.release_member, group, member, tp.topic, tp.partition)

    await asyncio.gather(*(one(tp) for tp in partitions))


async def acquire(request: web.Request) -> web.StreamResponse:
    """A heartbeat, then records of the member's partitions acquired for it: at most ``max_records`` and
    about ``max_bytes`` (at least one batch), waiting up to ``timeout`` ms for one when none is there.
    ``format`` renders them (binary: base64; json). ``share.auto.offset.reset``: where a group new to a
    partition starts (latest, earliest or by_duration:<ISO-8601 duration>); when the request names
    none, the group's config ``share.auto.offset.reset``, else latest, Kafka's default."""
    group, member = _group(request), _member(request)
    max_records = query_int(request.query, "max_records", ACQUIRE_RECORDS_DEFAULT, 1, ACQUIRE_RECORDS_MAX)
    max_bytes = query_int(request.query, "max_bytes", ACQUIRE_BYTES_DEFAULT, 1, ACQUIRE_BYTES_MAX)
    timeout_ms = query_int(request.query, "timeout", 0, 0, ACQUIRE_TIMEOUT_MS_MAX)
    flavour_name = request.query.get("format", "binary")
    if flavour_name not in ("binary", "json"):
        raise BadRequest(f"format {flavour_name!r}: use binary or json")
    flavour = Flavour(flavour_name)
    reset = request.query.get("share.auto.offset.reset")  # None: the group's config, else latest
    if reset is not None:
        check_reset(reset)
    answer = await _heartbeat(request, group, member, None)
    access.authorize_topics(request, READ, (tp.topic for tp in answer.assignment))
    # the answer's bytes in the listener's budget, from before it is read until written out (api.answers)
    hold, max_bytes = await answers.answer_room(request, max_bytes or 1)
    try:
        got = await state.node(request).cluster.shares.acquire(
            group, member, answer.assignment, max_records or 1, max_bytes, timeout_ms or 0, reset
        )
        size = sum(len(a.fetched.data) for a in got if a.fetched)
        await hold.settle(size)
        errors = [{**_tp_json(a.tp), **_error(a.error)} for a in got if a.error is not None]
        lock_ms = state.node(request).local.shares.settings.lock_ms
        # {"member_epoch", "lock_ms", "records", "errors"}, the records written a slice at a time
        head = json.dumps({"member_epoch": answer.member_epoch, "lock_ms": lock_ms})
        before = head[:-1] + ', "records": ['
        after = f'], "errors": {json.dumps(errors)}}}'
        body = answers.json_array(_rows(got, flavour), size > RENDER_INLINE_BYTES_MAX, before, after)
        return await answers.streamed(request, hold, size, body, {"Content-Type": "application/json"})
    except BaseException:
        hold.give_back()
        raise


def _rows(got: list[ShareAcquired], flavour: Flavour) -> Iterator[list[bytes]]:
    """The acquired records (only those: a batch read may hold others), each with its delivery count, as
    JSON rows a batch at a time (``api.answers.json_array``)."""
    for part in got:
        if part.fetched is None or not part.fetched.acquired:
            continue
        counts = {o: d for first, last, d in part.fetched.acquired for o in range(first, last + 1)}
        for records in by_batch(part.fetched.data, min(counts)):
            rows = []
            for record in records:
                delivery = counts.get(record.offset)
                if delivery is not None:
                    row = render_record(part.tp.topic, part.tp.partition, record, flavour)
                    rows.append(json.dumps({**row, "delivery_count": delivery}))
            yield rows_text(rows)


def _error(error: BaseException) -> dict[str, Any]:
    return {"error_code": lookup(error).error_code, "error": str(error)}


def _acknowledgements(body: Mapping[str, Any]) -> dict[TopicPartition, list[tuple[int, int, int]]]:
    items = body.get("acknowledgements")
    if not isinstance(items, list) or not 1 <= len(items) <= OFFSETS_MAX:
        raise BadRequest(f"acknowledgements: must be a list of 1 to {OFFSETS_MAX} objects")
    by_partition: dict[TopicPartition, list[tuple[int, int, int]]] = {}
    fields = {"topic", "partition", "offset", "first_offset", "last_offset", "type"}
    for i, item in enumerate(items):
        where = f"acknowledgements[{i}]"
        entry = _object(item, where)
        reject_unknown(entry, fields, where)
        for key in ("topic", "partition", "type"):
            if key not in entry:
                raise BadRequest(f"{where}.{key}: missing")
        tp = TopicPartition(
            check_user_topic_name(entry["topic"], f"{where}.topic"),
            require_int(entry["partition"], f"{where}.partition", maximum=2**31 - 1),
        )
        kind = ACK_TYPES.get(str(entry["type"]).lower())
        if kind is None:
            raise BadRequest(f"{where}.type: {entry['type']!r}, use one of {sorted(ACK_TYPES)}")
        if "offset" in entry:
            if "first_offset" in entry or "last_offset" in entry:
                raise BadRequest(f"{where}: offset, or first_offset and last_offset, not both")
            first = last = require_int(entry["offset"], f"{where}.offset")
        elif "first_offset" in entry and "last_offset" in entry:
            first = require_int(entry["first_offset"], f"{where}.first_offset")
            last = require_int(
                entry["last_offset"], f"{where}.last_offset", first, first + RECORD_LOCKS_MAX - 1
            )
        else:
            raise BadRequest(f"{where}: offset, or first_offset and last_offset, missing")
        by_partition.setdefault(tp, []).append((first, last, kind))
    return by_partition


async def acknowledge(request: web.Request) -> web.Response:
    """``{"acknowledgements": [{topic, partition, offset | first_offset and last_offset, type}]}``, type
    accept, release, reject or renew (the record stays the member's, its lock renewed for the group's
    lock duration): each partition's on its leader, all of a partition's or none (a record the
    member does not hold: its lock expired, or it was acknowledged: 40931). Answers each partition's
    outcome; when every partition was refused, the first refusal is the answer."""
    group, member = _group(request), _member(request)
    body = await _body(request)
    reject_unknown(body, {"acknowledgements"}, "")
    wanted = _acknowledgements(body)
    access.authorize_topics(request, READ, (tp.topic for tp in wanted))
    shares = state.node(request).cluster.shares

    async def one(tp: TopicPartition, acks: list[tuple[int, int, int]]) -> dict[str, Any]:
        batches = tuple((first, last, (kind,)) for first, last, kind in sorted(acks))
        try:
            await shares.call(ShareService.acknowledge, group, member, tp.topic, tp.partition, batches)
        except RaftlogError as exc:
            return {**_tp_json(tp), "acknowledged": 0, "error": exc}
        return {**_tp_json(tp), "acknowledged": sum(la - f + 1 for f, la, _ in acks), "error": None}

    outcomes = await asyncio.gather(*(one(tp, acks) for tp, acks in sorted(wanted.items())))
    failed = [o["error"] for o in outcomes if o["error"] is not None]
    if failed and len(failed) == len(outcomes):
        raise failed[0]
    rows = [
        {**o, **(_error(o["error"]) if o["error"] is not None else {"error_code": None, "error": None})}
        for o in outcomes
    ]
    return web.json_response({"partitions": rows})


_GROUP = share_group_path.template
_MEMBER = share_member_path.template
_TYPES = (KAFKA_V2, "application/json")

ROUTES: tuple[Operation, ...] = (
    Operation(
        "POST", _GROUP, join, "joinShareGroup",
        "Join a share group subscribed to topics (a new member; its coordinator holds it)", "client",
        body="ShareJoinRequest", body_types=_TYPES, ok_schema="ShareMembership",
        errors=(400, 409, 415, 504), write=True,
        access=needs(access.group(READ), in_handler="DESCRIBE topic: each topic subscribed"),
    ),
    Operation(
        "GET", _MEMBER, heartbeat, "shareMemberHeartbeat",
        "A share group member's heartbeat: its epoch and assignment", "client",
        ok_schema="ShareMembership", errors=(404, 409, 504), write=True,
        access=needs(access.group(READ)),
    ),
    Operation(
        "DELETE", _MEMBER, leave, "leaveShareGroup",
        "Leave a share group; what the member holds is delivered again", "client",
        ok_status=204, errors=(404, 409, 504), write=True,  # 409: as its heartbeat (another protocol's group)
        access=needs(access.group(READ)),
    ),
    Operation(
        "POST", f"{_MEMBER}/records", acquire, "acquireShareRecords",
        "Acquire records of the member's partitions (locked until acknowledged or expired; long poll)",
        "client",
        query=(
            Param("max_records", "integer", "records to acquire at most", minimum=1,
                  maximum=ACQUIRE_RECORDS_MAX),
            Param("max_bytes", "integer", "byte budget (at least one batch)", minimum=1,
                  maximum=ACQUIRE_BYTES_MAX),
            Param("timeout", "integer", "ms to wait for a record", minimum=0, maximum=ACQUIRE_TIMEOUT_MS_MAX),
            Param("format", "string", "how keys and values are rendered", enum=("binary", "json")),
            Param(
                "share.auto.offset.reset", "string", "where a group new to a partition starts: latest, "
                "earliest or by_duration:<ISO-8601 duration>; default: the group's config "
                "share.auto.offset.reset, else latest",
            ),
        ),
        ok_schema="ShareRecords", errors=(400, 404, 409, 429, 504), write=True, long_poll=True,
        quota=CONSUMER_BYTE_RATE,
        access=needs(access.group(READ), in_handler="READ topic: each topic assigned"),
    ),
    Operation(
        "POST", f"{_MEMBER}/acknowledgements", acknowledge, "acknowledgeShareRecords",
        "Accept, release, reject or renew the locks of acquired records (all of a partition's or none)",
        "client",
        body="ShareAcknowledgeRequest", body_types=_TYPES, ok_schema="ShareAcknowledged",
        errors=(400, 404, 409, 415, 504), write=True,
        access=needs(access.group(READ), in_handler="READ topic: each topic acknowledged"),
    ),
)  # fmt: skip
