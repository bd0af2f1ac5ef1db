"""Where a group or a transactional id is coordinated, as every handler that asks finds it: a group's
coordinator is the leader of its ``__consumer_groups`` partition, a transactional id's the leader of its
``__transactions`` partition (``murmur2(key) % partitions``), as this node knows them (None: none known
yet). ``coordinating`` is the consumer and share group APIs' check (KIP-848, KIP-932) that the group
is coordinated here, ``heartbeat_answer`` their heartbeats' answer; ``check_writable`` the transaction
APIs' check of the transactional id a request names.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import Refused
from partitions.errors import InvalidName
from partitions.groups.errors import InvalidGroupRequest, NotCoordinator
from partitions.names import GROUPS_TOPIC, TRANSACTIONS_TOPIC, check_group_name, check_transactional_id
from partitions.security.acls import AclOperation, ResourceType


def group_coordinator_of(door: Door, group: str) -> str | None:
    """The node coordinating ``group`` as this node knows it; None when none is known (yet)."""
    return door.coordinator_of(GROUPS_TOPIC, group)


def transaction_coordinator_of(door: Door, transactional_id: str) -> str | None:
    """The node coordinating ``transactional_id`` as this node knows it; None when none is known (yet)."""
    return door.coordinator_of(TRANSACTIONS_TOPIC, transactional_id)


def coordinating(door: Door, group: str) -> None:
    """A consumer (KIP-848) or share group (KIP-932) request's group: named, a possible name, and
    coordinated here (else ``NotCoordinator``: the client looks its coordinator up again)."""
    if not group:
        raise InvalidGroupRequest("GroupId can't be empty.")
    check_group_name(group)
    if group_coordinator_of(door, group) != door.node.node_id:
        raise NotCoordinator(group)


def heartbeat_answer(
    cls: Any,
    code: ErrorCode = ErrorCode.none,
    message: str | None = None,
    member_id: str | None = None,
    member_epoch: int = 0,
    interval_ms: int = 0,
    assignment: Any = None,
) -> Any:
    """A ConsumerGroupHeartbeat or ShareGroupHeartbeat answer (the two have one shape); a refusal says
    only ``code`` and ``message``."""
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message, member_id=member_id,
        member_epoch=member_epoch, heartbeat_interval=datetime.timedelta(milliseconds=interval_ms),
        assignment=assignment,
    )  # fmt: skip


def check_writable(door: Door, transactional_id: str) -> None:
    """Refused unless the id can name a transactional producer and the connection may WRITE it."""
    try:
        check_transactional_id(transactional_id)
    except InvalidName:
        raise Refused(ErrorCode.invalid_request) from None
    if not door.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        raise Refused(ErrorCode.transactional_id_authorization_failed)
