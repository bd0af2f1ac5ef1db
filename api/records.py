"""Records in and out (Confluent REST v2 style): produce, fetch, offsets and committed consumer offsets.

Handlers parse, decide the partition (``api.routing``), call the cluster-wide data service (which runs
each call on the partition's leader, here or on another node) and render. A produce's records are
encoded into a batch once, where they enter; a fetch takes its answer's room in the listener's budget
first (``api.answers``), gets the stored batches from the leader and decodes and renders them here a slice
at a time as the client reads them, off the event loop when they are large.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api import access, answers, errors, state, typed_records
from api.access import READ
from api.columnar import Columnar, columnar_encoding, encode_columnar
from api.errors import BadRequest
from api.produce_encoding import (
    FAST_INLINE_BYTES_MAX,
    FAST_INLINE_RECORDS_MAX,
    EncodedProduce,
    encode_fast,
    encode_json_produce,
    encode_produce,
)
from api.rendering import rows_of, rows_text
from api.routing import RoundRobin
from api.schemas import (
    INT64_MAX,
    Flavour,
    OffsetCommit,
    batch_produced_answer,
    check_group,
    dump_json,
    is_record_batch,
    parse_commit_offsets,
    parse_delete_records,
    produce_answer,
    produce_entry,
    produce_error_entry,
    query_bool,
    query_int,
    query_str,
    record_flavour,
    request_flavour,
    require_json_body,
)
from partitions.consumers.protocol import GroupService
from partitions.data.service import DataService, FetchedBatches, GroupOffset, Producer
from partitions.errors import UnknownPartition
from partitions.metadata.service import AdminService
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.errors import InvariantViolation, RaftlogError, check
from raftlog.storage.batch import BatchFormatError, Record
from raftlog.storage.batch_reads import BatchRows, batches_end, records_by_batch, records_from, rows_by_batch
from raftlog_contract import HIGH_WATERMARK_HEADER, LEADER_HEADER, RECORD_BATCH

FETCH_TIMEOUT_MS_MAX = 60_000
FETCH_MAX_BYTES_DEFAULT = 1024 * 1024
FETCH_MAX_BYTES_MAX = 64 * 1024 * 1024
READS_PAST_COMPACTED_MAX = 64  # record-less compacted batches one fetch reads past
RENDER_INLINE_BYTES_MAX = 64 * 1024  # a fetch answer larger than this is decoded and rendered on a thread

ROUND_ROBIN = web.AppKey("raftlog_round_robin", RoundRobin)


@dataclass(frozen=True, slots=True)
class Failure:
    """One part of a multi-partition request that failed: the HTTP answer it would have had alone."""

    status: int
    payload: dict[str, Any]
    headers: dict[str, str]

    @classmethod
    def of(cls, error: RaftlogError) -> Failure:
        headers = {LEADER_HEADER: ""} if isinstance(error, NotLeader | NoLeader) else {}
        return cls(errors.lookup(error).status, errors.body(error), headers)

    def response(self, leader: str) -> web.Response:
        headers = {LEADER_HEADER: leader, **self.headers}
        if self.status == 503:
            headers.setdefault("Retry-After", str(errors.RETRY_AFTER_S))
        return web.json_response(self.payload, status=self.status, headers=headers)


async def _encoded(
    request: web.Request, flavour: Flavour, partition: int | None, partitions: int, keyless: int, now_ms: int
) -> EncodedProduce:
    """The request's JSON records as batches (``api.produce_encoding``): on the event loop through orjson
    when the body is small enough, else (or when orjson does not take it exactly) in the node's JSON worker
    process, itself working a body up to 64 KiB where it is."""
    body = await state.body(request)
    if len(body) <= FAST_INLINE_BYTES_MAX:
        encoded = encode_fast(
            body, flavour, partition, partitions, keyless, now_ms, records_max=FAST_INLINE_RECORDS_MAX
        )
        if encoded is not None:
            return encoded
    work = state.state(request).json_work
    return await work.run(encode_json_produce, body, flavour, partition, partitions, keyless, now_ms)


def _producer(request: web.Request) -> Producer:
    """Who produces a batch the caller encoded, as the leader's data plane checks them: the caller
    (anonymous when the node asks for no authentication); an HTTP producer has no transactional id, so a
    transactional batch is refused."""
    caller = request.get(state.CALLER)
    return Producer() if caller is None else Producer(caller.principal, caller.host)


def _check_produced(base_offset: int, end_offset: int, count: int) -> None:
    if end_offset - base_offset != count or base_offset < 0:
        raise InvariantViolation(f"leader produced offsets [{base_offset}, {end_offset}) for {count} records")


async def produce_to_partition(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    cluster = state.node(request).cluster
    settings = state.state(request).settings
    partition = state.partition(request)
    if is_record_batch(request.content_type):
        # one record batch the producer encoded: no JSON, no base64, nothing built per record here
        batch = await state.body(request)
        served = await cluster.data.run(
            DataService.produce_batch,
            topic,
            partition,
            batch,
            settings.produce_timeout_ms,
            _producer(request),
        )
        result = served.value
        count = result.end_offset - result.base_offset
        if count <= 0 or result.base_offset < 0:
            raise InvariantViolation(f"leader produced offsets [{result.base_offset}, {result.end_offset})")
        state.served_by(request, served.node)
        answer = batch_produced_answer(partition, result.base_offset, count)
        return web.Response(body=answer, content_type="application/json")
    schema_format = typed_records.media_format(request.content_type)
    now_ms = state.state(request).clock_ms()
    if schema_format is not None:  # records framed under a registered schema (api.typed_records)
        typed, key_id, value_id = await typed_records.produce_request(
            request, schema_format, topic, partition
        )
        encoded = encode_produce(typed, partition, 1, 0, now_ms)
    else:
        flavour = request_flavour(request.content_type)
        encoded = await _encoded(request, flavour, partition, 1, 0, now_ms)
    _, batch = encoded.batches[partition]
    served = await cluster.data.run(
        DataService.produce_batch, topic, partition, batch, settings.produce_timeout_ms, _producer(request)
    )
    _check_produced(served.value.base_offset, served.value.end_offset, encoded.count)
    state.served_by(request, served.node)
    answer = produce_answer(partition, served.value.base_offset, encoded.count)
    if schema_format is not None:
        answer = dump_json(typed_records.with_schema_ids(json.loads(answer), key_id, value_id))
    return web.Response(body=answer, content_type="application/json")


async def produce_to_topic(request: web.Request) -> web.Response:
    """Records are split by partition and each partition's part is one batch, produced concurrently on
    each partition's leader. One answer per record, in request order; if every record failed, the answer
    is the first failure's HTTP error so that a client retries as a whole."""
    node = state.node(request)
    settings = state.state(request).settings
    schema_format = typed_records.media_format(request.content_type)
    flavour = request_flavour(request.content_type) if schema_format is None else Flavour.JSON
    meta = await node.cluster.admin.call(AdminService.topic, request.match_info["topic"])
    keyless = request.app[ROUND_ROBIN].take(meta.partitions)
    now_ms = state.state(request).clock_ms()
    schema_ids: tuple[int | None, int | None] | None = None
    if schema_format is not None:  # records framed under a registered schema (api.typed_records)
        typed, *ids = await typed_records.produce_request(request, schema_format, meta.name, None)
        schema_ids = (ids[0], ids[1])
        encoded = encode_produce(typed, None, meta.partitions, keyless, now_ms)
    else:
        encoded = await _encoded(request, flavour, None, meta.partitions, keyless, now_ms)
    if encoded.unknown_partition is not None:
        raise UnknownPartition(meta.name, encoded.unknown_partition)
    groups = {partition: indexes for partition, (indexes, _) in encoded.batches.items()}
    producer = _producer(request)

    async def one(partition: int, indexes: list[int]) -> tuple[int, str] | Failure:
        try:
            batch = encoded.batches[partition][1]
            served = await node.cluster.data.run(
                DataService.produce_batch, meta.name, partition, batch, settings.produce_timeout_ms, producer
            )
        except RaftlogError as exc:
            return Failure.of(exc)
        _check_produced(served.value.base_offset, served.value.end_offset, len(indexes))
        return served.value.base_offset, served.node

    outcomes = await asyncio.gather(*(one(p, indexes) for p, indexes in groups.items()))
    failures = [o for o in outcomes if isinstance(o, Failure)]
    if len(failures) == len(outcomes):
        return failures[0].response(failures[0].headers.get(LEADER_HEADER, node.node_id))
    entries: list[dict[str, Any] | None] = [None] * encoded.count
    leaders: set[str] = set()
    for (partition, indexes), outcome in zip(groups.items(), outcomes, strict=True):
        if isinstance(outcome, Failure):
            code, message = outcome.payload["error_code"], str(outcome.payload.get("message", ""))
            for i in indexes:
                entries[i] = produce_error_entry(partition, code, message)
        else:
            base_offset, leader = outcome
            leaders.add(leader)
            for position, i in enumerate(indexes):
                entries[i] = produce_entry(partition, base_offset + position)
    check(all(e is not None for e in entries), "a produced record has no answer")
    state.served_by(request, ",".join(sorted(leaders)))
    if schema_ids is not None:
        return web.json_response(typed_records.with_schema_ids({"offsets": entries}, *schema_ids))
    return web.json_response({"offsets": entries})


ISOLATIONS = ("read_uncommitted", "read_committed")
ABORTED_HEADER = (
    "X-Raftlog-Aborted-Transactions"  # read_committed, raw batches: "producer_id:first_offset,..."
)


def isolation_of(query: Mapping[str, str]) -> bool:
    """Whether a read is read_committed (``?isolation=``; read_uncommitted by default)."""
    isolation = query.get("isolation", ISOLATIONS[0])
    if isolation not in ISOLATIONS:
        raise BadRequest(f"query parameter isolation: {isolation!r} is neither of {', '.join(ISOLATIONS)}")
    return isolation == "read_committed"


async def fetch(request: web.Request) -> web.StreamResponse:
    topic = request.match_info["topic"]
    partition = state.partition(request)
    committed = isolation_of(request.query)
    reads = DataService.fetch_stable if committed else DataService.fetch_batches
    offset = query_int(request.query, "offset", None, 0, INT64_MAX)
    if offset is None:
        raise BadRequest("query parameter offset: missing")
    timeout_ms = query_int(request.query, "timeout", 0, 0, FETCH_TIMEOUT_MS_MAX) or 0
    max_bytes = query_int(request.query, "max_bytes", FETCH_MAX_BYTES_DEFAULT, 1, FETCH_MAX_BYTES_MAX)
    check(max_bytes is not None, "max_bytes has a default")
    media = state.answer_type(request)
    data = state.node(request).cluster.data
    # the answer's bytes in the listener's budget, from before it is read until written out (api.answers)
    hold, max_bytes = await answers.answer_room(request, max_bytes or 1)
    try:
        served = await data.run(reads, topic, partition, offset, max_bytes, timeout_ms)
        for _ in range(READS_PAST_COMPACTED_MAX):
            # batches compaction left without a record at or past the offset are read past (at once), so a
            # reader going on from its last record + 1 always moves; raw batches are the client's to skip
            end = batches_end(served.value.data) if media != RECORD_BATCH else None
            # (and past batches holding no record for this reader: markers, aborted transactions)
            readable_end = served.value.last_stable_offset if committed else served.value.high_watermark
            if (
                end is None
                or end >= readable_end
                or _any_record(served.value.data, offset, served.value.aborted)
            ):
                break
            offset = end
            served = await data.run(reads, topic, partition, offset, max_bytes, 0)
        state.served_by(request, served.node)
        fetched = served.value
        await hold.settle(len(fetched.data))
        headers = {HIGH_WATERMARK_HEADER: str(fetched.high_watermark)}
        headers["Content-Type"] = media
        if committed and media == RECORD_BATCH:
            headers[ABORTED_HEADER] = ",".join(f"{p}:{first}" for p, first in fetched.aborted)
        size = len(fetched.data)
        if media == RECORD_BATCH:
            return await answers.streamed(request, hold, size, answers.of_bytes(fetched.data), headers, size)
        schema_format = typed_records.media_format(media)
        if schema_format is not None:  # decoded with the schemas their headers name (api.typed_records)
            parts = [(topic, partition, decode(fetched.data, offset, fetched.aborted))]
            rendered = await typed_records.render(request.app[typed_records.SCHEMAS], schema_format, parts)
            if rendered.undecodable and not rendered.rows:  # as Confluent's consumer: no record past it
                raise rendered.undecodable[0].error()
            body = answers.json_array(iter([rows_text(rendered.rows)]), False)
            return await answers.streamed(request, hold, size, body, headers)
        encoding = columnar_encoding(media)
        if encoding is None:
            rows = _rows(topic, partition, offset, fetched, record_flavour(media))
            body = answers.json_array(rows, size > RENDER_INLINE_BYTES_MAX)
            return await answers.streamed(request, hold, size, body, headers)
        # columns are encoded whole (one document): their bytes are held once encoded
        if size <= RENDER_INLINE_BYTES_MAX:
            columns = _columns(topic, partition, offset, fetched, encoding)
        else:
            columns = await asyncio.to_thread(_columns, topic, partition, offset, fetched, encoding)
        del fetched, served
        size = len(columns)
        await hold.settle(size)
        return await answers.streamed(request, hold, size, answers.of_bytes(columns), headers, size)
    except BaseException:
        hold.give_back()
        raise


def _columns(topic: str, partition: int, offset: int, fetched: FetchedBatches, encoding: Columnar) -> bytes:
    return encode_columnar(topic, partition, decode(fetched.data, offset, fetched.aborted), encoding)


def _rows(
    topic: str, partition: int, offset: int, fetched: FetchedBatches, flavour: Flavour
) -> Iterator[list[bytes]]:
    """The JSON rows of the fetched records, a batch at a time (``api.answers.json_array``)."""
    return rows_of(topic, partition, rows_by(fetched.data, offset, fetched.aborted), flavour)


def by_batch(data: bytes, offset: int, aborted: Sequence[tuple[int, int]] = ()) -> Iterator[list[Record]]:
    """``decode``'s records a batch at a time."""
    try:
        yield from records_by_batch(data, offset, aborted)
    except BatchFormatError as exc:
        raise InvariantViolation(f"fetched batches do not decode: {exc}") from exc


def rows_by(data: bytes, offset: int, aborted: Sequence[tuple[int, int]] = ()) -> Iterator[BatchRows]:
    """``by_batch``'s records as the C reader's plain rows (``rows_by_batch``), for the JSON answers."""
    try:
        yield from rows_by_batch(data, offset, aborted)
    except BatchFormatError as exc:
        raise InvariantViolation(f"fetched batches do not decode: {exc}") from exc


def _any_record(data: bytes, offset: int, aborted: Sequence[tuple[int, int]]) -> bool:
    """Whether the fetched batches hold a record for this reader, decoding no more than up to the first."""
    return any(records for records in by_batch(data, offset, aborted))


def decode(data: bytes, offset: int, aborted: Sequence[tuple[int, int]] = ()) -> list[Record]:
    """The producers' records of fetched batches from ``offset`` on, those of the ``aborted`` transactions
    (a read_committed read's) left out; the leader CRC-checked them when it read them."""
    try:
        return records_from(data, offset, aborted)
    except BatchFormatError as exc:
        raise InvariantViolation(f"fetched batches do not decode: {exc}") from exc


async def get_offsets(request: web.Request) -> web.Response:
    """The partition's first and next offsets; with ``?timestamp=MS``, the first offset whose record's
    timestamp is at or after it (Kafka's ``offsetsForTimes``): ``{"timestamp": MS, "offset": N,
    "record_timestamp": T}``, offset and record_timestamp null when no record is that late."""
    topic, partition = request.match_info["topic"], state.partition(request)
    data = state.node(request).cluster.data
    timestamp_ms = query_int(request.query, "timestamp", None, 0, INT64_MAX)
    if timestamp_ms is not None:
        found = await data.run(DataService.offset_for_timestamp, topic, partition, timestamp_ms)
        state.served_by(request, found.node)
        hit = found.value
        return web.json_response(
            {
                "timestamp": timestamp_ms,
                "offset": None if hit is None else hit.offset,
                "record_timestamp": None if hit is None else hit.timestamp_ms,
            }
        )
    served = await data.run(DataService.offsets, topic, partition)
    state.served_by(request, served.node)
    return web.json_response(
        {"beginning_offset": served.value.log_start_offset, "end_offset": served.value.high_watermark}
    )


async def delete_records(request: web.Request) -> web.Response:
    """Kafka's DeleteRecords for one partition: ``{"offset": N}`` moves its log start offset up to N (-1:
    its high watermark) on every replica, through its Raft group; reads below it answer 416 from then on.
    Answers ``{"beginning_offset": S}``, the log start offset then (at or below it: nothing changes)."""
    topic, partition = request.match_info["topic"], state.partition(request)
    require_json_body(request.content_type)
    offset = parse_delete_records(await state.json_body(request))
    timeout_ms = state.state(request).settings.produce_timeout_ms
    data = state.node(request).cluster.data
    served = await data.run(DataService.delete_records, topic, partition, offset, timeout_ms)
    state.served_by(request, served.node)
    return web.json_response({"beginning_offset": served.value})


async def commit_offsets(request: web.Request) -> web.Response:
    """Each (topic, partition) is committed on its leader (waiting for one while it moves); entries for
    the same partition in order."""
    node = state.node(request)
    require_json_body(request.content_type)
    group = check_group(request.match_info["group"])
    entries = parse_commit_offsets(await state.json_body(request))
    access.authorize_topics(request, READ, (entry.topic for entry in entries))  # before any is committed
    force = query_bool(request.query, "force", False)
    node.cluster.offsets.check_metadata(entry.metadata for entry in entries)  # before any is committed
    topics = sorted({entry.topic for entry in entries})
    for topic in topics:  # an unknown topic or partition is refused before the group records it
        count = (await node.cluster.admin.call(AdminService.topic, topic)).partitions
        for entry in entries:
            if entry.topic == topic and entry.partition >= count:
                raise UnknownPartition(topic, entry.partition)
    # recorded with the group (listed, described, deleted with it); a reset refused while it has members
    await node.cluster.groups.call(
        GroupService.note_commit, group, topics, any(e.reset for e in entries), force
    )
    by_partition: dict[tuple[str, int], list[OffsetCommit]] = {}
    for entry in entries:
        by_partition.setdefault((entry.topic, entry.partition), []).append(entry)

    async def one(commits: list[OffsetCommit]) -> Failure | None:
        for commit in commits:
            try:
                await node.cluster.offsets.commit(
                    group,
                    commit.topic,
                    commit.partition,
                    commit.offset,
                    commit.reset,
                    metadata=commit.metadata,
                )
            except RaftlogError as exc:
                return Failure.of(exc)
        return None

    outcomes = await asyncio.gather(*(one(commits) for commits in by_partition.values()))
    for outcome in outcomes:
        if outcome is not None:
            return outcome.response(outcome.headers.get(LEADER_HEADER, node.node_id))
    return web.Response(status=204)


async def committed_offsets(request: web.Request) -> web.Response:
    node = state.node(request)
    group = check_group(request.match_info["group"])
    topic = query_str(request.query, "topic")
    if topic is None:
        raise BadRequest("query parameter topic: missing")
    partition = query_int(request.query, "partition", None, 0, 2**31 - 1)
    meta = await node.cluster.admin.call(AdminService.topic, topic)
    if partition is not None and partition >= meta.partitions:
        raise UnknownPartition(topic, partition)
    wanted = range(meta.partitions) if partition is None else [partition]

    async def one(p: int) -> GroupOffset | Failure | None:
        try:
            return await node.cluster.offsets.committed(group, meta.name, p)
        except RaftlogError as exc:
            return Failure.of(exc)

    outcomes = await asyncio.gather(*(one(p) for p in wanted))
    rows = []
    for p, outcome in zip(wanted, outcomes, strict=True):
        if isinstance(outcome, Failure):
            return outcome.response(outcome.headers.get(LEADER_HEADER, node.node_id))
        if outcome is not None:
            rows.append(
                {"topic": meta.name, "partition": p, "offset": outcome.offset, "metadata": outcome.metadata}
            )
    return web.json_response({"offsets": rows})
