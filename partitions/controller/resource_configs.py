"""Resource configs as the controller holds them (Kafka's ``ConfigurationControlManager`` for the
CLIENT_METRICS, GROUP and BROKER resources, and a topic's throttled-replica lists): pure and deterministic.
``AlterResourceConfigs`` sets and removes some configs of one resource, every change checked against the
resource's configs after it (``partitions.resource_configs.validate``: Kafka's rules and words); a
resource left with none is gone. A topic's entry goes with the topic (``state``'s DeleteTopic).

``controller.state`` encodes the command among its own (kind 19, allowed from
``features.RESOURCE_CONFIGS``) as ``[1, 19, [version, kind, name, [[key, value or None], ...]]]``: the
rows carry their own version (1), so a later field is added behind a new version while this one still
decodes. The snapshot keeps them under ``resource_configs`` once one is set (before, the snapshot is the
previous release's bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from partitions.errors import InvalidCommand, InvalidConfigRequest
from partitions.resource_configs import BROKER, KINDS, RESOURCES_MAX, validate

ROW_VERSION = 1
Resource = tuple[str, str]  # (kind, name)


@dataclass(frozen=True, slots=True)
class AlterResourceConfigs:
    kind: str
    name: str
    changes: tuple[tuple[str, str | None], ...]  # a key's new value, or None to remove it


def apply(
    resources: Mapping[Resource, Mapping[str, str]], command: AlterResourceConfigs
) -> dict[Resource, dict[str, str]]:
    """The resources' configs after the command, checked first (a refusal: nothing changes)."""
    if command.kind not in KINDS:
        raise InvalidConfigRequest(f"unknown resource kind {command.kind!r}")
    keys = [key for key, _ in command.changes]
    if len(set(keys)) != len(keys):
        raise InvalidConfigRequest(
            f"a config changed twice in one request for {command.kind} {command.name!r}"
        )
    resource = (command.kind, command.name)
    before = dict(resources.get(resource, {}))
    after = dict(before)
    for key, value in command.changes:
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    default = resources.get((BROKER, ""), {}) if command.kind == BROKER and command.name else None
    validate(command.kind, command.name, after, before, default)
    result = {r: dict(values) for r, values in resources.items()}
    if after:
        result[resource] = after
    else:
        result.pop(resource, None)
    if len(result) > RESOURCES_MAX and len(result) > len(resources):
        raise InvalidConfigRequest(f"at most {RESOURCES_MAX} resources with configs in the cluster")
    return result


def without_topic(
    resources: Mapping[Resource, Mapping[str, str]], topic: str
) -> dict[Resource, dict[str, str]]:
    return {r: dict(values) for r, values in resources.items() if r != ("topic", topic)}


# -- the command's and the snapshot's rows ---------------------------------------------------------------


def rows(command: AlterResourceConfigs) -> list[object]:
    return [ROW_VERSION, command.kind, command.name, [[key, value] for key, value in command.changes]]


def from_rows(value: object) -> AlterResourceConfigs:
    """A command's rows of this version or an earlier one (InvalidCommand otherwise)."""
    if not isinstance(value, list) or len(value) < 4 or value[0] != ROW_VERSION:
        raise InvalidCommand(f"malformed resource configs {str(value)[:80]!r}")
    _, kind, name, changes = value[:4]
    if not isinstance(kind, str) or not isinstance(name, str) or not isinstance(changes, list):
        raise InvalidCommand(f"malformed resource configs {str(value)[:80]!r}")
    parsed = []
    for change in changes:
        if (
            not isinstance(change, list)
            or len(change) != 2
            or not isinstance(change[0], str)
            or not (change[1] is None or isinstance(change[1], str))
        ):
            raise InvalidCommand(f"malformed resource config change {str(change)[:80]!r}")
        parsed.append((change[0], change[1]))
    return AlterResourceConfigs(kind, name, tuple(parsed))


def snapshot_rows(resources: Mapping[Resource, Mapping[str, str]]) -> list[object]:
    return [[kind, name, dict(sorted(values.items()))] for (kind, name), values in sorted(resources.items())]


def from_snapshot(value: object) -> dict[Resource, dict[str, str]]:
    if not isinstance(value, list):
        raise ValueError("malformed resource configs in a snapshot")
    restored: dict[Resource, dict[str, str]] = {}
    for kind, name, values in value:
        if not isinstance(values, dict):
            raise ValueError(f"malformed resource configs of {kind} {name!r} in a snapshot")
        restored[(str(kind), str(name))] = {str(k): str(v) for k, v in values.items()}
    return restored
