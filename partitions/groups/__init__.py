"""Consumer groups: the replicated group table, the assignors and the coordinator (storage-agnostic)."""
