"""The consumer group protocol (KIP-848): the group as a pure state machine, the server assignors, regex
subscriptions, and the coordinator that runs it against the group table."""
