"""Share groups (KIP-932): membership on the group's coordinator, each record's state in the data
partitions, and the share offsets' admin."""
