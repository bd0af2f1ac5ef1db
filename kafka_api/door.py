"""What every Kafka API handler is given: the node's front door, this listener's settings and the
connection the request came on."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from kio.schema.errors import ErrorCode

from kafka_api.answers import Answers
from kafka_api.auto_topics import TOPIC_DEFAULTS, AutoTopics, TopicDefaults
from kafka_api.draining import Draining
from kafka_api.errors import Refused
from kafka_api.fetch_sessions import FetchSessions
from kafka_api.security import Security, Session
from kafka_api.share_sessions import ShareSessions
from kafka_api.topic_ids import TopicIds
from partitions.errors import AuthorizationFailed, UnknownTopic
from partitions.groups.classic.coordinator import ClassicGroups
from partitions.groups.classic_calls import ClassicCalls
from partitions.groups.consumer.coordinator import ConsumerGroupCoordinator
from partitions.groups.group_model import Recorded
from partitions.groups.share.coordinator import ShareGroupCoordinator
from partitions.groups.streams.coordinator import StreamsGroupCoordinator
from partitions.names import broker_id
from partitions.peers.cluster import FrontDoor
from partitions.security.acls import CLUSTER_NAME, AclOperation, ResourceType, client_host
from partitions.security.holds import RequestBytes
from raftlog.storage.partitioner import partition_for_key

TIMEOUT_MAX_MS = 60_000  # the longest a produce or admin request may ask to wait


class Coordinator(Protocol):
    """The node's consumer-group coordinator (``partitions.groups.coordinator``) as this door uses it:
    one set of groups for both doors."""

    classic: ClassicGroups  # Kafka's classic groups: their members, held and ticked by the node
    classic_calls: ClassicCalls  # JoinGroup, SyncGroup, Heartbeat, LeaveGroup: classic groups, or a
    # consumer protocol group's classic members (Kafka's online migration)
    consumer: ConsumerGroupCoordinator  # the consumer group protocol's groups (KIP-848)
    share: ShareGroupCoordinator  # share groups' membership (KIP-932)
    streams: StreamsGroupCoordinator  # streams groups (KIP-1071)

    async def ensure_topic(self) -> None:
        """Create ``__consumer_groups`` if there is none yet."""
        ...

    async def record_commit(self, group: str, topics: Sequence[str]) -> None: ...

    def recorded(self, name: str) -> Recorded | None:
        """The group as the table holds it, with the term its partition is led here in; None when it
        is not led here."""
        ...


@dataclass(frozen=True, slots=True)
class Door:
    node: FrontDoor
    cluster_id: str  # the same on every node of a cluster
    coordinator: Coordinator
    security: Security = field(default_factory=Security)  # who may do what (kafka_api.security)
    # the connection's authentication: a handler reads its principal here (the listener's own door holds
    # one no connection uses; ``for_connection`` gives each connection its own)
    session: Session = field(default_factory=Session)
    # the node's topic settings (serve --auto-create-topics, --num-partitions, --default-replication-factor)
    # and the creations Metadata requests started (kafka_api.auto_topics), shared by every connection
    topic_defaults: TopicDefaults = TOPIC_DEFAULTS
    auto_topics: AutoTopics = field(default_factory=AutoTopics)
    # the node's incremental fetch sessions (KIP-227, kafka_api.fetch_sessions), shared by every connection
    fetch_sessions: FetchSessions = field(default_factory=FetchSessions)
    # every topic's name by its Kafka id, made once per set of topics (kafka_api.topic_ids), shared too
    topic_ids: TopicIds = field(default_factory=TopicIds)
    # held by a Produce while it begins its appends (in turns, ``kafka_api.produce``): the connection's
    # next Produce begins its own after, so a pipelining producer's batches keep their order
    produce_order: asyncio.Lock = field(default_factory=asyncio.Lock)
    share_sessions: ShareSessions = field(default_factory=ShareSessions)  # the listener's (KIP-932)
    # the connection's large answers, one at a time, their bytes in the listener's budget (kafka_api.answers)
    answers: Answers = field(default_factory=Answers)
    # the listener's Produces while its node stops (kafka_api.draining), shared by every connection
    draining: Draining = field(default_factory=Draining)

    @property
    def groups(self) -> ClassicGroups:
        """The classic groups' coordinator: the node's (``GroupCoordinator.classic``), not this door's."""
        return self.coordinator.classic

    def for_connection(self, address: str | None = None, budget: RequestBytes | None = None) -> Door:
        """The door as one new connection (from ``address``, the client's IP) sees it: everything
        shared, a session, a produce order and large answers (counted in ``budget``) of its own."""
        host = client_host(address)
        answers = Answers(budget, host)
        return replace(self, session=Session(host=host), produce_order=asyncio.Lock(), answers=answers)

    def coordinator_of(self, topic: str, key: str) -> str | None:
        """The node coordinating ``key`` (a group, a transactional id): the leader of the partition of the
        internal ``topic`` the key falls in, as this node knows it; None when none is known (yet)."""
        view = self.node.metadata
        try:
            partitions = view.topic(topic).partitions
        except UnknownTopic:
            return None
        return view.known_leader(topic, partition_for_key(key.encode("utf-8", "surrogatepass"), partitions))

    def controller_for_clients(self) -> str:
        """The node Metadata and DescribeCluster name as the controller: the controller leader while this
        node's gossip holds it alive, else this node. A KRaft broker names a random live broker (each
        forwards controller requests to the active controller), and raftlog's nodes forward them too (a
        request while none leads is answered NOT_CONTROLLER, and retried); a client told of a leader just
        killed would wait for it (librdkafka's admin client waits for the controller it was named until
        its request times out)."""
        view = self.node.metadata
        controller = view.controller()
        alive = {n.node_id for n in view.nodes() if n.state == "alive"}
        return controller if controller is not None and controller in alive else self.node.node_id

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """Whether this connection may, by the ACLs the node holds now (always, when they are not
        enforced)."""
        acls = self.node.metadata.acls()
        return self.security.allows(self.session, acls, operation, resource_type, name)

    def allows_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        acls = self.node.metadata.acls()
        return self.security.allows(self.session, acls, operation, resource_type, None)

    def refusal(
        self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> AuthorizationFailed:
        """The error of a refusal (``kafka_api.errors`` maps it to its resource type's code)."""
        principal = self.session.principal or "an anonymous client"
        return AuthorizationFailed.of(principal, operation.name.lower(), resource_type.name.lower(), name)

    def nodes_by_broker(self) -> dict[int, str]:
        """Broker id -> node id of every node this node knows but those that left the cluster (a broker id
        is its node id's number: ``names.broker_id``), as Kafka's requests name brokers."""
        return {broker_id(n.node_id): n.node_id for n in self.node.metadata.nodes() if n.state != "left"}

    def broker_address(self, node_id: str) -> tuple[str, int] | None:
        """(host, port) of a node's Kafka listener as clients reach it; None: it has none known."""
        address = self.node.metadata.kafka_address(node_id)
        if address is None:
            return None
        host, _, port = address.rpartition(":")
        return host.strip("[]"), int(port)


def clamp_timeout(timeout_ms: float) -> int:
    return max(0, min(int(timeout_ms), TIMEOUT_MAX_MS))


def placed_nodes(broker_ids: Sequence[int], nodes: Mapping[int, str]) -> list[str]:
    """A replica set given by broker id (a manual assignment of CreateTopics, CreatePartitions or
    AlterPartitionReassignments) as node ids, ``nodes`` being ``Door.nodes_by_broker``'s: a broker not
    there refused INVALID_REPLICA_ASSIGNMENT in Kafka's words."""
    unknown = [b for b in broker_ids if b not in nodes]
    if unknown:
        raise Refused(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes broker {unknown[0]}, but no such broker is "
            "registered.",
        )
    return [nodes[b] for b in broker_ids]
