"""InitProducerId: an idempotent producer's id and epoch, or a transactional producer's from its
coordinator.

An idempotent producer (no transactional id) gets a fresh random 62-bit producer id at epoch 0 at every
call, also when it asks to bump the epoch of the id it has (KIP-360): raftlog's dedup remembers a
producer's recent sequences by producer id, so an id that restarts its sequences must be a new one. With
``serve --enforce-acls``, as Kafka since KIP-679: a connection that may IDEMPOTENT_WRITE the cluster, or
WRITE some topic, gets an id; others CLUSTER_AUTHORIZATION_FAILED.

A transactional producer's id and epoch come from its transactional id's coordinator, which keeps the
producer id and bumps the epoch at each call, fencing the older producers of the id
(``transaction_apis.init_transactional_producer``; WRITE on the transactional id).
"""

from __future__ import annotations

import secrets
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.transaction_apis import init_transactional_producer
from partitions.security.acls import AclOperation, ResourceType

PRODUCER_ID_BITS = 62
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
        producer_id, epoch = secrets.randbits(PRODUCER_ID_BITS), 0
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=code, producer_id=producer_id, producer_epoch=epoch
    )
