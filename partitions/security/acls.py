"""Access control lists in Kafka's model, and the decision who may do what (pure: no I/O, no clock).

An ACL (``AclBinding``) says: a principal (``User:alice``, or ``User:*`` for every user), from a host
(``*`` for any), is allowed or denied an operation on resources of a type (topic, consumer group, the
cluster, a transactional producer's id, a user whose delegation tokens others may make or see (KIP-373:
its name is the principal, ``User:alice``); and, as Redpanda's schema registry ACLs, a registry subject and
the registry itself) whose name is given literally (``*`` for every one of the type) or as a prefix.
The controller replicates them like topics and users; every node decides from its copy (``Authorizer``),
as Kafka's ``AclAuthorizer`` does:

1. A super user (``raftlog serve --super-user``, and the admin token's ``User:admin``) may do anything.
2. The ACLs that concern the resource are those of its type whose pattern matches its name: a literal
   equal to it or ``*``, or a prefix it starts with.
3. A DENY among them that names the principal (or ``User:*``), the host (or ``*``) and the operation (or
   ``ALL``) refuses.
4. Otherwise an ALLOW that names the principal and host and the operation, ``ALL``, or an operation that
   implies it allows: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS.
5. Otherwise the answer is no, ACLs or none (Kafka's ``allow.everyone.if.no.acl.found=false``).

Filters (``AclFilter``) select ACLs to describe or delete, as Kafka's DescribeAcls and DeleteAcls take
them: ``ANY`` for a type, pattern, operation or permission; None for a name, principal or host matches
every one; pattern ``MATCH`` finds the ACLs that would concern a resource of that name.

The enums carry Kafka's own codes, so the Kafka APIs pass them as they come. The registry's two types
have codes outside Kafka's enum (Redpanda's: 100 and 101): the Kafka door neither shows nor takes them
(``KAFKA_RESOURCE_TYPES``, ``kafka_filters``); the HTTP admin API ``/v1/acls`` does. The host of a request is
the client's IP address as the node sees it (``client_host``: the peer of the connection; a proxy's
address when a proxy connects, since no forwarded-for header is trusted).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar, Self

from partitions.errors import InvalidName
from raftlog.addresses import normalize_host

PRINCIPAL_TYPE = "User"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD = "*"  # a literal name or host matching every one
ACL_NAME_BYTES_MAX = 1024


class ResourceType(enum.IntEnum):
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5  # a transactional producer's id (Kafka's transactional.id)
    DELEGATION_TOKEN = 6  # a delegation token, named by its id: who may DESCRIBE it besides its owner
    USER = 7  # a user, named as a principal (User:alice): who may make or see its delegation tokens
    SUBJECT = 100  # a schema registry subject (Redpanda's sr_subject; not on Kafka's wire)
    REGISTRY = 101  # the schema registry's global config, mode and listings (Redpanda's sr_registry)


KAFKA_RESOURCE_TYPES = frozenset(
    {
        ResourceType.ANY,
        ResourceType.TOPIC,
        ResourceType.GROUP,
        ResourceType.CLUSTER,
        ResourceType.TRANSACTIONAL_ID,
        ResourceType.DELEGATION_TOKEN,
        ResourceType.USER,
    }
)
"""The types Kafka's ACL APIs know; the others are the HTTP API's alone."""
REGISTRY_TYPES = frozenset({ResourceType.SUBJECT, ResourceType.REGISTRY})


class PatternType(enum.IntEnum):
    ANY = 1  # filters only: literal and prefixed
    MATCH = 2  # filters only: every pattern that would match the name
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13  # a delegation token for another owner (KIP-373), on that owner's User resource
    DESCRIBE_TOKENS = 14  # another owner's delegation tokens, on that owner's User resource


TOKEN_OPERATIONS = frozenset({Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS})  # KIP-373's, on a User

AclOperation = Operation  # the name front doors use, whose route tables have operations of their own


class Permission(enum.IntEnum):
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name, as Kafka names it
REGISTRY_NAME = "schema-registry"  # the one registry resource's name (Redpanda's has none)
ONE_NAME: Mapping[ResourceType, str] = MappingProxyType(
    {ResourceType.CLUSTER: CLUSTER_NAME, ResourceType.REGISTRY: REGISTRY_NAME}
)
"""The types with one resource, and its name (an ACL on one names it literally)."""

# what each operation also allows (Kafka's implied operations)
_IMPLIED: Mapping[Operation, frozenset[Operation]] = MappingProxyType(
    {
        Operation.DESCRIBE: frozenset(
            {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
        ),
        Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
    }
)

# Redpanda's schema registry operations, the same on a subject and on the registry
_REGISTRY_OPERATIONS = frozenset(
    {
        Operation.ALL,
        Operation.READ,
        Operation.WRITE,
        Operation.DELETE,
        Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    }
)

# the operations that mean something for each resource type (Kafka's list; Redpanda's for the registry)
VALID_OPERATIONS: Mapping[ResourceType, frozenset[Operation]] = MappingProxyType(
    {
        ResourceType.TOPIC: frozenset(
            {
                Operation.ALL,
                Operation.READ,
                Operation.WRITE,
                Operation.CREATE,
                Operation.DELETE,
                Operation.ALTER,
                Operation.DESCRIBE,
                Operation.DESCRIBE_CONFIGS,
                Operation.ALTER_CONFIGS,
            }
        ),
        ResourceType.GROUP: frozenset({Operation.ALL, Operation.READ, Operation.DELETE, Operation.DESCRIBE}),
        ResourceType.TRANSACTIONAL_ID: frozenset({Operation.ALL, Operation.WRITE, Operation.DESCRIBE}),
        ResourceType.USER: frozenset({Operation.ALL, Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
        ResourceType.DELEGATION_TOKEN: frozenset({Operation.ALL, Operation.DESCRIBE}),
        ResourceType.SUBJECT: _REGISTRY_OPERATIONS,
        ResourceType.REGISTRY: _REGISTRY_OPERATIONS,
        ResourceType.CLUSTER: frozenset(
            {
                Operation.ALL,
                Operation.CREATE,
                Operation.ALTER,
                Operation.DESCRIBE,
                Operation.CLUSTER_ACTION,
                Operation.DESCRIBE_CONFIGS,
                Operation.ALTER_CONFIGS,
                Operation.IDEMPOTENT_WRITE,
            }
        ),
    }
)


class InvalidAcl(InvalidName):
    """An ACL or filter that cannot be used; the message names the field and the rule."""


# the enum of each field that holds one (an ACL that crossed between nodes comes back with plain ints)
_BINDING_ENUMS: Mapping[str, type[enum.IntEnum]] = MappingProxyType(
    {
        "resource_type": ResourceType,
        "pattern_type": PatternType,
        "operation": Operation,
        "permission": Permission,
    }
)


def _coerce(value: object, enums: Mapping[str, type[enum.IntEnum]]) -> None:
    """Turn a frozen dataclass's int codes into their enum members (``InvalidAcl`` for an unknown code)."""
    for name, kind in enums.items():
        code = getattr(value, name)
        if not isinstance(code, kind):
            object.__setattr__(value, name, _enum(kind, code, name))


def check_principal(principal: object, field: str = "principal") -> str:
    if not isinstance(principal, str):
        raise InvalidAcl(field, principal, "must be a string like 'User:alice' or 'User:*'")
    kind, colon, name = principal.partition(":")
    if not colon or kind != PRINCIPAL_TYPE or not name:
        raise InvalidAcl(field, principal, "must be 'User:<name>' or 'User:*'")
    if not name.isprintable() or len(principal.encode("utf-8")) > ACL_NAME_BYTES_MAX:
        raise InvalidAcl(field, principal, f"printable, at most {ACL_NAME_BYTES_MAX} bytes")
    return principal


def _check_text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidAcl(field, value, "must be a non-empty string")
    if not value.isprintable() or len(value.encode("utf-8")) > ACL_NAME_BYTES_MAX:
        raise InvalidAcl(field, value, f"printable, at most {ACL_NAME_BYTES_MAX} bytes")
    return value


def _enum(kind: type[enum.IntEnum], value: object, field: str) -> enum.IntEnum:
    """An enum member from its Kafka code or its name (any case)."""
    if isinstance(value, kind):
        return value
    try:
        if isinstance(value, int) and not isinstance(value, bool):
            return kind(value)
        if isinstance(value, str):
            return kind[value.upper()]
    except (ValueError, KeyError):
        pass
    names = ", ".join(m.name.lower() for m in kind)
    raise InvalidAcl(field, value, f"one of {names}")


# a binding's and a filter's fields, in the order of their rows
_FIELDS = ("resource_type", "name", "pattern_type", "principal", "host", "operation", "permission")


class _AclFields(abc.ABC):
    """What a binding and a filter share: the same seven fields (``_FIELDS``), whose codes become enums
    when made (``_coerce``), read from rows as each kind checks its own (``of``), and shown two ways: as
    rows between nodes (enums as their codes) and as the HTTP API shows them (enums by their lowercase
    names)."""

    __slots__ = ()
    _ROW_FIELD: ClassVar[str]  # the field ``InvalidAcl`` names for a malformed row
    _ROW_NAME: ClassVar[str]  # what a malformed row is not

    def __post_init__(self) -> None:
        _coerce(self, _BINDING_ENUMS)

    @classmethod
    @abc.abstractmethod
    def of(cls, *fields: Any) -> Self:
        """A checked value from codes or names, the fields in ``_FIELDS`` order."""

    @classmethod
    def from_row(cls, row: list[object]) -> Self:
        if not isinstance(row, list | tuple) or len(row) != len(_FIELDS):
            raise InvalidAcl(cls._ROW_FIELD, str(row)[:80], f"is not an {cls._ROW_NAME}")
        return cls.of(*row)

    def to_row(self) -> list[object]:
        return [int(value) if isinstance(value, enum.IntEnum) else value for _, value in self._fields()]

    def to_json(self) -> dict[str, object]:
        return {
            name: value.name.lower() if isinstance(value, enum.IntEnum) else value
            for name, value in self._fields()
        }

    def _fields(self) -> list[tuple[str, object]]:
        return [(name, getattr(self, name)) for name in _FIELDS]


@dataclass(frozen=True, slots=True)
class AclBinding(_AclFields):
    _ROW_FIELD: ClassVar[str] = "acl"
    _ROW_NAME: ClassVar[str] = "ACL row"

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @classmethod
    def of(
        cls,
        resource_type: object,
        name: object,
        pattern_type: object,
        principal: object,
        host: object,
        operation: object,
        permission: object,
    ) -> AclBinding:
        """A checked binding from codes or names: no ``ANY``/``MATCH``, an operation its resource type
        has, the cluster resource named ``kafka-cluster`` and the registry ``schema-registry``
        (literally)."""
        kind = ResourceType(_enum(ResourceType, resource_type, "resource_type"))
        pattern = PatternType(_enum(PatternType, pattern_type, "pattern_type"))
        operation_ = Operation(_enum(Operation, operation, "operation"))
        permission_ = Permission(_enum(Permission, permission, "permission"))
        if kind is ResourceType.ANY:
            raise InvalidAcl("resource_type", "any", "an ACL names one resource type")
        if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl("pattern_type", pattern.name.lower(), "an ACL is literal or prefixed")
        if operation_ is Operation.ANY or permission_ is Permission.ANY:
            raise InvalidAcl("operation/permission", "any", "an ACL names one operation and one permission")
        if operation_ not in VALID_OPERATIONS[kind]:
            valid = ", ".join(sorted(o.name.lower() for o in VALID_OPERATIONS[kind]))
            raise InvalidAcl("operation", operation_.name.lower(), f"a {kind.name.lower()} takes {valid}")
        name_ = _check_text(name, "name")
        one = ONE_NAME.get(kind)
        if one is not None and (name_ != one or pattern is not PatternType.LITERAL):
            raise InvalidAcl("name", name_, f"the {kind.name.lower()} resource is the literal {one!r}")
        if pattern is PatternType.PREFIXED and name_ == WILDCARD:
            raise InvalidAcl("name", name_, "a prefixed pattern cannot be '*' (use a literal '*')")
        return cls(
            kind,
            name_,
            pattern,
            check_principal(principal),
            _check_text(host, "host"),
            operation_,
            permission_,
        )

    def concerns(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL's resource pattern matches the resource."""
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD
        return name.startswith(self.name)


@dataclass(frozen=True, slots=True)
class AclFilter(_AclFields):
    """Which ACLs to describe or delete (None: any name, principal or host)."""

    _ROW_FIELD: ClassVar[str] = "filter"
    _ROW_NAME: ClassVar[str] = "ACL filter row"

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    @classmethod
    def of(
        cls,
        resource_type: object = ResourceType.ANY,
        name: object = None,
        pattern_type: object = PatternType.ANY,
        principal: object = None,
        host: object = None,
        operation: object = Operation.ANY,
        permission: object = Permission.ANY,
    ) -> AclFilter:
        return cls(
            ResourceType(_enum(ResourceType, resource_type, "resource_type")),
            None if name is None else _check_text(name, "name"),
            PatternType(_enum(PatternType, pattern_type, "pattern_type")),
            None if principal is None else check_principal(principal),
            None if host is None else _check_text(host, "host"),
            Operation(_enum(Operation, operation, "operation")),
            Permission(_enum(Permission, permission, "permission")),
        )

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and acl.resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is not None and not acl.concerns(acl.resource_type, self.name):
                return False
        else:
            if self.pattern_type is not PatternType.ANY and acl.pattern_type is not self.pattern_type:
                return False
            if self.name is not None and acl.name != self.name:
                return False
        return (
            (self.principal is None or acl.principal == self.principal)
            and (self.host is None or acl.host == self.host)
            and (self.operation is Operation.ANY or acl.operation is self.operation)
            and (self.permission is Permission.ANY or acl.permission is self.permission)
        )


def kafka_resource_type(value: object) -> ResourceType:
    """A resource type as Kafka's ACL APIs give it (a code or a name); ``InvalidAcl`` for one they do not
    have, the registry's among them (Kafka answers an unknown type INVALID_REQUEST)."""
    kind = ResourceType(_enum(ResourceType, value, "resource_type"))
    if kind not in KAFKA_RESOURCE_TYPES:
        known = ", ".join(sorted(k.name.lower() for k in KAFKA_RESOURCE_TYPES))
        raise InvalidAcl("resource_type", value, f"Kafka's ACL APIs take {known}")
    return kind


def kafka_filters(acl_filter: AclFilter) -> tuple[AclFilter, ...]:
    """A filter from Kafka's ACL APIs as filters that select Kafka's types only: one of ``ANY`` type
    becomes one per type Kafka has, so a DeleteAcls of everything leaves the registry's ACLs alone."""
    if acl_filter.resource_type is not ResourceType.ANY:
        return (acl_filter,)
    kinds = sorted(KAFKA_RESOURCE_TYPES - {ResourceType.ANY})
    return tuple(replace(acl_filter, resource_type=kind) for kind in kinds)


def select(acls: Iterable[AclBinding], filters: Iterable[AclFilter]) -> tuple[AclBinding, ...]:
    """The ACLs any of ``filters`` matches, in a stable order."""
    wanted = tuple(filters)
    return tuple(sorted((a for a in acls if any(f.matches(a) for f in wanted)), key=AclBinding.to_row))


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str  # "super user", "denied by <acl>", "allowed by <acl>", "no ACL allows it"


class Authorizer:
    """Decides from one set of ACLs (a controller metadata snapshot) and the node's super users."""

    def __init__(self, acls: Iterable[AclBinding], super_users: Iterable[str] = ()) -> None:
        self._by_type: dict[ResourceType, tuple[AclBinding, ...]] = {}
        for acl in acls:
            self._by_type[acl.resource_type] = (*self._by_type.get(acl.resource_type, ()), acl)
        self.super_users = frozenset(super_users)

    def decide(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> Decision:
        if principal in self.super_users:
            return Decision(True, "super user")
        concerning = [
            acl
            for acl in self._by_type.get(resource_type, ())
            if acl.concerns(resource_type, name)
            and acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.host in (host, WILDCARD)
        ]
        for acl in concerning:
            if acl.permission is Permission.DENY and acl.operation in (operation, Operation.ALL):
                return Decision(False, f"denied by {_describe(acl)}")
        allowing = _IMPLIED.get(operation, frozenset({operation})) | {Operation.ALL}
        for acl in concerning:
            if acl.permission is Permission.ALLOW and acl.operation in allowing:
                return Decision(True, f"allowed by {_describe(acl)}")
        return Decision(False, "no ACL allows it")

    def allows(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        return self.decide(principal, host, operation, resource_type, name).allowed

    def allows_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type would allow the operation (Kafka's
        ``authorizeByResourceType``, which InitProducerId asks of WRITE on topics): an ALLOW of the
        operation (or ALL) that no DENY of it covers, where a DENY covers a literal name it equals or
        starts with as a prefix, and a prefix it is a prefix of; a literal ``*`` DENY covers everything.
        Implied operations are not taken into account, as in Kafka."""
        if principal in self.super_users:
            return True
        mine = [
            acl
            for acl in self._by_type.get(resource_type, ())
            if acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.host in (host, WILDCARD)
            and acl.operation in (operation, Operation.ALL)
        ]
        denied = [acl for acl in mine if acl.permission is Permission.DENY]
        literals = {acl.name for acl in denied if acl.pattern_type is PatternType.LITERAL}
        prefixes = [acl.name for acl in denied if acl.pattern_type is PatternType.PREFIXED]
        if WILDCARD in literals:
            return False
        for acl in mine:
            if acl.permission is not Permission.ALLOW:
                continue
            covered = any(acl.name.startswith(prefix) for prefix in prefixes)
            if acl.pattern_type is PatternType.LITERAL:
                covered = covered or acl.name in literals
            if not covered:
                return True
        return False


class Authorizers:
    """The ``Authorizer`` of the ACLs a node holds now, made again only when they change (the controller
    publishes a new tuple of ACLs with each change of them, and the same one otherwise)."""

    def __init__(self, super_users: Iterable[str]) -> None:
        self.super_users = frozenset(super_users)
        self._acls: tuple[AclBinding, ...] | None = None
        self._authorizer = Authorizer((), self.super_users)

    def of(self, acls: tuple[AclBinding, ...]) -> Authorizer:
        if acls is not self._acls:
            self._authorizer = Authorizer(acls, self.super_users)
            self._acls = acls
        return self._authorizer


def client_host(address: str | None) -> str:
    """The host an ACL's ``host`` is matched against: the client's IP address as the node sees it, in
    its plain form (an IPv4 client of a dual-stack listener, ``::ffff:10.0.0.1``, is ``10.0.0.1``); ""
    when unknown, which only ``*`` matches."""
    if not address:
        return ""
    return normalize_host(address)


def _describe(acl: AclBinding) -> str:
    pattern = "" if acl.pattern_type is PatternType.LITERAL else " (prefix)"
    return (
        f"{acl.permission.name.lower()} {acl.principal} {acl.operation.name.lower()} on "
        f"{acl.resource_type.name.lower()} {acl.name!r}{pattern} from {acl.host}"
    )
