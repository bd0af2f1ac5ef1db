"""The data plane: records in and out of the partitions this node leads (``DataService``), and a
partition's state and leadership."""
