"""InitProducerId: an idempotent producer's id and epoch, or a transactional producer's from its
coordinator.

An idempotent producer (no transactional id) gets a fresh producer id at epoch 0 at every call, also when
it asks to bump the epoch of the id it has (KIP-360): raftlog's dedup remembers a producer's recent
sequences by producer id, so an id that restarts its sequences must be a new one. Every producer id given
is the connection's principal's: a batch of it from another principal is refused, on every node
(``partitions.security.producer_ids``; ``TransactionService.init_idempotent_producer``). With
``serve --enforce-acls``, as Kafka since KIP-679: a connection that may IDEMPOTENT_WRITE the cluster, or
WRITE some topic, gets an id; others CLUSTER_AUTHORIZATION_FAILED.

A transactional producer's id and epoch come from its transactional id's coordinator, which keeps the
producer id and bumps the epoch at each call, fencing the older producers of the id (WRITE on the
transactional id; its coordinator's errors answered as ``errors.transaction_coordinator_code`` says).
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.coordinators import check_writable
from kafka_api.door import Door
from kafka_api.errors import Caught, Refused, transaction_coordinator_code
from partitions.security.acls import AclOperation, ResourceType

NO_PRODUCER = -1


async def init_producer_id(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    code, producer_id, epoch = ErrorCode.none, NO_PRODUCER, -1
    if request.body.transactional_id is not None:
        code, producer_id, epoch = await _init_transactional_producer(door, request)
    elif not (
        door.allows(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
        or door.allows_any(AclOperation.WRITE, ResourceType.TOPIC)
    ):
        code = ErrorCode.cluster_authorization_failed
    else:
        with Caught() as caught:  # every error is the answer's
            given = await door.node.local.transactions.init_idempotent_producer(door.session.principal)
            producer_id, epoch = given.producer_id, given.producer_epoch
        code = caught.code
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=code, producer_id=producer_id, producer_epoch=epoch
    )


async def _init_transactional_producer(door: Door, request: wire.Request) -> tuple[ErrorCode, int, int]:
    """InitProducerId with a transactional id: (error, producer id, epoch) from its coordinator."""
    body = request.body
    producer_id = getattr(body, "producer_id", NO_PRODUCER)
    producer_epoch = getattr(body, "producer_epoch", -1)
    with Caught(functools.partial(transaction_coordinator_code, request=request)) as caught:
        check_writable(door, body.transactional_id)
        if (producer_id == NO_PRODUCER) != (producer_epoch == -1):  # KIP-360: both or neither, as Kafka
            raise Refused(ErrorCode.invalid_request)
        given = await door.node.local.transactions.init_producer_id(
            body.transactional_id,
            wire.millis(body.transaction_timeout),
            producer_id,
            producer_epoch,
            door.session.principal,
        )
        return ErrorCode.none, given.producer_id, given.producer_epoch
    return caught.code, NO_PRODUCER, -1
