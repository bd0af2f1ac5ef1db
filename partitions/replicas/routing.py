"""Where things are, as this node knows them: node addresses and liveness, partition leaders, and which
replicas cannot open or replay. Read-only over what others own: the address book (filled from the static
peer list and gossip), ``ClusterView`` (gossip's states and claims), the replica map (local Raft roles)
and the controller's metadata. Event loop only; it never waits and never asks another node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from partitions import features
from partitions.controller import elections
from partitions.controller.state import ControllerMetadata, TopicMetadata
from partitions.errors import UnknownPartition, UnknownTopic
from partitions.replicas.cluster_view import ClusterView
from partitions.replicas.failures import ReplicaFailure
from partitions.replicas.manager import ReplicaManager

NO_EPOCH = -1


class Routing:
    def __init__(
        self,
        node_id: str,
        addresses: Mapping[str, str],
        view: ClusterView,
        replicas: ReplicaManager,
        metadata: Callable[[], ControllerMetadata],
        kafka: str | None = None,
        kept_out: Callable[[Mapping[str, int] | None], str | None] = lambda announced: None,
        refused: Callable[[str], str | None] = lambda node_id: None,
    ) -> None:
        """``addresses``: node id -> HTTP base URL of the nodes configured at start (this one included);
        ``kafka``: this node's Kafka listener as clients reach it (others' come by gossip); ``kept_out``:
        why a node whose code announces ``announced`` (its supported levels; None: none, release 0.1.0)
        takes no part in the cluster (``features.kept_out`` on the levels as this node knows them);
        ``refused``: why the Raft hub refused a node at its last handshake (None: it did not)."""
        self.node_id = node_id
        self._http = dict(addresses)
        self._kafka: dict[str, str] = {} if kafka is None else {node_id: kafka}
        self._view = view
        self._replicas = replicas
        self._metadata = metadata
        self._kept_out = kept_out
        self._refused = refused

    # -- nodes ---------------------------------------------------------------------------------------

    def learn(self, node_id: str, http: str, kafka: str | None = None) -> None:
        """A node gossip told us of (its address is its own: a configured peer keeps its configured one;
        its Kafka listener is as it last gossiped it)."""
        self._http.setdefault(node_id, http)
        if kafka is None:
            self._kafka.pop(node_id, None)
        else:
            self._kafka[node_id] = kafka

    def http_address(self, node_id: str) -> str | None:
        return self._http.get(node_id)

    def kafka_address(self, node_id: str) -> str | None:
        """HOST:PORT of a node's Kafka listener as clients reach it; None: it has none (or not heard)."""
        return self._kafka.get(node_id)

    def addressed_nodes(self) -> list[str]:
        return sorted(self._http)

    def known_nodes(self) -> set[str]:
        return set(self._http) | set(self._view.node_ids())

    def liveness(self, node_id: str) -> str:
        """Gossip's verdict; a configured peer gossip has not heard of yet counts as dead."""
        if node_id == self.node_id:
            return "alive"
        return self._view.state(node_id) or "dead"

    def kept_out(self, node_id: str) -> str | None:
        """Why ``node_id`` takes no part in the cluster: routed nothing, given no replica, counted alive for
        nothing (``features.kept_out``); None for this node and every node that does."""
        if node_id == self.node_id:
            return None
        refused = self._refused(node_id)  # what it announced at its last Raft handshake here
        if refused is not None:
            return refused
        meta = self._view.meta(node_id) if self._view.state(node_id) == "alive" else None
        return None if meta is None else self._kept_out(meta.supported)  # as it gossips (None: 0.1.0)

    def doors_missing(self, node_id: str) -> tuple[str, ...]:
        """The doors another serving node has and ``node_id`` lacks, as gossip tells them: ``("kafka",)``
        when another node has a Kafka listener and it has none; () for a node not heard from yet. Such a
        node leads nothing, since that door's clients could not reach it as a leader (Kafka answers them
        LEADER_NOT_AVAILABLE): the leader balancer drains it, a transfer or preferred election to it is
        refused, and health names it."""
        if node_id in self._kafka or (node_id != self.node_id and self._view.meta(node_id) is None):
            return ()
        if any(other != node_id and self.serving(other) for other in self._kafka):
            return ("kafka",)
        return ()

    def may_lead(self, node_id: str) -> str | None:
        """Why ``node_id`` may not lead a partition (None: it may): a door it lacks."""
        return elections.unfit_to_lead(node_id, self.doors_missing(node_id))

    def serving(self, node_id: str) -> bool:
        """Alive by gossip and not kept out."""
        return self.liveness(node_id) == "alive" and self.kept_out(node_id) is None

    def supported_features(self, node_id: str) -> Mapping[str, int] | None:
        """The highest level of each feature ``node_id``'s code supports, as it gossiped them; {} for a node
        of release 0.1.0 (it gossips none: every feature at level 1), None for one not heard from."""
        if node_id == self.node_id:
            return features.SUPPORTED
        if self._view.state(node_id) != "alive":
            return None
        meta = self._view.meta(node_id)
        if meta is None:
            return None
        return {} if meta.supported is None else meta.supported

    def alive_nodes(self) -> list[str]:
        """Nodes gossip finds alive, but those kept out."""
        return sorted(n for n in self.known_nodes() if self.serving(n))

    def placeable(self) -> list[str]:
        """Nodes a new replica may go to: every addressed node except those gossip reports suspect, dead or
        left (a configured peer gossip has not heard from yet, right after start, still counts) and those
        kept out."""
        return sorted(
            n
            for n in self._http
            if n == self.node_id or (self._view.state(n) in (None, "alive") and self.kept_out(n) is None)
        )

    def standby(self) -> list[str]:
        """Nodes that exist but are down after a crash (gossip suspects them or declared them dead, without
        their goodbye): a new replica goes there only when the placeable nodes are too few for the factor,
        as Kafka places on a fenced broker still registered. A node that left is gone for placement."""
        return sorted(
            n for n in self._http if n != self.node_id and self._view.state(n) in ("suspect", "dead")
        )

    # -- leaders -------------------------------------------------------------------------------------

    def _topic(self, name: str) -> TopicMetadata:
        topic = self._metadata().topics.get(name)
        if topic is None:
            raise UnknownTopic(name)
        return topic

    def partition_topic(self, topic: str, partition: int) -> TopicMetadata | None:
        """The topic's metadata if it has ``partition``; None for an unknown topic or partition."""
        try:
            metadata = self._topic(topic)
        except UnknownTopic:
            return None
        return metadata if 0 <= partition < metadata.partitions else None

    def known_leader(self, topic: str, partition: int) -> str | None:
        return self.known_leader_epoch(topic, partition)[0]

    def known_leader_epoch(self, topic: str, partition: int) -> tuple[str | None, int]:
        """The known leader and its term (Kafka's leader epoch; -1 with no leader known)."""
        metadata = self._topic(topic)
        if not 0 <= partition < metadata.partitions:
            raise UnknownPartition(topic, partition)
        group_id = metadata.group_id(partition)
        replica = self._replicas.get(group_id)
        term = NO_EPOCH
        if replica is not None and replica.group.stopped_error is None:
            # A local replica's Raft view is authoritative, except that an isolated follower keeps naming
            # its old leader (pysyncobj holds no election while connected to no peer): a leader gossip
            # reports dead or left is not a known leader.
            leader, term = replica.group.leader_and_term()
            if leader is not None and leader != self.node_id and self._view.state(leader) in ("dead", "left"):
                return None, NO_EPOCH
        else:
            claim = self._view.leader_claim(group_id)
            leader, term = (None, NO_EPOCH) if claim is None else claim
            if leader == self.node_id:
                leader = None  # our own gossip may lag our Raft state
        if leader is None or self.failure(leader, metadata, partition) is not None:
            return None, NO_EPOCH  # a replica that cannot open or replay leads nothing, whatever a view says
        if self.kept_out(leader) is not None:
            return None, NO_EPOCH  # nor a node kept out (a claim it gossiped from a log that may diverge)
        return leader, term

    def leader_hint(self, topic: str, partition: int) -> str | None:
        """Best guess of the leader, for routing: this node's replica's view, else gossiped claims, else
        an alive replica (which knows its leader better than this node does)."""
        metadata = self.partition_topic(topic, partition)
        if metadata is None:
            return None
        group_id = metadata.group_id(partition)

        def failed(node_id: str) -> bool:
            return (
                self.failure(node_id, metadata, partition) is not None or self.kept_out(node_id) is not None
            )

        replica = self._replicas.get(group_id)
        if replica is not None and replica.group.stopped_error is None:
            leader = replica.group.role_and_leader()[1]
            if (
                leader is not None
                and (leader == self.node_id or self._view.state(leader) not in ("dead", "left"))
                and not failed(leader)
            ):
                return leader
        claimed = self._view.leader_for(group_id)
        if claimed is not None and claimed != self.node_id and not failed(claimed):
            return claimed
        alive = [
            n
            for n in metadata.replicas[partition]
            if n != self.node_id and self.liveness(n) == "alive" and not failed(n)
        ]
        return alive[0] if alive else None

    def claimed_leader(self, metadata: TopicMetadata, partition: int) -> str | None:
        """The node another node's gossip says leads the partition (never this one: its own Raft view
        says otherwise), unless its replica cannot open or replay."""
        claimed = self._view.leader_for(metadata.group_id(partition))
        if claimed is None or claimed == self.node_id or self.failure(claimed, metadata, partition):
            return None
        return None if self.kept_out(claimed) is not None else claimed

    def has_leader(self, metadata: TopicMetadata, partition: int) -> bool:
        """Whether a new partition has a leader as seen from here: a local replica's Raft status, or
        gossiped claims for partitions hosted elsewhere."""
        group_id = metadata.group_id(partition)
        replica = self._replicas.get(group_id)
        if replica is not None:
            return replica.group.role_and_leader()[1] is not None
        if self.node_id in metadata.replicas[partition]:
            return False  # not opened here yet
        return self._view.leader_for(group_id) is not None

    # -- replicas that cannot open or replay ---------------------------------------------------------

    def failure(self, node_id: str, metadata: TopicMetadata, partition: int) -> ReplicaFailure | None:
        """The failure of ``node_id``'s replica of the partition, if it cannot open or replay."""
        if node_id != self.node_id:
            return self._view.failure(node_id, metadata.name, partition)
        return self._replicas.failure_here(metadata, partition)

    def failed_replicas(self) -> list[ReplicaFailure]:
        """Every replica known to be unable to open or replay: this node's, and those its alive and suspect
        peers gossip."""
        local = self._replicas.local_failures()
        failures = local + [f for f in self._view.failures() if f.node != self.node_id]
        return sorted(failures, key=lambda f: (f.topic, f.partition, f.node))
