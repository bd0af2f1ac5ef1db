"""Who may log in and do what, as the controller replicates it: users' SCRAM credentials, ACLs, API
tokens and client quotas, read from the applied metadata and changed by proposals on the controller leader
(through the node's ``MetadataFrontend``; NotLeader elsewhere)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from partitions import features
from partitions.controller import quotas as controller_quotas
from partitions.controller.acls import CreateAcls, DeleteAcls
from partitions.controller.commands import AlterUser, DeleteUser, SetUser
from partitions.controller.delegation_tokens import DelegationTokenCommand
from partitions.controller.producer_owners import RegisterProducerOwner
from partitions.controller.quotas import AlterClientQuotas, Entity, QuotaChange
from partitions.controller.tokens import CreateToken, DeleteToken
from partitions.errors import FeatureNotFinalized
from partitions.metadata.frontend import MetadataFrontend
from partitions.names import check_user_name
from partitions.security.acls import (
    REGISTRY_TYPES,
    TOKEN_OPERATIONS,
    AclBinding,
    AclFilter,
    Operation,
    ResourceType,
)
from partitions.security.delegation_tokens import DelegationToken
from partitions.security.tokens import ApiToken
from partitions.security.users import ScramCredential
from raftlog.errors import InvariantViolation


def _names_token_codes(kind: ResourceType, operation: Operation) -> bool:
    """Whether an ACL or a filter names a code of delegation tokens' that release 0.1.0 does not know:
    KIP-373's User type and its operations, or the DelegationToken type."""
    return kind in (ResourceType.USER, ResourceType.DELEGATION_TOKEN) or operation in TOKEN_OPERATIONS


class SecurityRecords:
    def __init__(self, frontend: MetadataFrontend) -> None:
        self._frontend = frontend

    def users(self) -> Mapping[str, tuple[ScramCredential, ...]]:
        return self._frontend.metadata().users

    async def set_user(self, name: str, credentials: list[ScramCredential]) -> list[str]:
        check_user_name(name)
        result = await self._frontend.propose(SetUser(name, tuple(credentials)))
        if not isinstance(result, frozenset):
            raise InvariantViolation(f"set user returned {result!r}")
        return sorted(str(mechanism) for mechanism in result)

    async def delete_user(self, name: str) -> None:
        await self._frontend.propose(DeleteUser(name))

    async def alter_user(
        self, name: str, upsertions: list[ScramCredential], deletions: list[str]
    ) -> list[str]:
        check_user_name(name)
        result = await self._frontend.propose(AlterUser(name, tuple(upsertions), tuple(deletions)))
        if not isinstance(result, frozenset):
            raise InvariantViolation(f"alter user returned {result!r}")
        return sorted(str(mechanism) for mechanism in result)

    def acls(self) -> tuple[AclBinding, ...]:
        return self._frontend.metadata().acls

    async def create_acls(self, bindings: list[AclBinding]) -> list[AclBinding]:
        self._check_registry_acls(binding.resource_type for binding in bindings)
        self._refuse_below(
            features.USER_ACLS,
            "an ACL of a User resource or of its tokens (KIP-373), or of a delegation token",
            any(_names_token_codes(b.resource_type, b.operation) for b in bindings),
        )
        result = await self._frontend.propose(CreateAcls(tuple(bindings)))
        if not isinstance(result, tuple):
            raise InvariantViolation(f"create ACLs returned {result!r}")
        return list(result)

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """What each filter removed. Below ``USER_ACLS`` a filter naming the User or DelegationToken type or a
        token operation removes nothing and is not proposed (no such ACL can exist before the level, and a
        node of 0.1.0 could not decode it): Kafka's DeleteAcls of every type names those types too."""
        self._check_registry_acls(acl_filter.resource_type for acl_filter in filters)
        readable = self._allows(features.USER_ACLS)
        kept = [readable or not _names_token_codes(f.resource_type, f.operation) for f in filters]
        sent = tuple(f for f, keep in zip(filters, kept, strict=True) if keep)
        result = await self._frontend.propose(DeleteAcls(sent)) if sent or not filters else ()
        if not isinstance(result, tuple) or len(result) != len(sent):
            raise InvariantViolation(f"delete ACLs of {len(sent)} filters returned {result!r}")
        removed = iter(result)
        return [list(next(removed)) if keep else [] for keep in kept]

    def _allows(self, gate: features.Format) -> bool:
        return features.Features(lambda: self._frontend.metadata().features).allows(gate)

    def _refuse_below(self, gate: features.Format, what: str, used: bool) -> None:
        """FeatureNotFinalized for a change that ``used`` a code a node of release 0.1.0 could not read,
        while the cluster is below ``gate``."""
        if used and not self._allows(gate):
            raise FeatureNotFinalized(what, gate.feature, gate.level)

    def _check_registry_acls(self, kinds: Iterable[ResourceType]) -> None:
        """A change naming the registry's resource types (codes 0.1.0 does not know) waits for its level."""
        used = not REGISTRY_TYPES.isdisjoint(kinds)
        self._refuse_below(features.REGISTRY_ACLS, "an ACL of the schema registry", used)

    def producer_owners(self) -> Mapping[str, int]:
        """Each principal holding producer ids and its number (``controller.producer_owners``)."""
        return self._frontend.metadata().producer_owners

    async def register_producer_owner(self, principal: str) -> int:
        known = self.producer_owners().get(principal)
        if known is not None:
            return known
        result = await self._frontend.propose(RegisterProducerOwner(principal))
        if type(result) is not int:
            raise InvariantViolation(f"register producer owner returned {result!r}")
        return result

    def tokens(self) -> Mapping[str, ApiToken]:
        return self._frontend.metadata().tokens

    async def create_token(self, token: ApiToken) -> ApiToken:
        check_user_name(token.user)
        result = await self._frontend.propose(CreateToken(token))
        if not isinstance(result, ApiToken):
            raise InvariantViolation(f"create token returned {result!r}")
        return result

    async def delete_token(self, user: str, token_id: str) -> ApiToken:
        result = await self._frontend.propose(DeleteToken(user, token_id))
        if not isinstance(result, ApiToken):
            raise InvariantViolation(f"delete token returned {result!r}")
        return result

    def delegation_tokens(self) -> Mapping[str, DelegationToken]:
        return self._frontend.metadata().delegation_tokens

    async def change_delegation_token(self, command: DelegationTokenCommand) -> DelegationToken:
        """FeatureNotFinalized while a node of the previous release could not apply it."""
        gate = features.DELEGATION_TOKENS
        if not features.Features(lambda: self._frontend.metadata().features).allows(gate):
            raise FeatureNotFinalized("a delegation token", gate.feature, gate.level)
        result = await self._frontend.propose(command)
        if not isinstance(result, DelegationToken):
            raise InvariantViolation(f"delegation token change returned {result!r}")
        return result

    def client_quotas(self) -> Mapping[Entity, Mapping[str, float]]:
        return self._frontend.metadata().quotas

    async def alter_client_quotas(self, changes: list[QuotaChange], validate_only: bool) -> None:
        """Checked against the quotas as they are (InvalidQuota: nothing changes), then proposed unless
        ``validate_only``; FeatureNotFinalized while a node of the previous release could not apply it."""
        gate = features.CLIENT_QUOTAS
        if not features.Features(lambda: self._frontend.metadata().features).allows(gate):
            raise FeatureNotFinalized("a client quota change", gate.feature, gate.level)
        command = AlterClientQuotas(tuple(changes))
        controller_quotas.apply(self.client_quotas(), command)
        if not validate_only:
            await self._frontend.propose(command)
