"""The group coordinators' defaults that a node's options name (``raftlog_node.options``): a leaf, so
that building a command line loads none of the coordinators."""

from __future__ import annotations

INITIAL_DELAY_MS_DEFAULT = 3_000  # Kafka's group.initial.rebalance.delay.ms
CONSUMER_SESSION_TIMEOUT_MS_DEFAULT = 45_000  # Kafka's group.consumer.session.timeout.ms
SHARE_GROUPS_MAX_DEFAULT = 100  # share groups per coordinator partition (--group-share-max-groups)
SHARE_LOCK_MS_DEFAULT = 30_000  # Kafka's group.share.record.lock.duration.ms
# Kafka's group.consumer.migration.policy: the online migrations a group may make (docs/decisions/0025)
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
MIGRATION_POLICY_DEFAULT = "bidirectional"
REGEX_RESOLVE_BUDGET_MS_DEFAULT = 1_000  # one resolution's time; 10,000 topics of 200 characters take ~10 ms
