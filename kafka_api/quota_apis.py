"""DescribeClientQuotas and AlterClientQuotas (KIP-546): the client quotas of the controller's metadata
(``partitions.controller.quotas``) as ``kafka-configs --entity-type users|clients`` and Kafka's admin
clients manage them. Enforcing them is ``partitions.security.quotas``'s, applied by ``server.py``.

DescribeClientQuotas filters as Kafka's ``ClientQuotasImage.describe`` (exact name, default, any name;
strict), on this node's metadata; a malformed filter is INVALID_REQUEST, an unknown entity type
UNSUPPORTED_VERSION, both for the whole answer. AlterClientQuotas is one controller change for the whole
request: an entity Kafka refuses (``controller.quotas``) is INVALID_REQUEST with Kafka's words, and then no
entity of the request changes (Kafka applies the valid entities of a request and refuses the others; here a
request is all or nothing, each entity answered with the refusal's code). Who may: DESCRIBE_CONFIGS
(ALTER_CONFIGS) on the cluster, as Kafka asks.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import code_of
from partitions.controller import quotas as controller_quotas
from partitions.controller.quotas import CLIENT_ID, IP, USER, Entity, QuotaChange
from partitions.errors import InvalidQuota
from partitions.metadata.service import AdminService
from partitions.security.acls import AclOperation, ResourceType
from raftlog.errors import RaftlogError

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


async def describe_client_quotas(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    if not door.allows(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        refusal = door.refusal(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
        return _describe_answer(cls, ErrorCode.cluster_authorization_failed, str(refusal), None)
    try:
        exact, specified = _filter(request.body.components)
    except InvalidQuota as exc:
        return _describe_answer(cls, ErrorCode.invalid_request, str(exc), None)
    except _UnknownType as exc:
        return _describe_answer(cls, ErrorCode.unsupported_version, str(exc), None)
    entry_cls = wire.sibling(cls, "EntryData")
    entity_cls = wire.sibling(cls, "EntityData")
    value_cls = wire.sibling(cls, "ValueData")
    quotas = door.node.metadata.client_quotas().entities()
    entries = tuple(
        wire.build(
            entry_cls,
            entity=tuple(wire.build(entity_cls, entity_type=k, entity_name=n) for k, n in entity),
            values=tuple(wire.build(value_cls, key=k, value=v) for k, v in sorted(values.items())),
        )
        for entity, values in sorted(quotas.items(), key=lambda item: controller_quotas.describe(item[0]))
        if controller_quotas.matches(entity, exact, specified, bool(request.body.strict))
    )
    return _describe_answer(cls, ErrorCode.none, None, entries)


def _describe_answer(cls: type, code: ErrorCode, message: str | None, entries: tuple[Any, ...] | None) -> Any:
    return wire.build(
        cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message, entries=entries
    )


class _UnknownType(Exception):
    pass


def _filter(components: Any) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise InvalidQuota("Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise InvalidQuota(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in (USER, CLIENT_ID, IP):
            raise _UnknownType(f"Unsupported entity type {kind}")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise InvalidQuota("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = component.match
        elif component.match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise InvalidQuota("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[kind] = None
        elif component.match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise InvalidQuota(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            specified.add(kind)
        else:
            raise InvalidQuota(f"Unknown match type {component.match_type}")
    if (IP in exact or IP in specified) and len(exact) + len(specified) > 1:
        raise InvalidQuota(
            "Invalid entity filter component combination. IP filter component should not be used "
            "with user or clientId filter component."
        )
    return exact, specified


async def alter_client_quotas(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    entry_cls = wire.sibling(cls, "EntryData")
    entity_cls = wire.sibling(cls, "EntityData")
    entries = request.body.entries

    def answer(codes: list[tuple[ErrorCode, str | None]]) -> Any:
        return wire.build(
            cls,
            throttle_time=wire.NO_THROTTLE,
            entries=tuple(
                wire.build(
                    entry_cls,
                    error_code=code,
                    error_message=message,
                    entity=tuple(
                        wire.build(entity_cls, entity_type=e.entity_type, entity_name=e.entity_name)
                        for e in entry.entity
                    ),
                )
                for entry, (code, message) in zip(entries, codes, strict=True)
            ),
        )

    if not door.allows(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
        refusal = str(door.refusal(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER))
        return answer([(ErrorCode.cluster_authorization_failed, refusal)] * len(entries))
    changes: list[QuotaChange] = []
    refused: list[tuple[ErrorCode, str | None]] = []
    for entry in entries:
        try:
            entity: Entity = controller_quotas.entity([(e.entity_type, e.entity_name) for e in entry.entity])
            ops = tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops)
            for key, value in ops:
                controller_quotas.check_value(key, value, controller_quotas.keys_of(entity))
            changes.append(QuotaChange(entity, ops))
            refused.append((ErrorCode.none, None))
        except InvalidQuota as exc:
            refused.append((ErrorCode.invalid_request, str(exc)))
    if any(code is not ErrorCode.none for code, _ in refused):
        return answer(refused)
    if changes:
        try:
            await door.node.cluster.admin.call(
                AdminService.alter_client_quotas, changes, bool(request.body.validate_only)
            )
        except RaftlogError as exc:
            return answer([(code_of(exc), str(exc))] * len(entries))
    return answer([(ErrorCode.none, None)] * len(entries))
