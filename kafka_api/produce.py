"""Produce: each partition's record batch appended on this node as the partition's leader.

acks=all and acks=1 both answer once a majority has the batch (raftlog commits through Raft either way);
acks=0 gets no answer. A LogAppendTime topic's answer carries the leader's stamp. Partitions of one request
are proposed in the order they appear, and requests of one connection in the order they came (the server
starts their handlers in order, and the data plane proposes a partition's produces in the order they began):
a producer's pipelined batches keep their order. A batch is checked as strictly as any producer's
(``check_producer_batch``): exactly one RecordBatch v2 per partition; a transactional producer's batches
like any idempotent producer's (its transaction's end is the coordinator's, docs/decisions/
0019-transactions.md), once verified (KIP-890): the first batch of a transaction in a partition is written
only if its coordinator confirms that the partition is in the producer's ongoing transaction, else
INVALID_TXN_STATE; a transactional batch without the request's transactional id is INVALID_RECORD. A topic
the connection may not WRITE (``serve --enforce-acls``) is answered TOPIC_AUTHORIZATION_FAILED for each of
its partitions, nothing of it written; the others go on; a transactional producer's request whose connection
may not WRITE its transactional id is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition,
nothing written. A request's appends begin ``pacing.ITEMS_PER_TURN`` at a time, yielding to the event loop
between turns; the connection's next Produce begins its appends once this one began all of its own
(``Door.produce_order``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door, clamp_timeout
from kafka_api.errors import code_of
from kafka_api.pacing import Pacer
from partitions.errors import InvalidName, UnknownTopic
from partitions.security.acls import AclOperation, ResourceType
from partitions.transactions.service import TransactionService
from raftlog.errors import RaftlogError
from raftlog.storage.batch import BatchFormatError, decode_header

ACKS = (-1, 0, 1)
NO_OFFSET = -1


async def _unverified(
    door: Door, transactional_id: str | None, topic: str, part: Any
) -> tuple[ErrorCode, str] | None:
    """KIP-890's defence: a transactional batch is written only where its transaction is open already,
    or where the producer's coordinator confirms that the partition is in its ongoing transaction at that
    epoch; else the refusal (a write that outlived its transaction would open one no coordinator ends,
    holding the last stable offset back for ever). None: go on (a batch the leader will check and refuse
    if malformed, or a partition not led here, which the produce answers)."""
    records = part.records
    try:
        header = decode_header(records)
    except BatchFormatError:
        return None
    if not header.is_transactional or header.producer_id is None:
        return None
    if transactional_id is None:
        return ErrorCode.invalid_record, "a transactional batch needs the request's transactional id"
    epoch = header.producer_epoch or 0
    try:
        if await door.node.local.data.open_transaction(topic, part.index, header.producer_id):
            return None
    except RaftlogError:
        return None  # not led here: the produce answers NOT_LEADER_OR_FOLLOWER
    try:
        verified = await door.node.cluster.transactions.call(
            TransactionService.verify_partition,
            transactional_id,
            header.producer_id,
            epoch,
            topic,
            part.index,
        )
    except UnknownTopic:  # no transactional id has ever been coordinated: none holds this partition
        verified = False
    except InvalidName as exc:
        return ErrorCode.invalid_request, str(exc)
    except RaftlogError as exc:  # as Kafka answers a verification it could not make: retriable
        return ErrorCode.not_enough_replicas, f"the transaction's coordinator could not verify it: {exc}"
    if verified:
        return None
    return ErrorCode.invalid_txn_state, (
        f"{topic}-{part.index} is not in an ongoing transaction of {transactional_id!r} "
        f"(producer {header.producer_id}, epoch {epoch}): AddPartitionsToTxn first"
    )


async def produce(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "TopicProduceResponse")
    partition_cls = wire.sibling(cls, "PartitionProduceResponse")
    timeout_ms = clamp_timeout(wire.millis(body.timeout))
    refusal: tuple[ErrorCode, str] | None = None
    if body.acks not in ACKS:
        refusal = ErrorCode.invalid_required_acks, f"acks {body.acks}: must be -1 (all), 0 or 1"
    elif body.transactional_id is not None and not door.allows(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    ):  # Kafka's: a transactional producer's every partition refused
        refused = door.refusal(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id)
        refusal = code_of(refused), str(refused)
    data = door.node.local.data
    calls: list[tuple[str, int, asyncio.Future[Any] | tuple[ErrorCode, str]]] = []
    pacer = Pacer()
    async with door.produce_order:
        for topic in body.topic_data:
            denied = refusal
            if denied is None and not door.allows(AclOperation.WRITE, ResourceType.TOPIC, topic.name):
                refused = door.refusal(AclOperation.WRITE, ResourceType.TOPIC, topic.name)
                denied = code_of(refused), str(refused)
            for part in topic.partition_data:
                if denied is not None:
                    calls.append((topic.name, part.index, denied))
                elif part.records is None:
                    calls.append((topic.name, part.index, (ErrorCode.invalid_record, "no records")))
                elif (
                    unverified := await _unverified(door, body.transactional_id, topic.name, part)
                ) is not None:
                    calls.append((topic.name, part.index, unverified))
                else:
                    appending = data.produce_batch(
                        topic.name, part.index, part.records, timeout_ms
                    )  # bytes, not copied
                    calls.append((topic.name, part.index, asyncio.ensure_future(appending)))
                await pacer.step()
    pending = [c for _, _, c in calls if isinstance(c, asyncio.Future)]
    if pending:
        await asyncio.wait(pending)
    if body.acks == 0:  # no answer; a refusal is the client's loss, as with Kafka (which also closes)
        for appended in pending:
            if not appended.cancelled():
                appended.exception()  # retrieved: not logged as "never retrieved" when it is collected
        return None
    by_topic: dict[str, list[Any]] = {}
    for name, index, call in calls:
        code, message, base, appended_at, start = ErrorCode.none, None, NO_OFFSET, None, NO_OFFSET
        if isinstance(call, tuple):
            code, message = call
        elif call.exception() is not None:
            error = call.exception()
            assert error is not None
            code, message = code_of(error), str(error)
        else:
            base, start = call.result().base_offset, call.result().log_start_offset
            append_ms = call.result().log_append_time_ms
            appended_at = None if append_ms is None else wire.timestamp(append_ms)
        by_topic.setdefault(name, []).append(
            wire.build(
                partition_cls,
                index=index,
                error_code=code,
                base_offset=base,
                log_append_time=appended_at,  # None (-1): CreateTime, or a duplicate stored CreateTime
                log_start_offset=start,
                record_errors=(),
                error_message=message,
            )
        )
        await pacer.step()
    responses = tuple(
        wire.build(topic_cls, name=name, partition_responses=tuple(parts)) for name, parts in by_topic.items()
    )
    return wire.build(cls, responses=responses, throttle_time=wire.NO_THROTTLE)
