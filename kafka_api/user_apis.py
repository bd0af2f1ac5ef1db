"""DescribeUserScramCredentials and AlterUserScramCredentials: the users of ``/v1/users`` as Kafka's admin
clients manage them (confluent-kafka's ``AdminClient.describe_user_scram_credentials`` and
``alter_user_scram_credentials``, kafka-python's ``KafkaAdminClient``).

An upsertion carries a salt, an iteration count and the password the client salted with them (never the
password); StoredKey and ServerKey are derived from it here and only the credential travels to the
controller leader, through the same admin service ``/v1/users`` uses. A deletion removes one mechanism's
credential; a user left without any is deleted. Each user's changes are one controller change, and
each user gets its own result, as in Kafka: UNACCEPTABLE_CREDENTIAL (a name, salt, iteration count or
salted password that cannot be one), UNSUPPORTED_SASL_MECHANISM (a mechanism other than SCRAM-SHA-256 (1)
and SCRAM-SHA-512 (2)), DUPLICATE_RESOURCE (a user's mechanism named twice in the request),
RESOURCE_NOT_FOUND (a deletion of a credential the user does not have; describing an unknown user).
A user refused changes nothing.

Who may call them (``Security.may_manage_users``): with ACLs enforced, whoever may DESCRIBE (to describe)
or ALTER (to change) the cluster, as Kafka asks; without, a super user, or anyone when the listener does
not require authentication. Others get CLUSTER_AUTHORIZATION_FAILED and change nothing. That refusal is given
per user, never as DescribeUserScramCredentials' top-level error, which Kafka sets: confluent-kafka 2.16
(librdkafka 2.16) crashes its process on an answer with one. Asked to describe every user, a caller who
may not is answered one result, for itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import Caught, Refused, code_of
from partitions.errors import InvalidName
from partitions.metadata.service import AdminService
from partitions.names import check_user_name
from partitions.security.acls import AclOperation
from partitions.security.users import ScramCredential, credential_from_salted_password

SCRAM_MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism
CODE_OF_MECHANISM = {name: code for code, name in SCRAM_MECHANISM_CODES.items()}
NOT_AUTHORIZED = (
    "SCRAM credentials are managed by a super user (raftlog serve --super-user), or with ACLs by whoever "
    "may ALTER the cluster (DESCRIBE, to describe them)"
)


async def describe_user_scram_credentials(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "DescribeUserScramCredentialsResult")
    info_cls = wire.sibling(cls, "CredentialInfo")
    users = door.node.metadata.users()
    asked = [user.name for user in request.body.users or ()]
    allowed = door.security.may_manage_users(door.session, door.node.metadata.acls(), AclOperation.DESCRIBE)
    # none named: every user; refused per user, never at the top (see the module's docstring), and a
    # refused "every user" is the caller
    everyone = sorted(users) if allowed else [door.session.user or ""]
    names = asked or everyone
    results = []
    for name in dict.fromkeys(names):
        code, message, infos = ErrorCode.none, None, ()
        if not allowed:
            code, message = ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED
        elif asked.count(name) > 1:
            code, message = ErrorCode.duplicate_resource, "a user named more than once in the request"
        elif name not in users:
            code, message = (
                ErrorCode.resource_not_found,
                "Attempt to describe a user credential that does not exist",
            )
        else:
            infos = tuple(
                wire.build(info_cls, mechanism=CODE_OF_MECHANISM[c.mechanism], iterations=c.iterations)
                for c in sorted(users[name], key=lambda c: CODE_OF_MECHANISM[c.mechanism])
            )
        results.append(
            wire.build(result_cls, user=name, error_code=code, error_message=message, credential_infos=infos)
        )
    return wire.build(
        cls,
        throttle_time=wire.NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )


@dataclass(slots=True)
class _Changes:
    """One user's part of the request, in the order it came."""

    upsertions: list[Any] = field(default_factory=list)
    deletions: list[Any] = field(default_factory=list)


def _mechanism(code: int) -> str:
    name = SCRAM_MECHANISM_CODES.get(code)
    if name is None:
        raise Refused(ErrorCode.unsupported_sasl_mechanism, f"unknown SCRAM mechanism {code}")
    return name


def _checked(name: str, changes: _Changes) -> tuple[list[ScramCredential], list[str]]:
    """The credentials to store and the mechanisms to remove, or ``Refused`` saying why not."""
    try:
        check_user_name(name)
    except InvalidName as exc:
        raise Refused(ErrorCode.unacceptable_credential, str(exc)) from None
    deletions = [_mechanism(d.mechanism) for d in changes.deletions]
    named = deletions + [_mechanism(u.mechanism) for u in changes.upsertions]
    if len(set(named)) != len(named):
        raise Refused(
            ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
        )
    upsertions = []
    for upsertion in changes.upsertions:
        try:
            upsertions.append(
                credential_from_salted_password(
                    _mechanism(upsertion.mechanism),
                    upsertion.salt,
                    upsertion.iterations,
                    upsertion.salted_password,
                )
            )
        except InvalidName as exc:
            raise Refused(ErrorCode.unacceptable_credential, str(exc)) from None
    return upsertions, deletions


def _user_code(error: BaseException) -> ErrorCode:
    """An ``InvalidName`` is a user's name's (UNACCEPTABLE_CREDENTIAL), not a topic's; the rest as
    everywhere."""
    return ErrorCode.unacceptable_credential if isinstance(error, InvalidName) else code_of(error)


async def alter_user_scram_credentials(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    result_cls = wire.sibling(cls, "AlterUserScramCredentialsResult")
    by_user: dict[str, _Changes] = {}
    for deletion in body.deletions:
        by_user.setdefault(deletion.name, _Changes()).deletions.append(deletion)
    for upsertion in body.upsertions:
        by_user.setdefault(upsertion.name, _Changes()).upsertions.append(upsertion)
    allowed = door.security.may_manage_users(door.session, door.node.metadata.acls(), AclOperation.ALTER)

    async def alter(name: str, changes: _Changes) -> Any:
        with Caught(_user_code) as caught:  # every error is this user's answer
            if not allowed:
                raise Refused(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)
            upsertions, deletions = _checked(name, changes)
            await door.node.cluster.admin.call(AdminService.alter_user, name, upsertions, deletions)
        return wire.build(result_cls, user=name, error_code=caught.code, error_message=caught.message)

    results = await asyncio.gather(*(alter(name, changes) for name, changes in by_user.items()))
    return wire.build(cls, throttle_time=wire.NO_THROTTLE, results=tuple(results))
