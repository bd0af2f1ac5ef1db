"""Kafka Streams groups (KIP-1071, group.protocol=streams): the topology, its topics, the task assignor."""
