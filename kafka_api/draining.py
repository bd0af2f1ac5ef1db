"""A stopping listener's Produces: none appended once the stop began, those already begun answered before
the listener closes (``KafkaServer.drain``, the first step of a node's stop).

Why before the node leaves the cluster: the other nodes' Metadata answers drop a node once its gossip says
it left (as Kafka's drop a broker once fenced), and librdkafka fails the requests still waiting for an
answer of a broker dropped from the metadata with ``_DESTROY_BROKER``, which it counts among the errors
that mean "not written" (``rd_kafka_err_action``: REFRESH, resent without counting a retry). A batch this
node appended and had not yet answered was then sent again to the partition's next leader, and written
twice, also by a producer with ``retries=0``. So a stopping node's Kafka listener takes no new connection,
reads no more requests, answers those it read and closes each connection once it did, all before the node
says it leaves: nothing can be in flight to it when clients drop it. A Produce whose handling begins once
the listener drains is answered NOT_LEADER_OR_FOLLOWER for each of its partitions, nothing of it written;
the client refreshes its metadata and sends it to the partition's next leader."""

from __future__ import annotations

STOPPING_MESSAGE = "this node is stopping: its partitions' leadership moves to other nodes"


class Draining:
    """Shared by every connection's door of one listener (the event loop's alone): ``stopping`` once the
    listener drains, a Produce then appending nothing. What each connection still owes is its own
    (``Connection.produces``)."""

    def __init__(self) -> None:
        self.stopping = False
