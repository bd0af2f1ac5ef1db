"""InitProducerId: an idempotent producer's id and epoch.

Every call gets a fresh random 62-bit producer id at epoch 0, also when a producer asks to bump the epoch
of the id it has (KIP-360): raftlog's dedup remembers a producer's recent sequences by producer id, so
an id that restarts its sequences must be a new one. A transactional id is answered UNSUPPORTED_VERSION:
transactions are not supported. With ``serve --enforce-acls``, as Kafka since KIP-679: a connection that
may IDEMPOTENT_WRITE the cluster, or WRITE some topic, gets an id; others CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import secrets
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from partitions.security.acls import AclOperation, ResourceType

PRODUCER_ID_BITS = 62
NO_PRODUCER = -1


async def init_producer_id(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    refusal = None
    if request.body.transactional_id is not None:
        refusal = ErrorCode.unsupported_version
    elif not (
        door.allows(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
        or door.allows_any(AclOperation.WRITE, ResourceType.TOPIC)
    ):
        refusal = ErrorCode.cluster_authorization_failed
    if refusal is not None:
        return wire.build(
            cls,
            throttle_time=wire.NO_THROTTLE,
            error_code=refusal,
            producer_id=NO_PRODUCER,
            producer_epoch=-1,
        )
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=secrets.randbits(PRODUCER_ID_BITS),
        producer_epoch=0,
    )
