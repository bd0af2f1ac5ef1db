"""Node-to-node calls: every op of the peer table is served under the internal prefix, refuses a caller
without the cluster credential (401, nothing of the answer, not even the node id), and answers a peer
with the callee's typed result or its typed error, raised again on the caller as the same class."""

from __future__ import annotations

import pytest
from fake_node import INTERNAL_CREDENTIAL, FakeCluster
from harness import Node

from api.app import ROUTES
from api.openapi import Operation
from partitions.consumers.protocol import GroupService
from partitions.data.service import DataService
from partitions.data.share_records import ShareService
from partitions.errors import InvalidReassignment, PeerProtocolError, PeerUnreachable, UnknownTopic
from partitions.features import SUPPORTED, kept_out
from partitions.metadata.service import AdminService
from partitions.peers.client import (
    INTERNAL_PREFIX,
    LEVELS_HEADER,
    MEDIA_TYPE,
    OPS,
    PEER_OPS,
    REGISTRY,
    PeerClient,
    encode_levels,
    parse_levels,
    path_of,
    remote_admin,
    remote_data,
    remote_peer,
)
from partitions.peers.codec import pack
from partitions.peers.service import PeerService
from partitions.registry.service import RegistryService
from partitions.transactions.service import TransactionService
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog.storage.batch_reads import records_from
from raftlog.storage.errors import OffsetOutOfRange
from raftlog_contract import LEADER_HEADER

INTERNAL = [op for op in ROUTES if op.path.startswith(INTERNAL_PREFIX)]
PROTOCOLS = {
    "data": DataService,
    "admin": AdminService,
    "groups": GroupService,
    "peer": PeerService,
    "transactions": TransactionService,
    "shares": ShareService,
    "registry": RegistryService,
}


def test_every_peer_op_is_a_route_under_the_internal_prefix_and_nothing_else_is() -> None:
    assert sorted(op.path for op in INTERNAL) == sorted(path_of(op) for op in PEER_OPS)
    assert all(op.method == "POST" and op.tag == "internal" for op in INTERNAL)


@pytest.mark.parametrize("op", PEER_OPS, ids=lambda op: op.name)
def test_every_peer_op_is_a_method_of_its_service_protocol(op: object) -> None:
    """The server calls ``getattr(local.<service>, <method>)``: each op names a method of the protocol."""
    assert hasattr(PROTOCOLS[op.service], op.method)  # type: ignore[attr-defined]


@pytest.mark.parametrize("operation", INTERNAL, ids=lambda op: op.operation_id)
@pytest.mark.parametrize("authorization", [None, "Bearer not-the-credential", "Basic xyz"])
async def test_an_internal_route_refuses_a_caller_without_the_cluster_credential(
    operation: Operation, authorization: str | None, cluster: FakeCluster, n1: Node
) -> None:
    cluster.add_topic("t", 1, [["n1"]])
    headers = {"Content-Type": MEDIA_TYPE}
    if authorization is not None:
        headers["Authorization"] = authorization
    body = pack({"topic": "t", "partition": 0, "offset": 0, "max_bytes": 100}, REGISTRY)
    answer = await n1.client.post(operation.path, data=body, headers=headers)
    assert answer.status == 401
    refusal = await answer.json()
    assert refusal["error_code"] == 40101 and "cluster credential" in refusal["message"]
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert LEADER_HEADER not in answer.headers, "an unauthenticated caller learns not even the node's id"
    assert n1.data.calls["read_batches"] == 0, "nothing ran"


@pytest.mark.parametrize(
    "announced",
    [None, "raftlog.version=1, transaction.version=2", "raftlog.version=2"],
    ids=["release 0.1.0: none", "raftlog.version 1", "transaction.version missing"],
)
async def test_an_internal_route_refuses_a_peer_whose_code_is_below_the_clusters_levels(
    announced: str | None, cluster: FakeCluster, n1: Node
) -> None:
    """The fake cluster is finalized at this code's levels: a caller whose code announces less (none: a
    node of release 0.1.0) is answered 409/40934 naming why, and nothing runs; one that announces them is
    served, and every answer carries the callee's own levels."""
    cluster.add_topic("t", 1, [["n1"]])
    headers = {"Content-Type": MEDIA_TYPE, "Authorization": f"Bearer {INTERNAL_CREDENTIAL}"}
    if announced is not None:
        headers[LEVELS_HEADER] = announced
    body = pack({"topic": "t", "partition": 0, "offset": 0, "max_bytes": 100}, REGISTRY)
    path = path_of(OPS["peer.read_batches"])
    answer = await n1.client.post(path, data=body, headers=headers)
    assert answer.status == 409
    refusal = await answer.json()
    assert refusal["error_code"] == 40934 and "kept out of the cluster" in refusal["message"]
    assert "finalized at 2" in refusal["message"]
    assert n1.data.calls["read_batches"] == 0, "nothing ran"
    headers[LEVELS_HEADER] = encode_levels(SUPPORTED)
    answer = await n1.client.post(path, data=body, headers=headers)
    assert answer.status == 200 and parse_levels(answer.headers[LEVELS_HEADER]) == dict(SUPPORTED)


async def test_a_peer_answer_from_a_node_below_the_clusters_levels_is_taken_as_no_answer(
    cluster: FakeCluster, n1: Node
) -> None:
    """A caller takes no answer from a callee whose code is below the cluster's levels (it may come from a
    log that diverged): the call fails as if the callee were down (PeerUnreachable, retried elsewhere)."""
    cluster.add_topic("t", 1, [["n1"]])
    callee_levels = {"raftlog.version": 1}
    strict = PeerClient(
        INTERNAL_CREDENTIAL,
        cluster.addresses.get,
        kept_out=lambda announced: kept_out({"raftlog.version": 2}, callee_levels if announced else None),
    )
    try:
        with pytest.raises(PeerUnreachable, match="kept out of the cluster"):
            await remote_data(strict, "n1").fetch_batches("t", 0, 0, 100, 0)
        callee_levels = dict(SUPPORTED)
        fetched = await remote_data(strict, "n1").fetch_batches("t", 0, 0, 100, 0)
        assert fetched.high_watermark == 0
    finally:
        await strict.close()


@pytest.fixture
async def peer(cluster: FakeCluster) -> PeerClient:
    return PeerClient(INTERNAL_CREDENTIAL, cluster.addresses.get)


async def test_a_peer_call_answers_typed_results_and_raises_typed_errors(
    cluster: FakeCluster, n1: Node, n2: Node, peer: PeerClient
) -> None:
    cluster.add_topic("t", 1, [["n1", "n2"]])
    try:
        data = remote_data(peer, "n1")
        batch = encode_batch(0, [ProducerRecord(b"v", b"k", (("h", b"1"),))], 0, 1000, 7, 0)
        produced = await data.produce_batch("t", 0, batch, 5000)
        assert (produced.base_offset, produced.end_offset, produced.duplicate) == (0, 1, False)
        fetched = await data.fetch_batches("t", 0, 0, 1 << 20, 0)
        [record] = records_from(fetched.data, 0)
        assert (record.key, record.value, record.headers, fetched.high_watermark) == (
            b"k",
            b"v",
            (("h", b"1"),),
            1,
        )
        with pytest.raises(OffsetOutOfRange) as out_of_range:  # the same class, with its offsets
            await data.fetch_batches("t", 0, 5, 1 << 20, 0)
        assert (out_of_range.value.log_start_offset, out_of_range.value.end_offset) == (0, 1)
        with pytest.raises(NotLeader) as not_leader:  # n2 does not lead: the hint names n1
            await remote_data(peer, "n2").offsets("t", 0)
        assert not_leader.value.leader_hint == "n1"
        with pytest.raises(UnknownTopic):
            await remote_admin(peer, "n1").topic("nope")

        view = await remote_peer(peer, "n1").member_view("t", 0)
        assert view.leader == "n1" and view.voters == frozenset({"n1", "n2"})
        with pytest.raises(InvalidReassignment):
            await remote_peer(peer, "n1").change_membership("t", 0, "explode", "n3", 1000)
        await remote_peer(peer, "n1").change_membership("t", 0, "add", "n3", 1000)
        assert cluster.partitions[("t", 0)].replicas == ("n1", "n2", "n3")
        claims = await remote_peer(peer, "n1").leadership()
        assert claims.node == "n1" and claims.claims == {cluster.topics["t"].group_id(0): 1}

        snapshot = await remote_peer(peer, "n1").controller_snapshot(None)
        assert snapshot.leader == "n1" and snapshot.snapshot is not None
        same = await remote_peer(peer, "n1").controller_snapshot(snapshot.applied_index)
        assert same.snapshot is None, "the caller already holds that index"
    finally:
        await peer.close()
    with pytest.raises(PeerUnreachable, match="closing"):  # a closed client opens no session again
        await remote_admin(peer, "n1").topic("t")
    assert peer._session is None


async def test_a_node_catching_up_answers_a_topic_it_does_not_know_as_no_leader(
    cluster: FakeCluster, n1: Node, peer: PeerClient
) -> None:
    """Its view is of before its restart: the topic may exist, so the caller is told to ask again
    (NoLeader), as the previous release's router does, never that it does not exist."""
    try:
        with pytest.raises(UnknownTopic):
            await remote_data(peer, "n1").offsets("new", 0)
        cluster.catching_up.add("n1")
        with pytest.raises(NoLeader):
            await remote_data(peer, "n1").offsets("new", 0)
        cluster.add_topic("t", 1, [["n1"]])
        answered = await remote_data(peer, "n1").offsets("t", 0)  # what it knows, it answers
        assert answered.high_watermark == 0
    finally:
        await peer.close()


async def test_a_peer_that_cannot_be_reached_or_answers_nonsense_is_told_apart(
    cluster: FakeCluster, n1: Node, peer: PeerClient
) -> None:
    try:
        with pytest.raises(PeerUnreachable):
            await remote_peer(peer, "nobody").leadership()  # no address known
        cluster.addresses["n9"] = n1.url + "/elsewhere"  # an HTTP server that is no peer endpoint
        with pytest.raises(PeerProtocolError, match=r"answered peer\.leadership with 404"):
            await remote_peer(peer, "n9").leadership()
    finally:
        await peer.close()


async def test_a_malformed_peer_call_is_a_400_and_runs_nothing(n1: Node) -> None:
    auth = {
        "Authorization": f"Bearer {INTERNAL_CREDENTIAL}",
        "Content-Type": MEDIA_TYPE,
        LEVELS_HEADER: encode_levels(SUPPORTED),
    }
    garbled = await n1.client.post("/internal/v1/peer/read_batches", data=b"\xc1", headers=auth)
    assert garbled.status == 400
    wrong = await n1.client.post(
        "/internal/v1/peer/read_batches", data=pack({"topic": "t", "bogus": 1}, REGISTRY), headers=auth
    )
    assert wrong.status == 400 and "do not fit" in (await wrong.json())["message"]
    assert n1.data.calls["read_batches"] == 0
