"""The admin API, as a client calls it: users and their tokens, ACLs, nodes and their health, a partition's
state and leadership, topic configs, replica moves, decommissioning, the controller group's voters and
maintenance (``RaftlogClient.cluster``: the client's session, retries and credentials; the admin token
where the server asks for it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from raftlog_contract import (
    ACLS_PATH,
    CONTROLLER_PATH,
    CONTROLLER_VOTERS_PATH,
    FEATURES_PATH,
    HEALTH_PATH,
    NODES_PATH,
    USERS_PATH,
    controller_voter_path,
    decommission_path,
    maintenance_path,
    partition_state_path,
    replicas_path,
    topic_configs_path,
    transfer_leadership_path,
    user_path,
    user_token_path,
    user_tokens_path,
)


class Request(Protocol):
    """``RaftlogClient._request``: one call, retried as the client retries."""

    async def __call__(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str | int] | None = None,
        repeatable: bool = False,
    ) -> tuple[int, Any]: ...


class ClusterAdmin:
    def __init__(self, request: Request) -> None:
        self._request = request

    async def users(self) -> list[dict[str, Any]]:
        _, body = await self._request("GET", USERS_PATH, repeatable=True)
        return list(body["users"])

    async def set_user(
        self, name: str, password: str, mechanisms: Sequence[str] | None = None
    ) -> dict[str, Any]:
        """Create a user or set its password (stored as SCRAM credentials, never as given)."""
        body: dict[str, Any] = {"name": name, "password": password}
        if mechanisms is not None:
            body["mechanisms"] = list(mechanisms)
        _, answer = await self._request("POST", USERS_PATH, body=body, repeatable=True)
        return dict(answer)

    async def delete_user(self, name: str) -> None:
        """Delete a user; its API tokens are revoked with it."""
        await self._request("DELETE", user_path(name))

    async def create_token(
        self,
        user: str,
        *,
        lifetime_ms: int | None = None,
        expires_ms: int | None = None,
        description: str | None = None,
    ) -> dict[str, Any]:
        """Make an API token of ``user``, expiring after ``lifetime_ms`` or at ``expires_ms`` (ms since the
        epoch), or never; ``token`` (its text, answered this once: keep it), ``id``, ``created_ms``,
        ``expires_ms``, ``description``. Not retried after an unknown outcome: a retry would make a
        second token."""
        body: dict[str, Any] = {}
        if lifetime_ms is not None:
            body["lifetime_ms"] = lifetime_ms
        if expires_ms is not None:
            body["expires_ms"] = expires_ms
        if description is not None:
            body["description"] = description
        _, answer = await self._request("POST", user_tokens_path(user), body=body)
        return dict(answer)

    async def tokens(self, user: str) -> list[dict[str, Any]]:
        """The user's API tokens: ``id``, ``description``, ``created_ms``, ``expires_ms``, ``expired``
        (never their text)."""
        _, body = await self._request("GET", user_tokens_path(user), repeatable=True)
        return list(body["tokens"])

    async def delete_token(self, user: str, token_id: str) -> None:
        """Revoke one of the user's API tokens: refused from the next request on."""
        await self._request("DELETE", user_token_path(user, token_id))

    async def acls(self, **acl_filter: str | None) -> list[dict[str, Any]]:
        """The ACLs a filter matches (``resource_type``, ``name``, ``pattern_type`` (also ``any`` or
        ``match``), ``principal``, ``host``, ``operation``, ``permission``; None or absent: any)."""
        params = {key: value for key, value in acl_filter.items() if value is not None}
        _, body = await self._request("GET", ACLS_PATH, params=params, repeatable=True)
        return list(body["acls"])

    async def create_acls(self, acls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Add ACLs (``{"resource_type", "name", "principal", "operation", "pattern_type"?, "host"?,
        "permission"?}``) in one change; ``created`` and ``existed`` (asked for and there already)."""
        _, answer = await self._request(
            "POST", ACLS_PATH, body={"acls": [dict(a) for a in acls]}, repeatable=True
        )
        return dict(answer)

    async def delete_acls(self, **acl_filter: str | None) -> list[dict[str, Any]]:
        """Remove the ACLs a filter matches (the fields of ``acls``; at least one: ``resource_type="any"``
        removes every ACL); those removed."""
        params = {key: value for key, value in acl_filter.items() if value is not None}
        _, answer = await self._request("DELETE", ACLS_PATH, params=params, repeatable=True)
        return list(answer["deleted"])

    async def health(self) -> dict[str, Any]:
        _, body = await self._request("GET", HEALTH_PATH, repeatable=True)
        return dict(body)

    async def nodes(self) -> list[dict[str, Any]]:
        _, body = await self._request("GET", NODES_PATH, repeatable=True)
        return list(body)

    async def features(self) -> dict[str, Any]:
        """The finalized feature levels, and each node's version and supported levels."""
        _, body = await self._request("GET", FEATURES_PATH, repeatable=True)
        return dict(body)

    async def update_feature(self, feature: str, level: int) -> dict[str, Any]:
        """Finalize ``feature`` at ``level`` (refused, 409, naming the nodes that do not support it)."""
        body = {"feature": feature, "level": level}
        _, answer = await self._request("POST", FEATURES_PATH, body=body, repeatable=True)
        return dict(answer)

    async def partition_state(self, topic: str, partition: int) -> dict[str, Any]:
        _, body = await self._request("GET", partition_state_path(topic, partition), repeatable=True)
        return dict(body)

    async def transfer_leadership(
        self, topic: str, partition: int, target: str | None = None
    ) -> dict[str, Any]:
        params = {"target": target} if target is not None else None
        path = transfer_leadership_path(topic, partition)
        _, body = await self._request("POST", path, params=params)
        return dict(body)

    async def topic_configs(self, name: str) -> dict[str, Any]:
        _, body = await self._request("GET", topic_configs_path(name), repeatable=True)
        return dict(body["configs"])

    async def alter_topic_configs(self, name: str, configs: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``configs`` into the topic's; returns the topic's configs after the change."""
        path = topic_configs_path(name)
        _, body = await self._request("PATCH", path, body={"configs": dict(configs)}, repeatable=True)
        return dict(body["configs"])

    async def move_replicas(self, topic: str, partition: int, replicas: Sequence[str]) -> dict[str, Any]:
        """Start moving a partition to ``replicas``; poll :meth:`move_progress` until ``move`` is None.
        Sent again when no answer came: the node answers the same move's progress."""
        path = replicas_path(topic, partition)
        _, body = await self._request("POST", path, body={"replicas": list(replicas)}, repeatable=True)
        return dict(body)

    async def move_progress(self, topic: str, partition: int) -> dict[str, Any]:
        path = replicas_path(topic, partition)
        _, body = await self._request("GET", path, repeatable=True)
        return dict(body)

    async def cancel_move(self, topic: str, partition: int) -> dict[str, Any]:
        path = replicas_path(topic, partition)
        _, body = await self._request("DELETE", path, repeatable=True)
        return dict(body)

    async def decommission(self, node_id: str) -> dict[str, Any]:
        _, body = await self._request("PUT", decommission_path(node_id), repeatable=True)
        return dict(body)

    async def decommission_status(self, node_id: str) -> dict[str, Any]:
        _, body = await self._request("GET", decommission_path(node_id), repeatable=True)
        return dict(body)

    async def recommission(self, node_id: str) -> dict[str, Any]:
        path = decommission_path(node_id)
        _, body = await self._request("DELETE", path, repeatable=True)
        return dict(body)

    async def controller(self) -> dict[str, Any]:
        """The controller group: leader, term, voters, learners joining, each member's match index."""
        _, body = await self._request("GET", CONTROLLER_PATH, repeatable=True)
        return dict(body)

    async def add_controller_voter(self, node_id: str) -> dict[str, Any]:
        """Start adding ``node_id`` to the controller group (a learner, promoted once caught up); poll
        :meth:`controller` until it is among the voters."""
        _, body = await self._request("POST", CONTROLLER_VOTERS_PATH, body={"node_id": node_id})
        return dict(body)

    async def remove_controller_voter(self, node_id: str) -> dict[str, Any]:
        _, body = await self._request("DELETE", controller_voter_path(node_id))
        return dict(body)

    async def set_maintenance(self, node_id: str, on: bool) -> dict[str, Any]:
        path = maintenance_path(node_id)
        _, body = await self._request("PUT" if on else "DELETE", path, repeatable=True)
        return dict(body)
