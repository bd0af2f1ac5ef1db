"""The transaction APIs (KIP-98): the transactional half of InitProducerId and FindCoordinator,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, and DescribeTransactions and ListTransactions for operators.
TxnOffsetCommit is answered where the group is coordinated (``group_apis``).

A transactional id's coordinator is the leader of its ``__transactions`` partition (``murmur2(id) %
partitions``); FindCoordinator with key type 1 names it, creating the topic on first use. Every request
runs on this node's own coordinator (``TransactionService``, ``partitions/transactions/``): a node that
does not coordinate the id answers NOT_COORDINATOR and the client looks it up again, one that leads but has
not caught up with its partition COORDINATOR_LOAD_IN_PROGRESS.

Versions are the clients' (Kafka 4.1's Java client, with transaction version 2 once the cluster finalizes
it, and librdkafka 2.16; ``apis.py`` lists them): AddPartitionsToTxn 0-3 (v4+ is the brokers' own, KIP-890:
a partition's leader here asks its coordinator with ``TransactionService.verify_partition``), EndTxn 0-5
(v5, KIP-890's second part, bumps the epoch at every end, an empty abort's too). A producer fenced by a
newer epoch is told PRODUCER_FENCED from the versions that know it (InitProducerId v4, the others v2),
INVALID_PRODUCER_EPOCH before.

With ``serve --enforce-acls`` each API checks what Kafka's does: WRITE on the transactional id for
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
DESCRIBE on it for FindCoordinator and DescribeTransactions; WRITE on each topic AddPartitionsToTxn names
(TOPIC_AUTHORIZATION_FAILED for its partitions, OPERATION_NOT_ATTEMPTED for the rest), READ on the group
AddOffsetsToTxn names (GROUP_AUTHORIZATION_FAILED); DescribeTransactions shows only the topics the
connection may DESCRIBE, ListTransactions only the ids it may DESCRIBE.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import code_of
from partitions.errors import InvalidName, ProducerFenced, UnknownTopic
from partitions.groups.assignors import TopicPartition
from partitions.names import TRANSACTIONS_TOPIC, broker_id, check_group_name, check_transactional_id
from partitions.security.acls import AclOperation, ResourceType
from partitions.transactions.service import ProducerIdAndEpoch
from raftlog.consensus.errors import (
    NoLeader,
    NotLeader,
    OutcomeUnknown,
    ProposalDiscarded,
    ProposalQueueFull,
    ProposalRejected,
)
from raftlog.errors import RaftlogError

TRANSACTION_KEY = 1  # FindCoordinator's key type of a transactional id
NO_NODE = -1
NO_PRODUCER = -1
WRITE, READ, DESCRIBE = AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE
TRANSACTIONAL_ID, TOPIC, GROUP = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")
# the first version of each API whose clients know PRODUCER_FENCED (before it: INVALID_PRODUCER_EPOCH)
PRODUCER_FENCED_FROM = {22: 4, 24: 2, 25: 2, 26: 2}
TRANSACTION_V2_END = 5  # EndTxn of Kafka's transaction version 2: the epoch bumped at every end


class Refused(Exception):
    """A request's answer decided before the coordinator is asked."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def coordinator_code(error: BaseException, request: wire.Request) -> ErrorCode:
    """The Kafka code of an error the transaction coordinator raised, for this request: its leadership
    or a write to its log that failed as a coordinator's (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE), a fenced producer by the request's version, the rest as everywhere
    (``kafka_api.errors``)."""
    if isinstance(error, (NotLeader, ProposalDiscarded, ProposalRejected)):
        return ErrorCode.not_coordinator
    if isinstance(error, NoLeader):  # electing, or led here but not caught up with its partition yet
        return ErrorCode.coordinator_load_in_progress
    if isinstance(error, (OutcomeUnknown, ProposalQueueFull)):
        # not written in time, as Kafka's coordinator answers an append to its log that timed out: every
        # client asks again (REQUEST_TIMED_OUT would end franz-go's EndTxn as failed, and it would take a
        # commit that may yet be decided for an abort and process the input again)
        return ErrorCode.coordinator_not_available
    if isinstance(error, UnknownTopic) and error.topic == TRANSACTIONS_TOPIC:
        return ErrorCode.coordinator_not_available
    if isinstance(error, ProducerFenced):
        fenced_from = PRODUCER_FENCED_FROM.get(request.api_key)
        if fenced_from is not None and request.api_version >= fenced_from:
            return ErrorCode.producer_fenced
        return ErrorCode.invalid_producer_epoch
    return code_of(error)


def _writable(door: Door, transactional_id: str) -> None:
    """Refused unless the id can name a transactional producer and the connection may WRITE it."""
    try:
        check_transactional_id(transactional_id)
    except InvalidName:
        raise Refused(ErrorCode.invalid_request) from None
    if not door.allows(WRITE, TRANSACTIONAL_ID, transactional_id):
        raise Refused(ErrorCode.transactional_id_authorization_failed)


# -- FindCoordinator (key type 1) ---------------------------------------------------------------------


def coordinator_of(door: Door, transactional_id: str) -> str | None:
    """The node coordinating ``transactional_id`` as this node knows it; None when none is known (yet)."""
    return door.coordinator_of(TRANSACTIONS_TOPIC, transactional_id)


async def find_coordinator(door: Door, transactional_id: str) -> dict[str, Any]:
    """FindCoordinator's answer for one transactional id (the fields of its entry)."""

    def refused(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"error_code": code, "error_message": message, "node_id": NO_NODE, "host": "", "port": -1}

    if not door.allows(DESCRIBE, TRANSACTIONAL_ID, transactional_id):
        refusal = door.refusal(DESCRIBE, TRANSACTIONAL_ID, transactional_id)
        return refused(ErrorCode.transactional_id_authorization_failed, str(refusal))
    try:
        check_transactional_id(transactional_id)
        await door.node.local.transactions.ensure_topic()
    except Exception as exc:  # every error is this key's answer (kafka_api.errors)
        return refused(ErrorCode.invalid_request if isinstance(exc, InvalidName) else code_of(exc), str(exc))
    leader = coordinator_of(door, transactional_id)
    address = door.broker_address(leader) if leader is not None else None
    if leader is None or address is None:
        message = f"no coordinator of transactional id {transactional_id!r} is known yet"
        return refused(ErrorCode.coordinator_not_available, message)
    host, port = address
    return {"error_code": ErrorCode.none, "error_message": None, "node_id": broker_id(leader), "host": host,
            "port": port}  # fmt: skip


# -- InitProducerId (a transactional producer's) -----------------------------------------------------


async def init_transactional_producer(door: Door, request: wire.Request) -> tuple[ErrorCode, int, int]:
    """InitProducerId with a transactional id: (error, producer id, epoch) from its coordinator."""
    body = request.body
    producer_id = getattr(body, "producer_id", NO_PRODUCER)
    producer_epoch = getattr(body, "producer_epoch", -1)
    try:
        _writable(door, body.transactional_id)
        if (producer_id == NO_PRODUCER) != (producer_epoch == -1):  # KIP-360: both or neither, as Kafka
            raise Refused(ErrorCode.invalid_request)
        given = await door.node.local.transactions.init_producer_id(
            body.transactional_id,
            wire.millis(body.transaction_timeout),
            producer_id,
            producer_epoch,
            door.session.principal,
        )
    except Refused as refusal:
        return refusal.code, NO_PRODUCER, -1
    except Exception as exc:  # every error is the answer's (kafka_api.errors)
        return coordinator_code(exc, request), NO_PRODUCER, -1
    return ErrorCode.none, given.producer_id, given.producer_epoch


# -- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn -------------------------------------------------------


async def add_partitions_to_txn(door: Door, request: wire.Request) -> Any:
    """Kafka's rules: a partition of a topic the connection may not WRITE, or that does not exist, is
    answered so and nothing of the request is done (the others OPERATION_NOT_ATTEMPTED); else the
    coordinator's one answer is every partition's."""
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    topic_cls = wire.sibling(cls, "AddPartitionsToTxnTopicResult")
    partition_cls = wire.sibling(cls, "AddPartitionsToTxnPartitionResult")
    asked = [(t.name, list(t.partitions)) for t in body.v3_and_below_topics]
    tid = body.v3_and_below_transactional_id
    codes: dict[tuple[str, int], ErrorCode] = {}
    try:
        _writable(door, tid)
        view = door.node.metadata
        for name, partitions in asked:
            if not door.allows(WRITE, TOPIC, name):
                codes.update({(name, p): ErrorCode.topic_authorization_failed for p in partitions})
                continue
            try:
                count = view.topic(name).partitions
            except UnknownTopic:
                count = 0
            codes.update(
                {(name, p): ErrorCode.unknown_topic_or_partition for p in partitions if not 0 <= p < count}
            )
        if codes:
            raise Refused(ErrorCode.operation_not_attempted)
        tps = [TopicPartition(name, p) for name, partitions in asked for p in partitions]
        await door.node.local.transactions.add_partitions(
            tid, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch, tps, door.session.principal
        )
        everyone = ErrorCode.none
    except Refused as refusal:
        everyone = refusal.code
    except Exception as exc:  # every error is every partition's answer (kafka_api.errors)
        everyone = coordinator_code(exc, request)
    topics = tuple(
        wire.build(
            topic_cls,
            name=name,
            results_by_partition=tuple(
                wire.build(
                    partition_cls, partition_index=p, partition_error_code=codes.get((name, p), everyone)
                )
                for p in partitions
            ),
        )
        for name, partitions in asked
    )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, results_by_topic_v3_and_below=topics)


async def add_offsets_to_txn(door: Door, request: wire.Request) -> Any:
    body = request.body

    async def add() -> None:
        _writable(door, body.transactional_id)
        try:
            check_group_name(body.group_id)
        except InvalidName:
            raise Refused(ErrorCode.invalid_group_id) from None
        if not door.allows(READ, GROUP, body.group_id):
            raise Refused(ErrorCode.group_authorization_failed)
        await door.node.local.transactions.add_offsets(
            body.transactional_id,
            body.producer_id,
            body.producer_epoch,
            body.group_id,
            door.session.principal,
        )

    return await _answered(request, add)


async def end_txn(door: Door, request: wire.Request) -> Any:
    """Answered once the decision is replicated; the markers follow (``TransactionService``). v5 (Kafka's
    transaction version 2) bumps the producer's epoch and answers the id and epoch it goes on with."""
    body = request.body

    ended = ProducerIdAndEpoch(NO_PRODUCER, -1)

    async def end() -> None:
        nonlocal ended
        _writable(door, body.transactional_id)
        ended = await door.node.local.transactions.end_transaction(
            body.transactional_id,
            body.producer_id,
            body.producer_epoch,
            body.committed,
            door.session.principal,
            bump=request.api_version >= TRANSACTION_V2_END,
        )

    answer = await _answered(request, end)
    if request.api_version < TRANSACTION_V2_END:
        return answer
    if answer.error_code != ErrorCode.none:
        ended = ProducerIdAndEpoch(NO_PRODUCER, -1)
    return wire.build(
        type(answer),
        throttle_time=wire.NO_THROTTLE,
        error_code=answer.error_code,
        producer_id=ended.producer_id,
        producer_epoch=ended.producer_epoch,
    )


async def _answered(request: wire.Request, call: Callable[[], Awaitable[None]]) -> Any:
    """The answer of a transaction API whose response is one error code: NONE once ``call`` returned, a
    refusal's code, or what the coordinator raised (``coordinator_code``)."""
    try:
        await call()
        code = ErrorCode.none
    except Refused as refusal:
        code = refusal.code
    except Exception as exc:  # every error is the answer's (kafka_api.errors)
        code = coordinator_code(exc, request)
    cls = wire.response_class(request.api_key, request.api_version)
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=code)


# -- DescribeTransactions, ListTransactions ------------------------------------------------------------


async def describe_transactions(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    state_cls = wire.sibling(cls, "TransactionState")
    topic_cls = wire.sibling(cls, "TopicData")
    answers = []
    for tid in request.body.transactional_ids:

        def answer(code: ErrorCode, tid: str = tid, **found: Any) -> Any:
            fields = {  # a refusal's: the schema's defaults, as Kafka's broker leaves them
                "transaction_state": "", "transaction_timeout": datetime.timedelta(0),
                "transaction_start_time": wire.timestamp(0), "producer_id": 0, "producer_epoch": 0,
                "topics": (),
            }  # fmt: skip
            fields.update(found)
            return wire.build(state_cls, error_code=code, transactional_id=tid, **fields)

        if not door.allows(DESCRIBE, TRANSACTIONAL_ID, tid):
            answers.append(answer(ErrorCode.transactional_id_authorization_failed))
            continue
        try:
            described = await door.node.local.transactions.describe_transaction(tid)
        except Exception as exc:  # every error is this id's answer (kafka_api.errors)
            invalid = isinstance(exc, InvalidName)
            answers.append(answer(ErrorCode.invalid_request if invalid else coordinator_code(exc, request)))
            continue
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(described.partitions + described.offset_partitions):
            if door.allows(DESCRIBE, TOPIC, tp.topic):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
        summary = described.summary
        answers.append(
            answer(
                ErrorCode.none,
                transaction_state=summary.state,
                transaction_timeout=datetime.timedelta(milliseconds=summary.timeout_ms),
                transaction_start_time=wire.timestamp(summary.started_ms),
                producer_id=summary.producer_id,
                producer_epoch=summary.producer_epoch,
                topics=tuple(
                    wire.build(topic_cls, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )
        )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, transaction_states=tuple(answers))


async def list_transactions(door: Door, request: wire.Request) -> Any:
    """The transactional ids of the coordinator partitions this node leads (as Kafka's brokers, each
    answers for what it coordinates; admin clients ask every broker), filtered by state, producer id and
    (v1) how long their transaction has been open."""
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    entry = wire.sibling(cls, "TransactionState")
    states = set(body.state_filters)
    unknown = tuple(sorted(s for s in states if s not in STATES))
    producers = set(body.producer_id_filters)
    older_than_ms = getattr(body, "duration_filter", -1)
    transactions = door.node.local.transactions
    now_ms = int(time.time() * 1000)
    listed = []
    code = ErrorCode.none
    try:
        partitions = await transactions.coordinator_partitions()
    except Exception as exc:  # the whole answer's (kafka_api.errors)
        partitions, code = 0, code_of(exc)
    for partition in range(partitions):
        try:
            summaries = await transactions.list_transactions(partition)
        except RaftlogError:  # led elsewhere (or electing): that broker answers for it
            continue
        listed += [
            wire.build(entry, transactional_id=s.transactional_id, producer_id=s.producer_id,
                       transaction_state=s.state)
            for s in summaries
            if (not states or s.state in states)
            and (not producers or s.producer_id in producers)
            and (older_than_ms < 0 or (s.started_ms >= 0 and now_ms - s.started_ms > older_than_ms))
            and door.allows(DESCRIBE, TRANSACTIONAL_ID, s.transactional_id)
        ]  # fmt: skip
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        error_code=code,
        unknown_state_filters=unknown,
        transaction_states=tuple(listed),
    )
