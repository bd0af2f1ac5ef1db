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
producer id and bumps the epoch at each call, fencing the older producers of the id
(``transaction_apis.init_transactional_producer``; WRITE on the transactional id).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import code_of
from kafka_api.transaction_apis import init_transactional_producer
from partitions.security.acls import AclOperation, ResourceType

NO_PRODUCER = -1


async def init_producer_id(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    code, producer_id, epoch = ErrorCode.none, NO_PRODUCER, -1
    if request.body.transactional_id is not None:
        code, producer_id, epoch = await init_transactional_producer(door, request)
    elif not (
        door.allows(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
        or door.allows_any(AclOperation.WRITE, ResourceType.TOPIC)
    ):
        code = ErrorCode.cluster_authorization_failed
    else:
        try:
            given = await door.node.local.transactions.init_idempotent_producer(door.session.principal)
        except Exception as exc:  # every error is the answer's (kafka_api.errors)
            code = code_of(exc)
        else:
            producer_id, epoch = given.producer_id, given.producer_epoch
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=code, producer_id=producer_id, producer_epoch=epoch
    )
