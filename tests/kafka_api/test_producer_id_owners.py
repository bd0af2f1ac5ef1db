"""A producer id belongs to the principal InitProducerId gave it to, on a real 3-node ``raftlog dev --secure``
cluster (docs/security.md, "Producer ids"): mallory, a user with WRITE on the topic (and on bob's
transactional id, as a shared grant gives), reads bob's producer id, epoch and next sequence from his batch
headers and uses them.

- Inside bob's open transaction: her transactional batch through the Kafka door is refused
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, her plain one CLUSTER_AUTHORIZATION_FAILED, her batch and her JSON
  produce (a used sequence) through the HTTP door 403/40302; AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
  naming bob's producer id are refused too. Bob's transaction commits with his records, only his.
- Bob's idempotent producer's id: the same refusals; his next records are written, none of hers.
- An id bob picks himself over HTTP: written as one bound to him, so the id his batch headers show is
  refused to her through both doors, and the id he picked, when she uses it, is a producer of her own.
"""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import struct
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import crc32c
import pytest
from confluent_kafka import Producer
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from test_sasl_clients import _authenticate, _handshake, as_admin, curl, grant, make_user, sasl
from waiting import wait_for

from kafka_api import wire
from raftlog.storage.batch import BatchHeader, ProducerRecord, decode_header, encode_batch
from raftlog_client.local_cluster import LocalCluster
from raftlog_contract import BINARY_V2, JSON_V2, RECORD_BATCH

PRODUCE_VERSION = 9
ADD_PARTITIONS_VERSION = 3
ADD_OFFSETS_VERSION = 3
END_TXN_VERSION = 3
PATIENCE_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp("owners")), nodes=3, dev_args=["--secure"]) as running:
        yield running


class Users:
    def __init__(self, cluster: LocalCluster) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.bob, self.mallory = f"bob{suffix}", f"mallory{suffix}"
        self.password = "a password of theirs"
        self.topic, self.bob_tx, self.group = f"owned-{suffix}", f"bob-tx-{suffix}", f"g-{suffix}"
        for user in (self.bob, self.mallory):
            make_user(cluster, user, self.password)
        status, body = as_admin(cluster, "POST", "/v1/topics", {"name": self.topic, "partitions": 1})
        assert status == 201, body
        grant(
            cluster,
            *({"resource_type": "topic", "name": self.topic, "principal": f"User:{user}", "operation": op}
              for user in (self.bob, self.mallory) for op in ("write", "read")),
            *({"resource_type": "transactional_id", "name": self.bob_tx, "principal": f"User:{user}",
               "operation": "write"} for user in (self.bob, self.mallory)),
            {"resource_type": "group", "name": self.group, "principal": f"User:{self.mallory}",
             "operation": "read"},
        )  # fmt: skip


def _get(cluster: LocalCluster, url: str, accept: str) -> bytes:
    """GET as the admin, trusting the cluster's CA."""
    context = ssl.create_default_context(cafile=cluster.security["ca"])
    request = urllib.request.Request(url, headers={
        "Authorization": f"Bearer {cluster.security['admin_token']}", "Accept": accept})  # fmt: skip
    with urllib.request.urlopen(request, timeout=20, context=context) as answer:
        body: bytes = answer.read()
    return body


def _headers(cluster: LocalCluster, topic: str) -> list[BatchHeader]:
    """Every stored batch's header (uncommitted transactions included), as anyone allowed to read sees it."""
    data = _get(cluster, f"{cluster.servers[0]}/topics/{topic}/partitions/0/records?offset=0", RECORD_BATCH)
    headers, position = [], 0
    while position < len(data):
        header = decode_header(data, position)
        headers.append(header)
        position += header.size_bytes
    return headers


def _committed(cluster: LocalCluster, topic: str) -> list[str]:
    url = f"{cluster.servers[0]}/topics/{topic}/partitions/0/records?offset=0&isolation=read_committed"
    return [base64.b64decode(r["value"]).decode() for r in json.loads(_get(cluster, url, JSON_V2))]


def _batch(value: bytes, producer_id: int, epoch: int, sequence: int, transactional: bool) -> bytes:
    batch = bytearray(
        encode_batch(0, [ProducerRecord(value)], 0, int(time.time() * 1000), producer_id, sequence,
                     producer_epoch=epoch)
    )  # fmt: skip
    if transactional:
        struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x10)
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _login(cluster: LocalCluster, users: Users, address: str) -> RawKafka:
    """Mallory's raw connection to the node at ``address``, authenticated over SASL/PLAIN."""
    raw = RawKafka(address, ssl.create_default_context(cafile=cluster.security["ca"]))
    assert _handshake(raw, "PLAIN").error_code is ErrorCode.none
    token = f"\0{users.mallory}\0{users.password}".encode()
    assert _authenticate(raw, token).error_code is ErrorCode.none
    return raw


def _kafka_produce(
    cluster: LocalCluster, users: Users, batch: bytes, transactional_id: str | None
) -> ErrorCode:
    """Mallory's Produce of ``batch`` through the Kafka door of the partition's leader: its error."""
    cls = wire.request_class(0, PRODUCE_VERSION)
    part = wire.build(wire.sibling(cls, "PartitionProduceData"), index=0, records=batch)
    data = wire.build(wire.sibling(cls, "TopicProduceData"), name=users.topic, partition_data=(part,))
    body = wire.build(cls, transactional_id=transactional_id, acks=-1, timeout=datetime.timedelta(seconds=10),
                      topic_data=(data,))  # fmt: skip
    for address in cluster.bootstrap_servers.split(","):
        raw = _login(cluster, users, address)
        try:
            code: ErrorCode = (
                raw.call(0, PRODUCE_VERSION, body).responses[0].partition_responses[0].error_code
            )
        finally:
            raw.close()
        if code is not ErrorCode.not_leader_or_follower:
            return code
    raise AssertionError("no node leads the partition")


def _kafka_call(cluster: LocalCluster, users: Users, api_key: int, version: int, **fields: Any) -> Any:
    """Mallory's call of a transaction API on the transactional id's coordinator (each node is tried)."""
    body = wire.build(wire.request_class(api_key, version), **fields)
    answers = []
    for address in cluster.bootstrap_servers.split(","):
        raw = _login(cluster, users, address)
        try:
            answer = raw.call(api_key, version, body)
        finally:
            raw.close()
        code = answer.error_code if hasattr(answer, "error_code") else (
            answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)  # fmt: skip
        if code is not ErrorCode.not_coordinator:
            return code
        answers.append(code)
    raise AssertionError(f"no node coordinates the transactional id: {answers}")


def _http_produce(cluster: LocalCluster, users: Users, *argv: str) -> tuple[int, dict[str, Any]]:
    """Mallory's produce through the HTTP door of every node: the first answer (all must agree)."""
    answers = []
    for url in cluster.servers:
        status, body = curl(cluster, "-u", f"{users.mallory}:{users.password}", *argv,
                            f"{url}/topics/{users.topic}/partitions/0")  # fmt: skip
        answers.append((status, json.loads(body)))
    assert all(a == answers[0] for a in answers), answers
    return answers[0]


def _refused_over_http(
    cluster: LocalCluster, users: Users, producer_id: int, epoch: int, sequence: int
) -> None:
    path = f"{cluster.directory}/mallory-{uuid.uuid4().hex[:6]}.batch"
    with open(path, "wb") as out:
        out.write(_batch(b"mallory-http", producer_id, epoch, sequence, transactional=False))
    status, answer = _http_produce(
        cluster, users, "-H", f"Content-Type: {RECORD_BATCH}", "--data-binary", f"@{path}"
    )
    assert (status, answer["error_code"]) == (403, 40302), answer
    assert str(producer_id) in answer["message"], answer
    used = json.dumps({"records": [{"value": "mallory-json"}], "producer_id": producer_id, "sequence": 0})
    status, answer = _http_produce(cluster, users, "-H", f"Content-Type: {JSON_V2}", "--data", used)
    assert (status, answer["error_code"]) == (403, 40302), answer  # not the offsets of bob's record


def _produce(producer: Producer, topic: str, value: bytes) -> None:
    """One record, delivered (or the test fails with the producer's error)."""
    errors: list[Any] = []
    producer.produce(topic, value, partition=0, on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(PATIENCE_S) == 0
    assert errors == [None]


def test_another_principal_cannot_write_in_bobs_transaction_or_end_it(cluster: LocalCluster) -> None:
    users = Users(cluster)
    bob = Producer({**sasl(cluster, users.bob, users.password), "transactional.id": users.bob_tx,
                    "enable.idempotence": True})  # fmt: skip
    bob.init_transactions(PATIENCE_S)
    bob.begin_transaction()
    _produce(bob, users.topic, b"bob-1")
    [header] = _headers(cluster, users.topic)
    producer_id, epoch = header.producer_id, header.producer_epoch
    assert producer_id is not None and epoch is not None and header.is_transactional
    following = (header.sequence or 0) + header.record_count

    mallorys = _batch(b"mallory-kafka", producer_id, epoch, following, transactional=True)
    assert (
        _kafka_produce(cluster, users, mallorys, users.bob_tx)
        is ErrorCode.transactional_id_authorization_failed
    )
    plain = _batch(b"mallory-plain", producer_id, epoch, following, transactional=False)
    assert _kafka_produce(cluster, users, plain, None) is ErrorCode.cluster_authorization_failed
    _refused_over_http(cluster, users, producer_id, epoch, following)
    txn = {"producer_id": producer_id, "producer_epoch": epoch}
    topics = wire.sibling(wire.request_class(24, ADD_PARTITIONS_VERSION), "AddPartitionsToTxnTopic")
    added = _kafka_call(
        cluster, users, 24, ADD_PARTITIONS_VERSION, v3_and_below_transactional_id=users.bob_tx,
        v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(wire.build(topics, name=users.topic, partitions=(0,)),),
    )  # fmt: skip
    assert added is ErrorCode.transactional_id_authorization_failed
    offsets = _kafka_call(cluster, users, 25, ADD_OFFSETS_VERSION, transactional_id=users.bob_tx,
                          group_id=users.group, **txn)  # fmt: skip
    assert offsets is ErrorCode.transactional_id_authorization_failed
    ended = _kafka_call(
        cluster, users, 26, END_TXN_VERSION, transactional_id=users.bob_tx, committed=False, **txn
    )
    assert ended is ErrorCode.transactional_id_authorization_failed

    _produce(bob, users.topic, b"bob-2")
    bob.commit_transaction(PATIENCE_S)
    # EndTxn is answered once the decision is replicated and the marker follows, as in Kafka
    wait_for(lambda: any(h.is_control for h in _headers(cluster, users.topic)), "bob's commit marker")
    assert _committed(cluster, users.topic) == ["bob-1", "bob-2"]
    records = [h for h in _headers(cluster, users.topic) if not h.is_control]
    assert [h.producer_id for h in records] == [producer_id] * 2  # bob's two batches, and nobody else's


def test_another_principal_cannot_write_with_bobs_idempotent_producer_id(cluster: LocalCluster) -> None:
    users = Users(cluster)
    bob = Producer({**sasl(cluster, users.bob, users.password), "enable.idempotence": True, "linger.ms": 0})
    _produce(bob, users.topic, b"bob-1")
    [header] = _headers(cluster, users.topic)
    producer_id, epoch = header.producer_id, header.producer_epoch
    assert producer_id is not None and epoch is not None and not header.is_transactional
    following = (header.sequence or 0) + header.record_count

    plain = _batch(b"mallory-kafka", producer_id, epoch, following, transactional=False)
    assert _kafka_produce(cluster, users, plain, None) is ErrorCode.cluster_authorization_failed
    _refused_over_http(cluster, users, producer_id, epoch, following)
    _produce(bob, users.topic, b"bob-2")  # his next sequence is his still
    assert _committed(cluster, users.topic) == ["bob-1", "bob-2"]


def test_an_id_bob_picks_over_http_is_written_as_his_and_refused_to_another(cluster: LocalCluster) -> None:
    """The HTTP door has no InitProducerId: bob picks his id. The leader writes his batches with the given id
    of his number and his id's low bits, so the id mallory reads from his batch headers is bob's alone
    (refused through both doors, never answered his offsets), and the id he picked, used by her, is a
    producer of her own: his next sequence is still his."""
    users = Users(cluster)
    picked = 424_242_424  # below 2^42: the stored id keeps it whole

    def json_produce(user: str, value: str, sequence: int) -> tuple[int, dict[str, Any]]:
        record = {"value": base64.b64encode(value.encode()).decode()}
        body = json.dumps({"records": [record], "producer_id": picked, "sequence": sequence})
        url = f"{cluster.servers[0]}/topics/{users.topic}/partitions/0"
        status, answer = curl(
            cluster, "-u", f"{user}:{users.password}", "-H", f"Content-Type: {BINARY_V2}", "--data", body, url
        )
        return status, json.loads(answer)

    status, answer = json_produce(users.bob, "bob-1", 0)
    assert status == 200, answer
    [header] = _headers(cluster, users.topic)
    stored = header.producer_id
    assert stored is not None and stored >= 2**62 and stored % 2**42 == picked, stored
    assert json_produce(users.bob, "bob-1", 0) == (status, answer)  # a retry: a duplicate, as before

    _refused_over_http(cluster, users, stored, header.producer_epoch or 0, 1)
    plain = _batch(b"mallory-kafka", stored, header.producer_epoch or 0, 1, transactional=False)
    assert _kafka_produce(cluster, users, plain, None) is ErrorCode.cluster_authorization_failed
    status, hers = json_produce(users.mallory, "mallory-1", 0)  # bob's picked id, his used sequence
    assert status == 200 and hers != answer, hers  # written as hers, not answered bob's offset
    status, answer = json_produce(users.bob, "bob-2", 1)
    assert status == 200, answer
    assert _committed(cluster, users.topic) == ["bob-1", "mallory-1", "bob-2"]
    ids = [h.producer_id for h in _headers(cluster, users.topic)]
    assert ids[0] == ids[2] == stored and ids[1] != stored and ids[1] % 2**42 == picked
