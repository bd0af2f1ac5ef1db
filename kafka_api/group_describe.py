"""The shape of a ConsumerGroupDescribe (KIP-848) or ShareGroupDescribe (KIP-932) answer, the same for
both (``consumer_group_apis``, ``share_group_apis``): its classes, and a group's entry."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire


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
