"""UpdateFeatures (KIP-584, v0-2): ``kafka-features upgrade`` raising raftlog's own feature levels
(``partitions.features``) through the controller leader, as ``raftlog cluster features upgrade`` does.
Kafka's own features (``metadata.version``, ``group.version``, ``share.version``) follow ``raftlog.version``:
an update asking the level the cluster is at changes nothing and succeeds, any other is refused naming the
``raftlog.version`` that brings it (``features.check_kafka_update``); those raftlog has no level of
(``kraft.version``, ``eligible.leader.replicas.version``, ``streams.version``) are refused with the reason.
DescribeFeatures is Kafka's ApiVersions (``apis.api_versions``). A level is raised once every node runs code
that supports it; a downgrade (any upgrade type: safe and unsafe downgrades included, since the formats of
a finalized level may be on disk), level 0 (deleting a feature), an unknown feature or level are
INVALID_UPDATE_VERSION with the reason, and nothing of the request changes (the updates are checked all,
then applied in order). v0-1 answer per feature, v2 with the top-level error alone, as Kafka's. Who may:
ALTER on the cluster."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.errors import code_of
from partitions import features
from partitions.metadata.service import AdminService
from partitions.security.acls import AclOperation, ResourceType
from raftlog.errors import RaftlogError


async def update_features(door: Door, request: wire.Request) -> Any:
    cls = wire.response_class(request.api_key, request.api_version)
    updates = [(u.feature, int(u.max_version_level)) for u in request.body.feature_updates]

    def answer(
        code: ErrorCode, message: str | None, per_feature: dict[str, tuple[ErrorCode, str | None]]
    ) -> Any:
        extra: dict[str, Any] = {}
        if request.api_version < 2:
            result_cls = wire.sibling(cls, "UpdatableFeatureResult")
            extra["results"] = tuple(
                wire.build(result_cls, feature=name, error_code=c, error_message=m)
                for name, (c, m) in per_feature.items()
            )
        return wire.build(
            cls, throttle_time=wire.NO_THROTTLE, error_code=code, error_message=message, **extra
        )

    if not door.allows(AclOperation.ALTER, ResourceType.CLUSTER):
        refusal = str(door.refusal(AclOperation.ALTER, ResourceType.CLUSTER))
        return answer(ErrorCode.cluster_authorization_failed, refusal, {})
    apply, refused = features.plan_updates(updates, door.node.metadata.features().levels())
    if refused:
        code = code_of(next(iter(refused.values())))
        if request.api_version >= 2:  # one error for the request: every refusal named in it
            message = "; ".join(str(refusal) for refusal in refused.values())
            return answer(code, message, {})
        per: dict[str, tuple[ErrorCode, str | None]] = {
            name: (code, str(refused.get(name) or refused[""]))
            if name in refused or "" in refused
            else (ErrorCode.none, None)
            for name, _ in updates
        }
        return answer(ErrorCode.none, None, per)
    try:
        if not request.body.validate_only:
            for name, level in apply:
                await door.node.cluster.admin.call(AdminService.update_feature, name, level)
    except RaftlogError as exc:
        code = code_of(exc)
        if request.api_version >= 2:
            return answer(code, str(exc), {})
        failed = getattr(exc, "feature", "")
        per = {
            name: (code, str(exc)) if name == failed or not failed else (ErrorCode.none, None)
            for name, _ in updates
        }
        return answer(ErrorCode.none, None, per)
    return answer(ErrorCode.none, None, {name: (ErrorCode.none, None) for name, _ in updates})
