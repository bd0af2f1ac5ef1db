"""The metadata a node serves: the controller group's host on this node, its operations (topics,
security records, voters, leaderships), and the protocols ``MetadataView`` and ``AdminService``."""
