"""CreateDelegationToken (v1-v3), RenewDelegationToken (v1-v2), ExpireDelegationToken (v1-v2) and
DescribeDelegationToken (v1-v3): Kafka's delegation tokens (KIP-48), as Apache Kafka 4.4's ``KafkaApis``
and ``DelegationTokenControlManager`` answer them. The rules and the tokens live below
(``partitions.security.delegation_tokens``, ``partitions.controller.delegation_tokens``); this translates.

Who may: a connection that authenticated with SASL and not with a token (Kafka's ``allowTokenRequests``);
any other is answered DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. A token is its requester's unless the request
names another owner, which needs CREATE_TOKENS on that owner's User resource (``User:alice``; KIP-373,
as Kafka asks it; a super user may): others are answered DELEGATION_TOKEN_AUTHORIZATION_FAILED. Owners
and renewers are users (INVALID_PRINCIPAL_TYPE else); the owner must be a user of the cluster
(RESOURCE_NOT_FOUND). A token's max lifetime and renew interval are the node's options
(``--delegation-token-max-lifetime-ms``, ``--delegation-token-expiry-time-ms``: Kafka's
``delegation.token.max.lifetime.ms`` and ``delegation.token.expiry.time.ms``); a request may ask for less.
Renew and expire find the token by its HMAC and are for its owner and renewers
(DELEGATION_TOKEN_OWNER_MISMATCH else); Describe answers the tokens the caller owns, requested or may
renew, each token it may DESCRIBE (an ACL on the DelegationToken resource named by the token's id), and
those of each owner whose User resource it may DESCRIBE_TOKENS (a super user: every token), with their
HMACs, as Kafka does. Past the caps on tokens (per owner, in the cluster) a creation is
answered POLICY_VIOLATION.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import Caught, Refused, code_of
from partitions import features
from partitions.controller.delegation_tokens import (
    CreateDelegationToken,
    DelegationTokenCommand,
    ExpireDelegationToken,
    RenewDelegationToken,
)
from partitions.errors import FeatureNotFinalized, InvalidName
from partitions.metadata.service import AdminService
from partitions.security.acls import AclOperation, ResourceType
from partitions.security.delegation_tokens import (
    RENEWERS_MAX,
    USER_TYPE,
    DelegationToken,
    new_token_id,
    principal_user,
    renew_period,
    token_times,
)

ERROR_TIMESTAMP_MS = -1  # Kafka's DelegationTokenManager.ErrorTimestamp


def _refusal(door: Door) -> Refused | None:
    """Why this connection may not ask for tokens (Kafka's ``allowTokenRequests``), or None."""
    session = door.session
    if session.user is None:
        return Refused(ErrorCode.delegation_token_request_not_allowed, "a token is asked for over SASL")
    if session.token_authenticated:
        return Refused(ErrorCode.delegation_token_request_not_allowed, "a token may not ask for tokens")
    return None


async def _change(door: Door, command: DelegationTokenCommand) -> DelegationToken:
    gate = features.DELEGATION_TOKENS
    if not door.node.metadata.features().allows(gate):  # before calling a leader that may not know it
        raise FeatureNotFinalized("a delegation token", gate.feature, gate.level)
    result: DelegationToken = await door.node.cluster.admin.call(
        AdminService.change_delegation_token, command
    )
    return result


def _code(error: BaseException) -> ErrorCode:
    """A principal that is not a user is Kafka's INVALID_PRINCIPAL_TYPE; an owner that is not a user of
    the cluster RESOURCE_NOT_FOUND (``code_of``); the rest as everywhere."""
    return ErrorCode.invalid_principal_type if isinstance(error, InvalidName) else code_of(error)


async def create_delegation_token(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    requester = door.session.user or ""
    owner_name = getattr(body, "owner_principal_name", None)
    owner_type = getattr(body, "owner_principal_type", None) or USER_TYPE
    issue_ms = door.security.clock_ms()
    token: DelegationToken | None = None
    with Caught(_code) as caught:
        refusal = _refusal(door)
        if refusal is not None:
            raise refusal
        owner = principal_user(owner_type, owner_name, "owner") if owner_name else requester
        on_owner = (AclOperation.CREATE_TOKENS, ResourceType.USER, f"User:{owner}")
        if owner != requester and not door.allows(*on_owner):
            raise Refused(
                ErrorCode.delegation_token_authorization_failed,
                f"a token for User:{owner} needs CREATE_TOKENS on the resource User:{owner} (an ACL of type "
                "user), or a super user",
            )
        if len(body.renewers) > RENEWERS_MAX:
            raise Refused(ErrorCode.invalid_request, f"at most {RENEWERS_MAX} renewers")
        renewers = tuple(
            dict.fromkeys(
                principal_user(r.principal_type, r.principal_name, "renewer") for r in body.renewers
            )
        )
        expiry_ms, max_ms = token_times(
            issue_ms,
            door.security.delegation_token_max_lifetime_ms,
            door.security.delegation_token_expiry_time_ms,
            wire.millis(body.max_lifetime),
        )
        made = DelegationToken(new_token_id(), owner, requester, renewers, issue_ms, expiry_ms, max_ms)
        token = await _change(door, CreateDelegationToken(made))
    owner_shown = token.owner if token is not None else (owner_name or requester)
    return wire.build(
        cls,
        error_code=caught.code,
        principal_type=USER_TYPE if token is not None or not owner_name else owner_type,
        principal_name=owner_shown,
        token_requester_principal_type=USER_TYPE,
        token_requester_principal_name=requester,
        issue_timestamp=wire.timestamp(issue_ms if token is not None else ERROR_TIMESTAMP_MS),
        expiry_timestamp=wire.timestamp(token.expiry_ms if token is not None else ERROR_TIMESTAMP_MS),
        max_timestamp=wire.timestamp(token.max_ms if token is not None else ERROR_TIMESTAMP_MS),
        token_id="" if token is None else token.token_id,
        hmac=b"" if token is None else door.security.token_secrets.hmac_of(token.token_id),
        throttle_time=wire.NO_THROTTLE,
    )


async def _renew_or_expire(door: Door, request: wire.Request, renew: bool) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    expiry_ms = ERROR_TIMESTAMP_MS
    with Caught(_code) as caught:
        refusal = _refusal(door)
        if refusal is not None:
            raise refusal
        found = door.security.token_secrets.find(door.node.metadata.delegation_tokens(), body.hmac)
        if found is None:
            raise Refused(ErrorCode.delegation_token_not_found)
        user, now_ms = door.session.user or "", door.security.clock_ms()
        command: DelegationTokenCommand
        if renew:
            period_ms = renew_period(
                door.security.delegation_token_expiry_time_ms, wire.millis(body.renew_period)
            )
            command = RenewDelegationToken(found.token_id, user, now_ms, period_ms)
        else:
            command = ExpireDelegationToken(
                found.token_id, user, now_ms, wire.millis(body.expiry_time_period)
            )
        token = await _change(door, command)
        removed = isinstance(command, ExpireDelegationToken) and command.period_ms < 0
        expiry_ms = now_ms if removed else token.expiry_ms
    return wire.build(
        cls,
        error_code=caught.code,
        expiry_timestamp=wire.timestamp(expiry_ms),
        throttle_time=wire.NO_THROTTLE,
    )


async def renew_delegation_token(door: Door, request: wire.Request) -> Any:
    return await _renew_or_expire(door, request, renew=True)


async def expire_delegation_token(door: Door, request: wire.Request) -> Any:
    return await _renew_or_expire(door, request, renew=False)


async def describe_delegation_token(door: Door, request: wire.Request) -> Any:
    body = request.body
    cls = wire.response_class(request.api_key, request.api_version)
    token_cls = wire.sibling(cls, "DescribedDelegationToken")
    renewer_cls = wire.sibling(cls, "DescribedDelegationTokenRenewer")
    refusal = _refusal(door)
    if refusal is not None:
        return wire.build(cls, error_code=refusal.code, tokens=(), throttle_time=wire.NO_THROTTLE)
    user = door.session.user or ""
    everyone = user in door.security.super_users
    owners_seen: dict[str, bool] = {}  # owner -> whether this connection may DESCRIBE_TOKENS its tokens

    def may_see(token: DelegationToken) -> bool:
        if everyone or token.may_describe(user):
            return True
        if door.allows(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id):
            return True
        if token.owner not in owners_seen:
            owner = f"User:{token.owner}"
            owners_seen[token.owner] = door.allows(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, owner)
        return owners_seen[token.owner]

    # None: every owner; an empty list: none (Kafka's ownersListEmpty)
    owners = (
        None
        if body.owners is None
        else [o.principal_name for o in body.owners if o.principal_type == USER_TYPE]
    )
    answered = []
    secrets = door.security.token_secrets
    for token in sorted(
        door.node.metadata.delegation_tokens().values(), key=lambda t: (t.issue_ms, t.token_id)
    ):
        if owners is not None and not any(token.may_describe(owner) for owner in owners):
            continue
        if not may_see(token):
            continue
        answered.append(
            wire.build(
                token_cls,
                principal_type=USER_TYPE,
                principal_name=token.owner,
                token_requester_principal_type=USER_TYPE,
                token_requester_principal_name=token.requester,
                issue_timestamp=token.issue_ms,
                expiry_timestamp=token.expiry_ms,
                max_timestamp=token.max_ms,
                token_id=token.token_id,
                hmac=secrets.hmac_of(token.token_id),
                renewers=tuple(
                    wire.build(renewer_cls, principal_type=USER_TYPE, principal_name=r)
                    for r in token.renewers
                ),
            )
        )
    return wire.build(cls, error_code=ErrorCode.none, tokens=tuple(answered), throttle_time=wire.NO_THROTTLE)
