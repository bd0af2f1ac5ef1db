"""Which replication throttle applies to a replica's copying, from the configs Kafka's tools set
(``kafka-reassign-partitions --throttle``, ``kafka-configs``; stored by ``resource_configs``), as Kafka's
``ConfigHandler`` applies them to its ``ReplicationQuotaManager``s. Pure: the node asks at each chunk, so
a change or a removal of the configs applies at the next one.

- A topic's ``follower.replication.throttled.replicas`` / ``leader.replication.throttled.replicas``:
  ``*`` (every partition of the topic, on every broker) or ``partition:broker`` pairs, of which a broker
  keeps those naming its own id (Kafka's ``parseThrottledPartitions``); blank or unset: none.
- A broker's ``follower.replication.throttled.rate`` / ``leader.replication.throttled.rate``: set on its
  own id, else on the cluster's default (broker ``""``, Kafka's ``<default>``), else Kafka's default
  ``Long.MAX_VALUE``, which limits nothing (None here).

In raftlog the follower quota bounds what a node's recoveries of listed replicas copy from their peers
together, the leader quota what a node serves together to its peers' recoveries of listed replicas
(``partitions.replicas.recovery``, ``partitions.replicas.recovery_serving``): a recovering replica is
never in sync, the case Kafka throttles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from partitions.names import broker_id
from partitions.resource_configs import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    LONG_MAX,
    TOPIC,
    broker_setting,
    items,
)

Configs = Mapping[tuple[str, str], Mapping[str, str]]  # (kind, name) -> configs: ControllerMetadata's
EVERY_PARTITION = "*"


def throttled(value: str, broker: int, partition: int) -> bool:
    """Whether a throttled-replica list names ``partition`` on ``broker`` (``*``: every one)."""
    listed = items(value)
    if listed == [EVERY_PARTITION]:
        return True
    for entry in listed:
        listed_partition, _, listed_broker = entry.partition(":")
        try:
            if int(listed_broker) == broker and int(listed_partition) == partition:
                return True
        except ValueError:  # refused when set (resource_configs): never stored
            continue
    return False


def rate(configs: Configs, key: str, broker: int) -> int | None:
    """The broker's rate ``key`` in bytes/s: its own, else the cluster's default; None: unlimited."""
    value = broker_setting(configs, key, broker)
    if value is None:
        return None
    try:
        parsed = int(value.strip())
    except ValueError:  # refused when set (resource_configs): never stored
        return None
    return None if parsed >= LONG_MAX else max(0, parsed)


def _applies(
    configs: Configs, replicas_key: str, rate_key: str, topic: str, partition: int, node_id: str
) -> int | None:
    broker = broker_id(node_id)
    listed = configs.get((TOPIC, topic), {}).get(replicas_key, "")
    if not throttled(listed, broker, partition):
        return None
    return rate(configs, rate_key, broker)


def follower_rate(configs: Configs, topic: str, partition: int, node_id: str) -> int | None:
    """The bytes/s the node's recovery of its replica of (topic, partition) shares with its other
    throttled recoveries (Kafka's follower quota); None: not throttled."""
    return _applies(configs, FOLLOWER_REPLICAS, FOLLOWER_RATE, topic, partition, node_id)


def leader_rate(configs: Configs, topic: str, partition: int, node_id: str) -> int | None:
    """The bytes/s the node serves, together with its other throttled answers, to peers recovering
    (topic, partition) from its replica (Kafka's leader quota); None: not throttled."""
    return _applies(configs, LEADER_REPLICAS, LEADER_RATE, topic, partition, node_id)


def joining_throttled(
    configs: Configs, topic: str, partition: int, joining: str, members: Iterable[str]
) -> bool:
    """Whether a replica ``joining`` (topic, partition), whose group has ``members``, copies under a
    throttle: its own follower throttle, or the leader throttle of a member it may copy from. Its leader
    then compacts its journal first, so that it installs a snapshot and its catch-up is a recovery, which
    the throttles limit, not plain replication of the journal's entries, which they do not."""
    if follower_rate(configs, topic, partition, joining) is not None:
        return True
    return any(leader_rate(configs, topic, partition, member) is not None for member in members)
