"""The controller's ACL commands (pure, deterministic): ``CreateAcls`` adds bindings, ``DeleteAcls``
removes those its filters match, as Kafka's CreateAcls and DeleteAcls do. ``controller.py`` encodes them
among its commands and keeps the ACLs in its metadata and its snapshot; the rules live here so that the
controller's module stays about topics.

The ACLs are a sorted tuple without repeats, replaced whole by each change. Creating an ACL that exists
changes nothing (Kafka's answer is success too); a change is refused whole when a binding cannot be one or
when the cluster would hold more than ``ACLS_MAX``.
"""

from __future__ import annotations

from dataclasses import dataclass

from partitions.errors import InvalidCommand, InvalidName
from partitions.security.acls import AclBinding, AclFilter, InvalidAcl, select

ACLS_MAX = 10_000  # in a cluster: each decision scans those of its resource type
ACLS_PER_CHANGE_MAX = 1_000  # bindings created, or filters deleting, in one change


@dataclass(frozen=True, slots=True)
class CreateAcls:
    bindings: tuple[AclBinding, ...]


@dataclass(frozen=True, slots=True)
class DeleteAcls:
    filters: tuple[AclFilter, ...]


AclCommand = CreateAcls | DeleteAcls
# what a change answers: the ACLs created (not there before), or those each filter removed, filter by filter
AclResult = tuple[AclBinding, ...] | tuple[tuple[AclBinding, ...], ...]


def rows(command: AclCommand) -> list[list[object]]:
    """The command's part of its encoding."""
    if isinstance(command, CreateAcls):
        return [binding.to_row() for binding in command.bindings]
    return [acl_filter.to_row() for acl_filter in command.filters]


def from_rows(create: bool, value: object) -> AclCommand:
    """The command back from ``rows``; ``InvalidCommand`` when they are not rows of usable ACLs or
    filters (the proposer checked each one: a node of another version, or a bug)."""
    if not isinstance(value, list) or not all(isinstance(row, list) and len(row) == 7 for row in value):
        raise InvalidCommand("malformed ACL rows")
    try:
        if create:
            return CreateAcls(tuple(AclBinding.from_row(row) for row in value))
        return DeleteAcls(tuple(AclFilter.from_row(row) for row in value))
    except InvalidName:
        raise InvalidCommand("malformed ACL rows") from None


def check(command: AclCommand) -> None:
    """Raise ``InvalidAcl`` for a change the controller would refuse whatever its ACLs are."""
    count = len(command.bindings) if isinstance(command, CreateAcls) else len(command.filters)
    if not 1 <= count <= ACLS_PER_CHANGE_MAX:
        what = "ACLs" if isinstance(command, CreateAcls) else "filters"
        raise InvalidAcl(what, count, f"1 to {ACLS_PER_CHANGE_MAX} in one change")


def apply(acls: tuple[AclBinding, ...], command: AclCommand) -> tuple[tuple[AclBinding, ...], AclResult]:
    """The ACLs after the change and what it answers; raises ``InvalidAcl`` and changes nothing."""
    check(command)
    if isinstance(command, CreateAcls):
        held = set(acls)
        created = tuple(sorted(set(command.bindings) - held, key=AclBinding.to_row))
        if len(acls) + len(created) > ACLS_MAX:
            raise InvalidAcl("acls", len(acls) + len(created), f"a cluster holds at most {ACLS_MAX} ACLs")
        return tuple(sorted(held | set(created), key=AclBinding.to_row)), created
    removed = tuple(select(acls, [acl_filter]) for acl_filter in command.filters)
    gone = {acl for matched in removed for acl in matched}
    return tuple(acl for acl in acls if acl not in gone), removed
