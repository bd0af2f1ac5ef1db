"""The table of Kafka APIs this listener serves: key, versions, handler and the ACLs its handler checks
(``serve --enforce-acls``; Kafka's for the same API, in words the compatibility doc repeats). It drives
dispatch and the ApiVersions answer, so what a client is told is supported is exactly what is served.

Versions are capped where a later one needs what raftlog does not have, or where a client sends what kio
cannot read (docs/kafka-compatibility.md's table "Beside Apache Kafka 4.4.0" lists each, tested against the
reference): Fetch goes to 18 (v13+ name topics by id, v15+ carry a follower's replica state, v16+ node
endpoints, v17 a directory id, v18 a follower's high watermark: a consumer's fetch reads the same), with
incremental fetch sessions (``fetch_sessions``); Produce to 13 (v10-11 add the current leader and node
endpoints, left unset as Kafka leaves them but for NOT_LEADER_OR_FOLLOWER; v12 tells the broker the producer
uses transaction version 2: its batch adds its partition to its transaction; v13 names topics by id, KIP-516,
an id no topic has answered UNKNOWN_TOPIC_ID per partition as Kafka's); Metadata goes to 13, the last of Kafka
4.4 and what librdkafka 2.16 and Kafka's Java client 4.x ask for (librdkafka trusts leader epochs only from
v9; its request for all topics at v9+ is malformed and read as meant, ``wire.CLIENT_SLIPS``); ListOffsets at
10 (v11 lists a tiered storage offset raftlog has not); OffsetCommit and OffsetFetch to 10 (v9: a consumer
group protocol member commits and fetches with its member id and epoch; OffsetFetch v8+ batches groups; v10
names topics by id, KIP-848: an id no topic has is UNKNOWN_TOPIC_ID per partition, the group's other topics go
on); FindCoordinator to 5 (v5 only allows TRANSACTION_ABORTABLE, v6 finds share coordinators for brokers);
JoinGroup to 9 (v8 adds a reason, taken and not kept; v9 tells a static leader back from a restart to skip the
assignment, KIP-814) and LeaveGroup at 5 (v5: a member's reason, taken and not kept); DescribeGroups to 6 (v6:
a group there is not, or not classic, GROUP_ID_NOT_FOUND, KIP-1043); ConsumerGroupHeartbeat and
ConsumerGroupDescribe at 1 (v1: regular expression subscriptions, which librdkafka 2.16 needs to speak the
protocol at all); StreamsGroupHeartbeat and StreamsGroupDescribe to 1, Kafka 4.4's streams groups (KIP-1071:
v1 of each adds what a topology description store gives, which raftlog keeps none of); ShareGroupHeartbeat and
ShareGroupDescribe at 1, Kafka 4.1's share groups (KIP-932); ShareFetch and ShareAcknowledge to 2, as Kafka
4.2-4.4 (v2: a RENEW acknowledgement keeps a record and renews its lock, KIP-1222, and a fetch may acquire at
most max_records records, KIP-1206; franz-go's share consumer needs v2); ListGroups to 5 (v5 filters by group
type); CreateTopics to 7 (v7 answers the new topic's id) and DeleteTopics to 6 (v6 names each topic by name or
by id, Kafka's INVALID_REQUEST for neither, both or one given twice); DescribeCluster to 2 (v2 lists fenced
brokers when asked); DescribeLogDirs to 5 (v5: whether a log directory is cordoned, never here).
OffsetForLeaderEpoch starts at 2, the first kio has (Kafka 4.0 removed v0-1, KIP-896): librdkafka asks for v2,
Kafka's Java client 4.x for v4. The transaction APIs include Kafka's transaction version 2 (KIP-890's second
part), which Kafka's Java client 4.x uses once the cluster finalizes feature ``transaction.version`` 2 (a new
cluster does; an upgraded one once ``kafka-features upgrade`` raises it, every node supporting it): EndTxn to
5 (v5 bumps the epoch at every end), TxnOffsetCommit to 6 (v5 adds the group itself; v6 names topics by id),
Produce v12 above; AddPartitionsToTxn at 3 (v4+ are the brokers' own); InitProducerId at 5 (v6 is KIP-939's
two-phase commit, unstable in Kafka 4.1); ListTransactions to 2 (v2: a pattern of ids, RE2 as Kafka's,
KIP-1152); DeleteGroups to 3 (v3: each group's error message, as Kafka's coordinator gives it); ApiVersions to
5 (v5: a client naming another cluster or node is told REBOOTSTRAP_REQUIRED, KIP-1242). The versions kio 0.6.5
lacks (ApiVersions v5, DeleteGroups v3, TxnOffsetCommit v6, both streams group APIs) are built by kio's
rules (``message_classes``); WriteTxnMarkers is v1 alone (Kafka 4.0 removed v0, v2 carries the transaction
version). librdkafka 2.16 asks for AddPartitionsToTxn and AddOffsetsToTxn v0, EndTxn v0-1, TxnOffsetCommit
v0-3, InitProducerId v0-4. SaslHandshake lists v0 only because librdkafka 2.0 (Debian's kcat) offers SASL only
to a broker whose range includes it (its feature check; it then asks for v1); a v0 handshake itself is refused
(``sasl_apis``). The delegation token APIs (CreateDelegationToken to 3, Renew and Expire to 2, Describe to 3)
start at v1, as Kafka 4.0 left them (KIP-896); a client logs in with a token through SaslAuthenticate (SCRAM
with ``tokenauth=true``). The ACL APIs start at v1, the first with pattern types (KIP-290; kio, like Kafka
4.0, has no v0); librdkafka 2.16 asks for v2, kafka-python for v3."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.acl_apis import create_acls, delete_acls, describe_acls
from kafka_api.admin_apis import (
    alter_configs,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    incremental_alter_configs,
)
from kafka_api.consumer_group_apis import consumer_group_describe, consumer_group_heartbeat
from kafka_api.delegation_token_apis import (
    create_delegation_token,
    describe_delegation_token,
    expire_delegation_token,
    renew_delegation_token,
)
from kafka_api.delete_records import delete_records
from kafka_api.describe_topic_partitions import describe_topic_partitions
from kafka_api.door import Door
from kafka_api.feature_apis import update_features
from kafka_api.fetch import fetch
from kafka_api.find_coordinator import find_coordinator
from kafka_api.group_apis import (
    delete_groups,
    describe_groups,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
    txn_offset_commit,
)
from kafka_api.list_offsets import list_offsets
from kafka_api.metadata import metadata
from kafka_api.node_state_apis import (
    add_raft_voter,
    alter_replica_log_dirs,
    describe_log_dirs,
    describe_quorum,
    remove_raft_voter,
    unregister_broker,
)
from kafka_api.offset_for_leader_epoch import offset_for_leader_epoch
from kafka_api.produce import produce
from kafka_api.producer_ids import init_producer_id
from kafka_api.producer_state_apis import describe_producers, write_txn_markers
from kafka_api.quota_apis import alter_client_quotas, describe_client_quotas
from kafka_api.replica_apis import (
    alter_partition_reassignments,
    elect_leaders,
    list_partition_reassignments,
)
from kafka_api.resource_config_apis import list_config_resources
from kafka_api.sasl_apis import sasl_authenticate, sasl_handshake
from kafka_api.security import API_VERSIONS
from kafka_api.share_group_apis import (
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
)
from kafka_api.share_offset_apis import (
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group_offsets,
)
from kafka_api.streams_group_apis import streams_group_describe, streams_group_heartbeat
from kafka_api.transaction_apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    list_transactions,
)
from kafka_api.user_apis import alter_user_scram_credentials, describe_user_scram_credentials
from partitions.names import broker_id

API_VERSIONS_KEY = API_VERSIONS
Handler = Callable[[Door, wire.Request], Awaitable[Any]]  # the response entity; None: no response


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    acls: str  # what the handler checks with ACLs enforced (docs/kafka-compatibility.md says the same)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


async def api_versions(door: Door, request: wire.Request) -> Any:
    if request.api_version >= 5 and _elsewhere(door, request.body.cluster_id, request.body.node_id):
        return versions_response(request.api_version, ErrorCode.rebootstrap_required)
    gate = door.node.metadata.features()
    return versions_response(request.api_version, ErrorCode.none, (*gate.advertised(), gate.epoch()))


def _elsewhere(door: Door, cluster_id: str | None, node_id: int) -> bool:
    """KIP-1242 (ApiVersions v5): a client that names the cluster it means to reach names the node too, and
    is told to bootstrap again (REBOOTSTRAP_REQUIRED, with no API listed) when either is not this one, as
    Kafka's broker tells it: its address now belongs to another cluster or another node."""
    return cluster_id is not None and (
        cluster_id != door.cluster_id or node_id != broker_id(door.node.node_id)
    )


def versions_response(
    version: int,
    error: ErrorCode,
    features: tuple[dict[str, tuple[int, int]], dict[str, int], int] | None = None,
) -> Any:
    """The ApiVersions answer at ``version`` (v0 for a version this listener does not speak, KIP-511).
    ``features`` (v3 on: what ``kafka-features describe`` reads, KIP-584): the range of levels this node's
    code supports, the cluster's finalized ones, and their epoch (the controller metadata's applied index,
    as KRaft gives its metadata offset)."""
    cls = wire.response_class(API_VERSIONS_KEY, version)
    entry = wire.sibling(cls, "ApiVersion")
    keys = tuple(
        wire.build(entry, api_key=api.key, min_version=api.min_version, max_version=api.max_version)
        for api in sorted(APIS.values(), key=lambda a: a.key)
        if error in (ErrorCode.none, ErrorCode.unsupported_version)  # Kafka lists them with no other error
    )
    extra: dict[str, Any] = {}
    if features is not None and version >= 3:
        supported, finalized, epoch = features
        supported_key = wire.sibling(cls, "SupportedFeatureKey")
        finalized_key = wire.sibling(cls, "FinalizedFeatureKey")
        extra = {
            "supported_features": tuple(
                wire.build(supported_key, name=name, min_version=low, max_version=high)
                for name, (low, high) in sorted(supported.items())
            ),
            "finalized_features_epoch": epoch,
            "finalized_features": tuple(
                wire.build(finalized_key, name=name, max_version_level=level, min_version_level=level)
                for name, level in sorted(finalized.items())
            ),
        }
    return wire.build(cls, error_code=error, api_keys=keys, throttle_time=wire.NO_THROTTLE, **extra)


# fmt: off
APIS: dict[int, Api] = {
    api.key: api
    for api in (
        Api(0, "Produce", 3, 13, produce, "WRITE topic; a transactional producer's: WRITE transactional id"),
        Api(1, "Fetch", 4, 18, fetch, "READ topic"),
        Api(2, "ListOffsets", 1, 11, list_offsets, "DESCRIBE topic"),
        Api(3, "Metadata", 0, 13, metadata,
            "DESCRIBE topic (others left out of all topics); CREATE cluster or CREATE topic to create one"),
        Api(8, "OffsetCommit", 2, 10, offset_commit, "READ group, READ topic"),
        Api(9, "OffsetFetch", 1, 10, offset_fetch, "DESCRIBE group, DESCRIBE topic"),
        Api(10, "FindCoordinator", 0, 5, find_coordinator, "DESCRIBE group, DESCRIBE transactional id"),
        Api(11, "JoinGroup", 0, 9, join_group, "READ group"),
        Api(12, "Heartbeat", 0, 4, heartbeat, "READ group"),
        Api(13, "LeaveGroup", 0, 5, leave_group, "READ group"),
        Api(14, "SyncGroup", 0, 5, sync_group, "READ group"),
        Api(15, "DescribeGroups", 0, 6, describe_groups, "DESCRIBE group"),
        Api(16, "ListGroups", 0, 5, list_groups, "DESCRIBE cluster, else DESCRIBE group (others left out)"),
        Api(42, "DeleteGroups", 0, 3, delete_groups, "DELETE group"),
        Api(47, "OffsetDelete", 0, 0, offset_delete, "DELETE group, READ topic"),
        Api(68, "ConsumerGroupHeartbeat", 0, 1, consumer_group_heartbeat, "READ group"),
        Api(69, "ConsumerGroupDescribe", 0, 1, consumer_group_describe, "DESCRIBE group"),
        Api(88, "StreamsGroupHeartbeat", 0, 1, streams_group_heartbeat,
            "READ group; a topology: DESCRIBE topic (each named), CREATE cluster or topic (internal ones)"),
        Api(89, "StreamsGroupDescribe", 0, 1, streams_group_describe, "DESCRIBE group"),
        Api(76, "ShareGroupHeartbeat", 1, 1, share_group_heartbeat, "READ group"),
        Api(77, "ShareGroupDescribe", 1, 1, share_group_describe, "DESCRIBE group"),
        Api(78, "ShareFetch", 1, 2, share_fetch, "READ group, READ topic"),
        Api(79, "ShareAcknowledge", 1, 2, share_acknowledge, "READ group, READ topic"),
        Api(90, "DescribeShareGroupOffsets", 0, 1, describe_share_group_offsets,
            "DESCRIBE group, DESCRIBE topic"),
        Api(91, "AlterShareGroupOffsets", 0, 0, alter_share_group_offsets, "READ group, READ topic"),
        Api(92, "DeleteShareGroupOffsets", 0, 0, delete_share_group_offsets, "DELETE group, READ topic"),
        Api(17, "SaslHandshake", 0, 1, sasl_handshake, "none (before authentication)"),
        Api(API_VERSIONS_KEY, "ApiVersions", 0, 5, api_versions, "none (before authentication)"),
        Api(19, "CreateTopics", 2, 7, create_topics, "CREATE cluster or CREATE topic"),
        Api(20, "DeleteTopics", 1, 6, delete_topics, "DELETE topic"),
        Api(21, "DeleteRecords", 0, 2, delete_records, "DELETE topic"),
        Api(22, "InitProducerId", 0, 5, init_producer_id,
            "WRITE transactional id; without one IDEMPOTENT_WRITE cluster or WRITE on any topic"),
        Api(24, "AddPartitionsToTxn", 0, 3, add_partitions_to_txn, "WRITE transactional id, WRITE topic"),
        Api(25, "AddOffsetsToTxn", 0, 4, add_offsets_to_txn, "WRITE transactional id, READ group"),
        Api(26, "EndTxn", 0, 5, end_txn, "WRITE transactional id"),
        Api(28, "TxnOffsetCommit", 0, 6, txn_offset_commit, "WRITE transactional id, READ group, READ topic"),
        Api(23, "OffsetForLeaderEpoch", 2, 4, offset_for_leader_epoch,
            "CLUSTER_ACTION cluster, else DESCRIBE topic"),
        Api(29, "DescribeAcls", 1, 3, describe_acls, "DESCRIBE cluster"),
        Api(30, "CreateAcls", 1, 3, create_acls, "ALTER cluster"),
        Api(31, "DeleteAcls", 1, 3, delete_acls, "ALTER cluster"),
        Api(32, "DescribeConfigs", 1, 4, describe_configs, "DESCRIBE_CONFIGS topic (a broker: cluster)"),
        Api(33, "AlterConfigs", 0, 2, alter_configs, "ALTER_CONFIGS topic (a broker: cluster)"),
        Api(36, "SaslAuthenticate", 0, 2, sasl_authenticate, "none (before authentication)"),
        Api(37, "CreatePartitions", 0, 3, create_partitions, "ALTER topic"),
        Api(44, "IncrementalAlterConfigs", 0, 1, incremental_alter_configs,
            "ALTER_CONFIGS topic (a broker: cluster)"),
        Api(50, "DescribeUserScramCredentials", 0, 0, describe_user_scram_credentials, "DESCRIBE cluster"),
        Api(51, "AlterUserScramCredentials", 0, 0, alter_user_scram_credentials, "ALTER cluster"),
        Api(38, "CreateDelegationToken", 1, 3, create_delegation_token,
            "SASL, not a token; another owner: CREATE_TOKENS on its User resource (`User:alice`)"),
        Api(39, "RenewDelegationToken", 1, 2, renew_delegation_token,
            "SASL, not a token; the token's owner or a renewer"),
        Api(40, "ExpireDelegationToken", 1, 2, expire_delegation_token,
            "SASL, not a token; the token's owner or a renewer"),
        Api(41, "DescribeDelegationToken", 1, 3, describe_delegation_token,
            "SASL, not a token; its owner, requester or a renewer, DESCRIBE on the token (by its id), or "
            "DESCRIBE_TOKENS on its owner's User resource"),
        Api(60, "DescribeCluster", 0, 2, describe_cluster, "none"),
        Api(65, "DescribeTransactions", 0, 0, describe_transactions,
            "DESCRIBE transactional id (topics shown: DESCRIBE topic)"),
        Api(66, "ListTransactions", 0, 2, list_transactions, "DESCRIBE transactional id (others left out)"),
        Api(61, "DescribeProducers", 0, 0, describe_producers, "READ topic"),
        Api(27, "WriteTxnMarkers", 1, 1, write_txn_markers, "ALTER cluster, else CLUSTER_ACTION cluster"),
        Api(45, "AlterPartitionReassignments", 0, 1, alter_partition_reassignments, "ALTER cluster"),
        Api(46, "ListPartitionReassignments", 0, 0, list_partition_reassignments, "DESCRIBE cluster"),
        Api(43, "ElectLeaders", 0, 2, elect_leaders, "ALTER cluster"),
        Api(34, "AlterReplicaLogDirs", 1, 2, alter_replica_log_dirs, "ALTER cluster"),
        Api(35, "DescribeLogDirs", 1, 5, describe_log_dirs, "DESCRIBE cluster"),
        Api(55, "DescribeQuorum", 0, 2, describe_quorum, "DESCRIBE cluster"),
        Api(64, "UnregisterBroker", 0, 0, unregister_broker, "ALTER cluster"),
        Api(80, "AddRaftVoter", 0, 1, add_raft_voter, "ALTER cluster"),
        Api(81, "RemoveRaftVoter", 0, 0, remove_raft_voter, "ALTER cluster"),
        Api(75, "DescribeTopicPartitions", 0, 0, describe_topic_partitions,
            "DESCRIBE topic (others left out of all topics)"),
        Api(57, "UpdateFeatures", 0, 2, update_features, "ALTER cluster"),
        Api(48, "DescribeClientQuotas", 0, 1, describe_client_quotas, "DESCRIBE_CONFIGS cluster"),
        Api(49, "AlterClientQuotas", 0, 1, alter_client_quotas, "ALTER_CONFIGS cluster"),
        Api(74, "ListConfigResources", 0, 1, list_config_resources, "DESCRIBE_CONFIGS cluster"),
    )
}
# fmt: on
