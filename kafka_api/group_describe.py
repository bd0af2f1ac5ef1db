"""What ConsumerGroupDescribe (KIP-848), ShareGroupDescribe (KIP-932) and StreamsGroupDescribe (KIP-1071)
share (``consumer_group_apis``, ``share_group_apis``, ``streams_group_apis``): ``described_groups``, the
rule each group of the request is answered by, and ``DescribeShape``, the shape of the first two's answer
(the same for both): its classes, and a group's entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.coordinators import coordinating
from kafka_api.door import Door
from kafka_api.errors import Caught, Mapper, code_of
from partitions.groups.errors import UnknownGroup
from partitions.security.acls import AclOperation, ResourceType

T = TypeVar("T")


async def described_groups(
    door: Door,
    names: Iterable[str],
    described: Callable[[str, ErrorCode, str | None], Any],
    describe: Callable[[str], Awaitable[T]],
    found: Callable[[str, T], Any],
    mapper: Mapper = code_of,
    not_found: Callable[[str], str] | None = None,
) -> tuple[Any, ...]:
    """Each named group's entry, as Kafka's describes answer it: refused (``described`` with the code and
    message) without DESCRIBE on the group; else coordinated here and ``describe``'d, any error of the two
    the group's answer (mapped by ``mapper``), but a group there is none of (``UnknownGroup``)
    GROUP_ID_NOT_FOUND in ``not_found``'s words when given; else ``found``'s entry of what ``describe``
    returned."""
    groups = []
    for name in names:
        if not door.allows(AclOperation.DESCRIBE, ResourceType.GROUP, name):
            refusal = str(door.refusal(AclOperation.DESCRIBE, ResourceType.GROUP, name))
            groups.append(described(name, ErrorCode.group_authorization_failed, refusal))
            continue
        missing = None
        with Caught(mapper) as caught:  # every error is the group's answer
            coordinating(door, name)
            try:
                state = await describe(name)
            except UnknownGroup:
                if not_found is None:
                    raise
                missing = not_found
        if caught.failed:
            groups.append(described(name, caught.code, caught.message))
        elif missing is not None:  # no such group, in Kafka's words
            groups.append(described(name, ErrorCode.group_id_not_found, missing(name)))
        else:
            groups.append(found(name, state))
    return tuple(groups)


class DescribeShape:
    """The classes of a ConsumerGroupDescribe or ShareGroupDescribe answer (the same shape) and a group's
    entry, a Dead group's fields unless ``values`` say otherwise."""

    def __init__(self, request: wire.Request) -> None:
        self.response = wire.response_class(request.api_key, request.api_version)
        self._group = wire.sibling(self.response, "DescribedGroup")
        self.member = wire.sibling(self.response, "Member")
        self.assignment = wire.sibling(self.response, "Assignment")
        self.entry = wire.sibling(self.response, "TopicPartitions")

    def described(self, name: str, code: ErrorCode, message: str | None = None, **values: Any) -> Any:
        fields: dict[str, Any] = {
            "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "",
            "members": (), "authorized_operations": wire.AUTHORIZED_OPERATIONS_OMITTED,
        }  # fmt: skip
        fields.update(values)
        return wire.build(self._group, group_id=name, error_code=code, error_message=message, **fields)
