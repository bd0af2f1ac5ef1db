"""The controller's defaults that a node's options name (``raftlog_node.options``): a leaf, so that
building a command line loads none of the controller."""

from __future__ import annotations

PARTITIONS_MAX = 10_000  # of one topic
REPLICAS_MAX_DEFAULT = 12_000  # partition replicas a node may hold (serve --replicas-max)
# Kafka's num.partitions and default.replication.factor, for a topic made by Metadata or by a CreateTopics
# that leaves them to the broker (-1); a replication factor of 0: three replicas, or every live node when
# fewer are alive
NUM_PARTITIONS_DEFAULT = 1
REPLICATION_FACTOR_DEFAULT = 0
