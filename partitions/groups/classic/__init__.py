"""Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): ``ClassicGroups`` and its
members, held in the coordinator's memory between writes of the group's metadata."""
