"""Who may do what through the HTTP API (``raftlog serve --enforce-acls``): the ACLs of the controller's
metadata, decided by ``partitions.security.acls.Authorizer`` as Kafka's authorizer decides them.

Every client route of the route table, and every ``/v1`` route, declares its ``Access``: the ACLs it needs
(``Need``: an operation on a topic or group named by a path or query parameter, or on the cluster), what
its handler checks or filters itself (the topics in a body, the partitions a member was assigned, a list
shown), or why it asks none; a need on the cluster may be waived for the user a path names (its own
tokens). A client or ``/v1`` route without one fails ``tests/api/test_access.py``. ``/v1`` has a user to
check only with ``--enforce-acls`` (``auth.users_log_in``); otherwise it takes the admin token alone. On a
request the order is: authentication (``auth.py``, in the error middleware, which keeps the ``Caller`` on
the request), content negotiation and the names in the path (``app._bind``), the route's needs
(``check``), then the handler. A refusal is ``AuthorizationFailed`` (403/40301 naming the resource and the
operation), before anything is done.

The operations follow Kafka's for the same work (``KafkaApis``): produce needs WRITE on the topic, fetch
READ, offsets and partition views DESCRIBE, a topic's description with its configs DESCRIBE and
DESCRIBE_CONFIGS; a group's committed offsets need READ on the group and on each topic committed, reading
them DESCRIBE on both; a consumer instance's calls (Kafka's JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
READ on its group, and its reads READ on each topic. The topic list shows what the caller may DESCRIBE.
The admin routes ask what Kafka's admin APIs ask: CreateTopics CREATE on the cluster or the topic,
DeleteTopics DELETE, CreatePartitions ALTER, DescribeConfigs DESCRIBE_CONFIGS and AlterConfigs
ALTER_CONFIGS on the topic; reassignments, leader elections, quorum voters, SCRAM users and ACLs ALTER on
the cluster, their descriptions DESCRIBE; groups DESCRIBE or DELETE on the group (ListGroups: those the
caller may DESCRIBE, every one with DESCRIBE cluster), transactions DESCRIBE on the transactional id.

The schema registry's routes ask what Redpanda's registry asks (``api/registry_routes.py`` declares each, and
docs/security.md says where it departs): a subject's reads READ or DESCRIBE on the subject, a registration
WRITE, deletes DELETE, its config and mode DESCRIBE_CONFIGS / ALTER_CONFIGS; the global config and mode
the same on the registry (``schema-registry``); a schema by id READ on some subject holding it; the
subject and schema listings show what the caller may DESCRIBE / READ.

Nobody is checked when ACLs are not enforced, nor a caller with the admin token (``User:admin``); a super
user (``--super-user``) passes every check (the ``Authorizer``'s first rule).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web

from api import state
from api.errors import BadRequest
from partitions.errors import AuthorizationFailed
from partitions.security.acls import ONE_NAME, AclOperation, Authorizer, ResourceType
from raftlog.errors import check as check_invariant

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
SUBJECT, REGISTRY = ResourceType.SUBJECT, ResourceType.REGISTRY
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
DESCRIBE_CONFIGS, DELETE = AclOperation.DESCRIBE_CONFIGS, AclOperation.DELETE
CREATE, ALTER, ALTER_CONFIGS = AclOperation.CREATE, AclOperation.ALTER, AclOperation.ALTER_CONFIGS
_PATH_PARAM = re.compile(r"\{([a-zA-Z_]+)\}")


@dataclass(frozen=True, slots=True)
class Need:
    """An operation on a resource, named by a parameter of the request (None: the one resource of its type,
    the cluster or the registry)."""

    resource_type: ResourceType
    operation: AclOperation
    param: str | None = None  # a path parameter, or a query parameter when ``query``
    query: bool = False
    unless_caller: str | None = None  # a path parameter naming a user: not asked of that user itself,
    password_only: bool = False  # nor, with this, of that user logged in with one of its API tokens

    def describe(self) -> str:
        """``"WRITE topic {topic}"``, as the OpenAPI document and the docs say it."""
        where = "" if self.param is None else (f" ?{self.param}" if self.query else f" {{{self.param}}}")
        by = " by its password" if self.password_only else ""
        unless = "" if self.unless_caller is None else f" (unless the caller is {{{self.unless_caller}}}{by})"
        return f"{self.operation.name} {self.resource_type.name.lower()}{where}{unless}"


def topic(operation: AclOperation, param: str = "topic", query: bool = False) -> Need:
    return Need(TOPIC, operation, param, query)


def group(operation: AclOperation, param: str = "group") -> Need:
    return Need(GROUP, operation, param)


def cluster(operation: AclOperation, unless_caller: str | None = None, password_only: bool = False) -> Need:
    return Need(CLUSTER, operation, unless_caller=unless_caller, password_only=password_only)


def transactional_id(operation: AclOperation, param: str = "transactional_id") -> Need:
    return Need(TRANSACTIONAL_ID, operation, param)


def subject(operation: AclOperation, param: str = "subject") -> Need:
    """On a schema registry subject."""
    return Need(SUBJECT, operation, param)


def registry(operation: AclOperation) -> Need:
    """On the schema registry itself (its global config and mode, its listings by id)."""
    return Need(REGISTRY, operation)


@dataclass(frozen=True, slots=True)
class Access:
    """What a client route needs of the caller's ACLs."""

    needs: tuple[Need, ...] = ()
    in_handler: str = ""  # what the handler checks or filters itself, in words
    open: str = ""  # why the route asks no ACL (it still needs an authenticated caller)

    def __post_init__(self) -> None:
        checks = bool(self.needs or self.in_handler)
        check_invariant(checks != bool(self.open), f"an Access either checks or says why not: {self}")

    def describe(self) -> list[str]:
        """Every check in words: the needs, then what the handler does."""
        return [need.describe() for need in self.needs] + ([self.in_handler] if self.in_handler else [])

    def unknown_params(self, path: str, query: Iterable[str]) -> list[str]:
        """The parameters its needs name that the route does not have (a test checks none)."""
        in_path = set(_PATH_PARAM.findall(path))
        names = set(query)
        return [
            need.describe()
            for need in self.needs
            if (need.param is not None and need.param not in (names if need.query else in_path))
            or (need.unless_caller is not None and need.unless_caller not in in_path)
        ]


def needs(*needed: Need, in_handler: str = "") -> Access:
    return Access(needed, in_handler)


def open_to_users(why: str) -> Access:
    return Access(open=why)


def _authorizer(request: web.Request) -> tuple[state.Caller, Authorizer] | None:
    """The caller and the authorizer of the ACLs this node holds now; None when nothing is checked."""
    app_state = state.state(request)
    if app_state.authorizers is None:
        return None
    caller = request.get(state.CALLER)
    check_invariant(caller is not None, f"ACLs enforced on {request.path} without an authenticated caller")
    assert caller is not None  # narrowed for the type checker; checked above
    if caller.admin_token:
        return None
    return caller, app_state.authorizers.of(app_state.node.metadata.acls())


def enforced(request: web.Request) -> bool:
    """Whether this request's caller is checked at all (checks that cost a call are skipped otherwise)."""
    return _authorizer(request) is not None


def allowed(request: web.Request, resource_type: ResourceType, operation: AclOperation, name: str) -> bool:
    """Whether the caller may (always, when ACLs are not enforced)."""
    found = _authorizer(request)
    if found is None:
        return True
    caller, authorizer = found
    return authorizer.allows(caller.principal, caller.host, operation, resource_type, name)


def authorize(request: web.Request, resource_type: ResourceType, operation: AclOperation, name: str) -> None:
    """Raise ``AuthorizationFailed`` unless the caller may."""
    if not allowed(request, resource_type, operation, name):
        caller = request[state.CALLER]
        raise AuthorizationFailed.of(
            caller.principal, operation.name.lower(), resource_type.name.lower(), name
        )


def authorize_topics(request: web.Request, operation: AclOperation, topics: Iterable[str]) -> None:
    """Raise ``AuthorizationFailed`` for the first of ``topics`` (in name order) the caller may not."""
    for name in sorted(set(topics)):
        authorize(request, TOPIC, operation, name)


def authorize_any(
    request: web.Request,
    resource_type: ResourceType,
    operation: AclOperation,
    names: Iterable[str],
    what: str,
) -> None:
    """Raise ``AuthorizationFailed`` (naming ``what``) unless the caller may on at least one of ``names``;
    with none, only a caller who passes every check (a super user) may."""
    found = _authorizer(request)
    if found is None:
        return
    caller, authorizer = found
    if caller.principal in authorizer.super_users:
        return
    if any(authorizer.allows(caller.principal, caller.host, operation, resource_type, n) for n in names):
        return
    raise AuthorizationFailed.of(caller.principal, operation.name.lower(), resource_type.name.lower(), what)


def _is_caller(request: web.Request, need: Need) -> bool:
    """Whether the caller is the user the need's ``unless_caller`` names (the admin token is no user)."""
    caller = request.get(state.CALLER)
    if need.unless_caller is None or caller is None or caller.admin_token:
        return False
    by_password = not (need.password_only and caller.by_token)
    return by_password and caller.principal == f"User:{request.match_info[need.unless_caller]}"


def check(request: web.Request, access: Access) -> None:
    """The route's needs, before its handler runs."""
    for need in access.needs:
        if _is_caller(request, need):
            continue
        if need.param is None:
            name = ONE_NAME[need.resource_type]
        elif need.query:
            value = request.query.get(need.param)
            if value is None:
                raise BadRequest(f"query parameter {need.param}: missing")
            name = value
        else:
            name = request.match_info[need.param]
        authorize(request, need.resource_type, need.operation, name)
