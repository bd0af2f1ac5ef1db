"""Consumer groups served: the group tables stored in ``__consumer_groups`` partitions, HTTP consumer
instances and their reads through the data plane (``GroupService``)."""
