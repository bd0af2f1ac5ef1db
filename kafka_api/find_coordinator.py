"""FindCoordinator (v0-4): the node coordinating a group (key type 0: the leader of its
``__consumer_groups`` partition) or a transactional id (key type 1: of its ``__transactions``
partition), each topic created on first use; v4 batches keys. A share group's key (type 2) is
INVALID_REQUEST: its coordinator is found as a consumer group's. With ``serve --enforce-acls``, DESCRIBE
on the group or the transactional id (GROUP_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.coordinators import group_coordinator_of, transaction_coordinator_of
from kafka_api.door import Door
from kafka_api.errors import Caught, code_of
from partitions.errors import InvalidName
from partitions.names import broker_id, check_transactional_id
from partitions.security.acls import AclOperation, ResourceType

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator's key types of a group and of a transactional id
NO_NODE = -1
DESCRIBE, GROUP, TRANSACTIONAL_ID = AclOperation.DESCRIBE, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID


async def find_coordinator(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    keys = list(body.coordinator_keys) if hasattr(body, "coordinator_keys") else [body.key]
    key_type = getattr(body, "key_type", GROUP_KEY)
    answers = [await _find(door, key, key_type) for key in keys]
    if hasattr(body, "coordinator_keys"):
        entry = wire.sibling(cls, "Coordinator")
        coordinators = tuple(
            wire.build(entry, key=key, **answer) for key, answer in zip(keys, answers, strict=True)
        )
        return wire.build(cls, throttle_time=wire.NO_THROTTLE, coordinators=coordinators)
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, **answers[0])


def _refused(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "node_id": NO_NODE, "host": "", "port": -1}


def _found(door: Door, leader: str | None, what: str) -> dict[str, Any]:
    """The fields of a key's entry naming ``leader``, or COORDINATOR_NOT_AVAILABLE while none is known."""
    address = door.broker_address(leader) if leader is not None else None
    if leader is None or address is None:
        return _refused(ErrorCode.coordinator_not_available, f"no coordinator of {what} is known yet")
    host, port = address
    return {"error_code": ErrorCode.none, "error_message": None, "node_id": broker_id(leader), "host": host,
            "port": port}  # fmt: skip


async def _find(door: Door, key: str, key_type: int) -> dict[str, Any]:
    if key_type == TRANSACTION_KEY:
        return await _find_transaction_coordinator(door, key)
    if key_type != GROUP_KEY:  # 2: a share group's (KIP-932)
        return _refused(ErrorCode.invalid_request, f"key type {key_type}: raftlog coordinates groups (0) and "
                        "transactional ids (1)")  # fmt: skip
    if not door.allows(DESCRIBE, GROUP, key):
        return _refused(ErrorCode.group_authorization_failed, str(door.refusal(DESCRIBE, GROUP, key)))
    with Caught() as caught:  # every error is this key's answer
        await door.coordinator.ensure_topic()
    if caught.failed:
        return _refused(caught.code, caught.message or "")
    return _found(door, group_coordinator_of(door, key), f"group {key!r}")


def _transactional_id_code(error: BaseException) -> ErrorCode:
    return ErrorCode.invalid_request if isinstance(error, InvalidName) else code_of(error)


async def _find_transaction_coordinator(door: Door, transactional_id: str) -> dict[str, Any]:
    """FindCoordinator's answer for one transactional id (the fields of its entry)."""
    if not door.allows(DESCRIBE, TRANSACTIONAL_ID, transactional_id):
        refusal = door.refusal(DESCRIBE, TRANSACTIONAL_ID, transactional_id)
        return _refused(ErrorCode.transactional_id_authorization_failed, str(refusal))
    with Caught(_transactional_id_code) as caught:  # every error is this key's answer
        check_transactional_id(transactional_id)
        await door.node.local.transactions.ensure_topic()
    if caught.failed:
        return _refused(caught.code, caught.message or "")
    leader = transaction_coordinator_of(door, transactional_id)
    return _found(door, leader, f"transactional id {transactional_id!r}")
