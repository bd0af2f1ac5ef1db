"""CreateAcls, DescribeAcls and DeleteAcls: the ACLs of ``/v1/acls`` as Kafka's admin clients manage
them (confluent-kafka's ``AdminClient.create_acls``/``describe_acls``/``delete_acls``, kafka-python's
``KafkaAdminClient``), with Kafka's own codes for resource types, pattern types, operations and
permissions. The schema registry's ACL types (subject, registry) are not Kafka's: this door neither shows
nor takes them (a creation or filter naming their codes is INVALID_REQUEST, as Kafka answers a type it
does not have, and a filter of any type leaves them alone); ``/v1/acls`` manages them.

A request's ACLs (or filters) are checked one by one: one that cannot be used is refused alone with
INVALID_REQUEST and the reason; the others are one controller change, made on the controller leader
through the admin service ``/v1/acls`` uses, so they are all made or none. DescribeAcls answers from this
node's controller metadata.

Who may call them, as in Kafka: whoever may ALTER the cluster creates and deletes, whoever may DESCRIBE it
describes (a super user). A refusal is CLUSTER_AUTHORIZATION_FAILED for each creation or filter
(DescribeAcls: the answer's error) and changes nothing. A node that does not enforce ACLs (no
``--enforce-acls``) answers SECURITY_DISABLED ("No Authorizer is configured."), as a Kafka broker without
``authorizer.class.name`` does, rather than store ACLs nothing would enforce; ``/v1/acls`` still manages
them, for the nodes that do.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import Caught, code_of
from partitions.errors import InvalidName
from partitions.metadata.service import AdminService
from partitions.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    ResourceType,
    kafka_filters,
    kafka_resource_type,
    select,
)

NO_AUTHORIZER = (ErrorCode.security_disabled, "No Authorizer is configured.")  # Kafka's words


def _refused(door: Door, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    if not door.security.enforce_acls:
        return NO_AUTHORIZER  # ACLs that nothing would enforce: refused, as by a Kafka broker without one
    if door.allows(operation, ResourceType.CLUSTER):
        return None
    refusal = door.refusal(operation, ResourceType.CLUSTER)
    return code_of(refusal), str(refusal)


async def create_acls(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "AclCreationResult")
    answers: list[tuple[ErrorCode, str | None]] = []
    wanted: list[AclBinding] = []
    refused = _refused(door, AclOperation.ALTER)
    for creation in request.body.creations:
        if refused is not None:
            answers.append(refused)
            continue
        try:
            wanted.append(
                AclBinding.of(
                    kafka_resource_type(creation.resource_type),
                    creation.resource_name,
                    creation.resource_pattern_type,
                    creation.principal,
                    creation.host,
                    creation.operation,
                    creation.permission_type,
                )
            )
            answers.append((ErrorCode.none, None))
        except InvalidName as exc:  # a binding that cannot be one
            answers.append((ErrorCode.invalid_request, str(exc)))
    if wanted:
        with Caught() as caught:  # the change was not made: every creation it held says why
            await door.node.cluster.admin.call(AdminService.create_acls, wanted)
        if caught.failed:
            failed = (caught.code, caught.message)
            answers = [failed if code is ErrorCode.none else (code, m) for code, m in answers]
    results = tuple(wire.build(result_cls, error_code=code, error_message=m) for code, m in answers)
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, results=results)


def _filter(entity: Any) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter as an ``AclFilter`` (``InvalidName`` if unusable)."""
    return AclFilter.of(
        kafka_resource_type(entity.resource_type_filter),
        entity.resource_name_filter,
        entity.pattern_type_filter,
        entity.principal_filter,
        entity.host_filter,
        entity.operation,
        entity.permission_type,
    )


async def describe_acls(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    resource_cls = wire.sibling(cls, "DescribeAclsResource")
    description_cls = wire.sibling(cls, "AclDescription")

    def answer(code: ErrorCode, message: str | None, resources: tuple[Any, ...] = ()) -> Any:
        return wire.build(
            cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message, resources=resources
        )

    refused = _refused(door, AclOperation.DESCRIBE)
    if refused is not None:
        return answer(*refused)
    try:
        wanted = _filter(request.body)
    except InvalidName as exc:
        return answer(ErrorCode.invalid_request, str(exc))
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in select(door.node.metadata.acls(), kafka_filters(wanted)):
        key = (int(acl.resource_type), acl.name, int(acl.pattern_type))
        by_resource.setdefault(key, []).append(acl)
    resources = tuple(
        wire.build(
            resource_cls,
            resource_type=kind,
            resource_name=name,
            pattern_type=pattern,
            acls=tuple(
                wire.build(
                    description_cls,
                    principal=acl.principal,
                    host=acl.host,
                    operation=int(acl.operation),
                    permission_type=int(acl.permission),
                )
                for acl in acls
            ),
        )
        for (kind, name, pattern), acls in sorted(by_resource.items())
    )
    return answer(ErrorCode.none, None, resources)


async def delete_acls(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "DeleteAclsFilterResult")
    matching_cls = wire.sibling(cls, "DeleteAclsMatchingAcl")
    refused = _refused(door, AclOperation.ALTER)
    answers: list[tuple[ErrorCode, str | None, list[AclBinding]]] = []
    filters: list[AclFilter] = []
    spans: list[int] = []  # how many of ``filters`` each usable filter of the request became
    for entity in request.body.filters:
        if refused is not None:
            answers.append((*refused, []))
            continue
        try:
            narrowed = kafka_filters(_filter(entity))
            filters += narrowed
            spans.append(len(narrowed))
            answers.append((ErrorCode.none, None, []))
        except InvalidName as exc:
            answers.append((ErrorCode.invalid_request, str(exc), []))
    if filters:
        with Caught() as caught:  # the change was not made: every filter it held says why
            removed = iter(await door.node.cluster.admin.call(AdminService.delete_acls, filters))
            each = iter([[acl for _ in range(span) for acl in next(removed)] for span in spans])
            answers = [(c, m, next(each) if c is ErrorCode.none else acls) for c, m, acls in answers]
        if caught.failed:
            answers = [
                (caught.code, caught.message, []) if c is ErrorCode.none else (c, m, a) for c, m, a in answers
            ]

    def matching(acl: AclBinding) -> Any:
        return wire.build(
            matching_cls,
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=int(acl.resource_type),
            resource_name=acl.name,
            pattern_type=int(acl.pattern_type),
            principal=acl.principal,
            host=acl.host,
            operation=int(acl.operation),
            permission_type=int(acl.permission),
        )

    results = tuple(
        wire.build(
            result_cls, error_code=code, error_message=m, matching_acls=tuple(matching(a) for a in acls)
        )
        for code, m, acls in answers
    )
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, filter_results=results)
