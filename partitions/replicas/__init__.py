"""This node's partition replicas: each partition's Raft group, its deterministic state machine,
recovery and catch-up, failed replicas, and where each partition's leader is."""
