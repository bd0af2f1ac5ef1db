"""Hanging transactions: none can be opened through either door, and one left by an earlier release is found
and aborted with Kafka's own ``kafka-transactions.sh``.

On a real 3-node ``raftlog dev --secure`` cluster, a user with WRITE on a topic sends over HTTP the
transactional batch of a producer no coordinator knows (the attack that froze read_committed readers): every
node refuses it as Kafka refuses a transactional batch without a transactional id (403/40301,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), nothing is written, and read_committed readers go on. On a node whose
partition holds such a transaction (proposed to its Raft group as the earlier release's data plane accepted
it), ``raftlog transactions open`` lists it, Kafka's ``find-hanging`` finds it (DescribeProducers,
ListTransactions, DescribeTransactions) and ``abort`` ends it (WriteTxnMarkers): the last stable offset
moves on and the records after it become readable at read_committed."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import crc32c
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "partitions"))  # in_process

from in_process import Served, configs, produce, until
from kafka_jvm import tool_jvm
from test_sasl_clients import as_admin, curl, grant, make_user

from kafka_api.door import Door
from kafka_api.server import KafkaServer
from partitions import commands
from partitions.metadata.service import AdminService
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog_client.local_cluster import LocalCluster
from raftlog_contract import JSON_V2, RECORD_BATCH
from raftlog_dev.layout import free_port

UNKNOWN_PRODUCER = 424_242  # a producer id no coordinator ever gave
TOOL_TIMEOUT_S = 120
JSON = "application/vnd.raftlog.v2+json"


def transactional_batch(producer_id: int, values: list[bytes]) -> bytes:
    """A Kafka producer's batch of ``values`` with the transactional bit set (attributes bit 4), epoch 0,
    sequence 0: what a transactional producer sends once its coordinator added the partition."""
    batch = bytearray(encode_batch(0, [ProducerRecord(v) for v in values], 0, 1_000, producer_id, 0))
    batch[22] |= 0x10  # the low byte of the attributes
    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


# -- the HTTP door, on real processes ------------------------------------------------------------------


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp("hanging")), nodes=3, dev_args=["--secure"]) as running:
        yield running


def test_a_transactional_batch_over_http_is_refused_on_every_node_and_readers_go_on(
    secure: LocalCluster,
) -> None:
    user, password = f"m{uuid.uuid4().hex[:8]}", "mallory's password"
    make_user(secure, user, password)
    topic = f"frozen-{uuid.uuid4().hex[:8]}"
    status, body = as_admin(secure, "POST", "/v1/topics", {"name": topic, "partitions": 1})
    assert status == 201, body
    grant(secure, *({"resource_type": "topic", "name": topic, "principal": f"User:{user}", "operation": op}
                     for op in ("write", "read")))  # fmt: skip
    path = pathlib.Path(secure.directory) / "transactional.batch"
    path.write_bytes(transactional_batch(UNKNOWN_PRODUCER, [b"poison"]))
    for url in secure.servers:  # the leader's door, and the others', which send it on to the leader
        status, body = curl(
            secure, "-u", f"{user}:{password}", "-H", f"Content-Type: {RECORD_BATCH}",
            "--data-binary", f"@{path}", f"{url}/topics/{topic}/partitions/0",
        )  # fmt: skip
        assert status == 403, (url, body)  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as a Kafka broker answers
        answer = json.loads(body)
        assert answer["error_code"] == 40301 and "transactional_id" in answer["message"], answer
    url = secure.servers[0]
    status, body = curl(secure, "-u", f"{user}:{password}", f"{url}/topics/{topic}/partitions/0/offsets")
    assert status == 200 and json.loads(body)["end_offset"] == 0, body  # nothing was written
    login = ("-u", f"{user}:{password}")
    plain = ("-H", f"Content-Type: {JSON_V2}", "--data", '{"records": [{"value": "after"}]}')
    status, body = curl(secure, *login, *plain, f"{url}/topics/{topic}/partitions/0")
    assert status == 200, body
    read = f"{url}/topics/{topic}/partitions/0/records?offset=0&isolation=read_committed&timeout=5000"
    status, body = curl(secure, *login, "-H", f"Accept: {JSON_V2}", read)
    assert status == 200 and [r["value"] for r in json.loads(body)] == ["after"], body


# -- a hanging transaction, found and aborted with Kafka's tool ----------------------------------------


@dataclasses.dataclass
class KafkaNode:
    served: Served
    bootstrap: str
    http: str


@pytest.fixture
async def kafka_node(tmp_path: pathlib.Path) -> AsyncIterator[KafkaNode]:
    """One node in this process with its HTTP API and its Kafka door (no authentication)."""
    kafka_port = free_port()
    [config] = configs(tmp_path, 1)
    config = dataclasses.replace(config, kafka_address=f"127.0.0.1:{kafka_port}")
    served = Served(config)
    await served.start()
    node = served.node
    server = KafkaServer(Door(node, "hanging-test-cluster00", node.groups))
    await server.start("127.0.0.1", kafka_port)
    try:
        yield KafkaNode(served, f"127.0.0.1:{kafka_port}", config.peers[0].http)
    finally:
        await server.close()
        await served.stop()


async def transactions_tool(bootstrap: str, *argv: str) -> str:
    """``kafka-transactions.sh`` (Kafka 4.1's TransactionsCommand) against ``bootstrap``: its output (a run
    of seconds: the JIT's first tier and the serial collector, half the CPU of the defaults, and the run's
    class archive: kafka_jvm.py)."""
    jvm = tool_jvm("org.apache.kafka.tools.TransactionsCommand", ["--bootstrap-server", bootstrap, *argv])
    process = await asyncio.create_subprocess_exec(
        *jvm.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), TOOL_TIMEOUT_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        jvm.ended(process.returncode)
    assert process.returncode == 0, (argv, out.decode(), err.decode())
    return out.decode()


async def cli(http: str, *argv: str) -> Any:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "raftlog_cli", *argv, "--server", http, "--json",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return json.loads(out)


async def test_a_hanging_transaction_is_found_and_aborted_with_kafkas_tool(kafka_node: KafkaNode) -> None:
    node = kafka_node.served.node
    await until(lambda: node.metadata.controller() == node.node_id, what="controller")
    await node.cluster.admin.call(AdminService.create_topic, "stuck", 1, 1, {})
    replica = await until(lambda: _leading(node, "stuck"), what="the partition's leader")
    # what an earlier release's HTTP door let through: a transactional batch no coordinator knows of
    batch = transactional_batch(UNKNOWN_PRODUCER, [b"poison", b"poison"])
    await replica.group.propose(commands.encode_parts(commands.Produce(batch)), 10_000)
    await produce(node.data, "stuck", 0, [ProducerRecord(b"committed")])
    offsets = await until(lambda: node.data.offsets_now("stuck", 0), what="the partition's offsets")
    assert (offsets.last_stable_offset, offsets.high_watermark) == (0, 3)  # read_committed sees nothing

    [listed] = await cli(kafka_node.http, "transactions", "open", "--topic", "stuck")
    [producer] = listed["producers"]
    assert (listed["topic"], listed["partition"]) == ("stuck", 0)
    assert (producer["producer_id"], producer["first_offset"], producer["producer_epoch"]) == (
        UNKNOWN_PRODUCER,
        0,
        0,
    )
    assert producer["age_ms"] >= 0

    found = await transactions_tool(kafka_node.bootstrap, "find-hanging", "--broker-id", "1",
                                    "--max-transaction-timeout", "0")  # fmt: skip
    rows = [line.split() for line in found.splitlines()[1:] if line.strip()]
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [("stuck", "0", str(UNKNOWN_PRODUCER), "0")], found
    await transactions_tool(
        kafka_node.bootstrap, "abort", "--topic", "stuck", "--partition", "0", "--start-offset", "0"
    )
    offsets = await until(lambda: node.data.offsets_now("stuck", 0), what="the partition's offsets")
    assert offsets.last_stable_offset == offsets.high_watermark == 4  # the ABORT marker took offset 3
    fetched = await node.data.fetch_stable("stuck", 0, 0, 1 << 20, 0)
    assert fetched.aborted == ((UNKNOWN_PRODUCER, 0),)  # a read_committed reader drops the poison only
    assert await cli(kafka_node.http, "transactions", "open", "--topic", "stuck") == []
    found = await transactions_tool(kafka_node.bootstrap, "find-hanging", "--broker-id", "1",
                                    "--max-transaction-timeout", "0")  # fmt: skip
    assert [line for line in found.splitlines()[1:] if line.strip()] == [], found


def _leading(node: Any, topic: str) -> Any:
    try:
        replica = node.data.leader_replica(topic, 0)
    except Exception:
        return None
    return replica if replica.group.status().leader_ready else None
