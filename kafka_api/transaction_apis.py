"""The transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, and DescribeTransactions
and ListTransactions for operators. A transactional producer's InitProducerId is ``producer_ids``', a
transactional id's FindCoordinator (key type 1) ``find_coordinator``'s; TxnOffsetCommit is answered where
the group is coordinated (``group_apis``).

A transactional id's coordinator is the leader of its ``__transactions`` partition (``murmur2(id) %
partitions``, ``coordinators``); FindCoordinator names it, creating the topic on first use. Every request
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
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.coordinators import check_writable
from kafka_api.door import Door
from kafka_api.errors import Caught, Mapper, Refused, transaction_coordinator_code
from partitions.errors import InvalidName, UnknownTopic
from partitions.groups.assignors import TopicPartition
from partitions.names import check_group_name
from partitions.security.acls import AclOperation, ResourceType
from partitions.transactions.service import ProducerIdAndEpoch, TransactionFilter
from raftlog.errors import RaftlogError

NO_PRODUCER = -1
WRITE, READ, DESCRIBE = AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE
TRANSACTIONAL_ID, TOPIC, GROUP = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP
TRANSACTION_V2_END = 5  # EndTxn of Kafka's transaction version 2: the epoch bumped at every end


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
    with Caught(_coordinator(request)) as caught:  # every error is every partition's answer
        check_writable(door, tid)
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
    everyone = caught.code
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
        check_writable(door, body.transactional_id)
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
        check_writable(door, body.transactional_id)
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
    refusal's code, or what the coordinator raised (``errors.transaction_coordinator_code``)."""
    with Caught(_coordinator(request)) as caught:  # every error is the answer's
        await call()
    cls = wire.response_class(request.api_key, request.api_version)
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, error_code=caught.code)


def _coordinator(request: wire.Request) -> Mapper:
    """The codes of the transaction coordinator's errors, as ``request`` answers them."""
    return functools.partial(transaction_coordinator_code, request=request)


# -- DescribeTransactions, ListTransactions ------------------------------------------------------------


async def describe_transactions(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    state_cls = wire.sibling(cls, "TransactionState")
    topic_cls = wire.sibling(cls, "TopicData")
    coordinator = _coordinator(request)

    def described_code(error: BaseException) -> ErrorCode:
        return ErrorCode.invalid_request if isinstance(error, InvalidName) else coordinator(error)

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
        with Caught(described_code) as caught:  # every error is this id's answer
            described = await door.node.local.transactions.describe_transaction(tid)
        if caught.failed:
            answers.append(answer(caught.code))
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
    answers for what it coordinates; admin clients ask every broker), filtered as Kafka filters them
    (``TransactionFilter``: state, producer id, v1 how long their transaction has been open, v2 a pattern
    of ids; a pattern RE2 refuses is the whole answer's INVALID_REGULAR_EXPRESSION)."""
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    entry = wire.sibling(cls, "TransactionState")
    transactions = door.node.local.transactions
    now_ms = int(time.time() * 1000)
    listed = []
    unknown: tuple[str, ...] = ()
    with Caught() as caught:  # the whole answer's
        wanted = TransactionFilter.of(
            body.state_filters,
            body.producer_id_filters,
            getattr(body, "duration_filter", -1),
            getattr(body, "transactional_id_pattern", None),
        )
        unknown = wanted.unknown_states
        partitions = await transactions.coordinator_partitions()
        for partition in range(partitions):
            try:
                summaries = await transactions.list_transactions(partition)
            except RaftlogError:  # led elsewhere (or electing): that broker answers for it
                continue
            listed += [
                wire.build(entry, transactional_id=s.transactional_id, producer_id=s.producer_id,
                           transaction_state=s.state)
                for s in summaries
                if wanted.keeps(s, now_ms) and door.allows(DESCRIBE, TRANSACTIONAL_ID, s.transactional_id)
            ]  # fmt: skip
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        error_code=caught.code,
        unknown_state_filters=unknown,
        transaction_states=tuple(listed),
    )
