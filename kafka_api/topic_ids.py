"""A topic's Kafka id (``kafka_topic_id``) and the listener's way back from ids to names (``TopicIds``).

A topic's Kafka id is made from the cluster id and the controller's ``topic_id`` (the Raft index that
created it), so every node answers the same id, and a topic deleted and created again under its name gets
another, as Kafka's do.

Produce and Fetch from v13, Metadata from v12 and the group APIs name topics by id, so a request of theirs
needs every topic's name by its id. The map is made once for each set of topics the node's metadata holds
(the controller publishes the same mapping of topics until a topic changes) and shared by the listener's
connections: made per request, a producer of a Kafka 4 client paid for every topic of the cluster with
every batch it sent.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_api.pacing import Pacer
from partitions.controller.state import TopicMetadata


def kafka_topic_id(cluster_id: str, topic: TopicMetadata) -> uuid.UUID:
    """The topic's id in Kafka's answers: the same on every node, another for each creation of a name.
    Never Kafka's reserved ids (zero, and 1 for its metadata topic; a version 4 UUID is neither), and never
    one whose base64 form begins with "-", which Kafka's own ids avoid for its command-line tools."""
    return _topic_id(cluster_id, topic.name, topic.topic_id)


@functools.lru_cache(maxsize=65_536)  # a topic's id is asked for by every answer that names the topic
def _topic_id(cluster_id: str, name: str, creation: int) -> uuid.UUID:
    digest = bytearray(hashlib.sha256(f"{cluster_id}/{name}/{creation}".encode()).digest()[:16])
    digest[0] &= 0x7F
    return uuid.UUID(bytes=bytes(digest), version=4)


@dataclass(slots=True, eq=False)
class TopicIds:
    """Every topic's name by its Kafka id, for the mapping of topics it was made from (event loop only).
    A new mapping (a topic created, deleted or changed) makes the map again, ``ITEMS_PER_TURN`` topics a
    turn of the event loop when a handler paces it (``names_paced``)."""

    _topics: Mapping[str, TopicMetadata] | None = None
    _cluster_id: str = ""
    _names: Mapping[uuid.UUID, str] = field(default_factory=dict)

    def _current(
        self, cluster_id: str, topics: Mapping[str, TopicMetadata]
    ) -> Mapping[uuid.UUID, str] | None:
        if topics is self._topics and cluster_id == self._cluster_id:
            return self._names
        return None

    def _keep(
        self, cluster_id: str, topics: Mapping[str, TopicMetadata], names: Mapping[uuid.UUID, str]
    ) -> Mapping[uuid.UUID, str]:
        self._topics, self._cluster_id, self._names = topics, cluster_id, names
        return names

    def names(self, cluster_id: str, topics: Mapping[str, TopicMetadata]) -> Mapping[uuid.UUID, str]:
        """The names by id of ``topics`` (the node's metadata's mapping, as ``MetadataView.topics_by_name``
        gives it), in one go."""
        current = self._current(cluster_id, topics)
        if current is not None:
            return current
        return self._keep(cluster_id, topics, {kafka_topic_id(cluster_id, t): n for n, t in topics.items()})

    async def names_paced(
        self, cluster_id: str, topics: Mapping[str, TopicMetadata], pacer: Pacer
    ) -> Mapping[uuid.UUID, str]:
        """``names``, yielding to the event loop as ``pacer`` says while it makes the map anew."""
        current = self._current(cluster_id, topics)
        if current is not None:
            return current
        names = {}
        for name, topic in topics.items():
            names[kafka_topic_id(cluster_id, topic)] = name
            await pacer.step()
        return self._keep(cluster_id, topics, names)
