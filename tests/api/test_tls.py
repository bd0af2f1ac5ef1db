"""TLS on both doors of a real 3-node cluster (``raftlog dev --tls``, client certificates required), tried
with clients of other authors: curl over HTTPS, confluent-kafka and kcat over SSL. Nodes call each other
over HTTPS with their own certificates (a produce through a node that does not lead the partition is
forwarded). Refused: no client certificate, an expired one, one of another CA, a client that does not
trust the cluster's CA (curl, and this package's own clients, which give up at once), plain HTTP."""

from __future__ import annotations

import asyncio
import datetime
import json
import pathlib
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from raftlog_client.blocking import BlockingClient
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import Unavailable
from raftlog_client.local_cluster import LocalCluster
from raftlog_dev.certificates import issue, make_ca


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("tls")
    with LocalCluster(
        str(directory), nodes=3, dev_args=["--tls"], serve_args=["--tls-client-auth=required"]
    ) as running:
        yield running


def curl(
    cluster: LocalCluster, *argv: str, cert: tuple[str, str] | None = None, ca: bool = True
) -> tuple[int, str]:
    """curl's exit status and body; with the cluster's CA and client certificate unless told."""
    command = ["curl", "-sS", "--max-time", "20"]
    if ca:
        command += ["--cacert", cluster.tls["ca"]]
    if cert is None:
        cert = (cluster.tls["client_cert"], cluster.tls["client_key"])
    if cert != ("", ""):
        command += ["--cert", cert[0], "--key", cert[1]]
    done = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout


def post(cluster: LocalCluster, url: str, body: object) -> tuple[int, str]:
    return curl(cluster, "-XPOST", url, "-H", "Content-Type: application/json", "-d", json.dumps(body))


def test_https_carries_the_api_and_the_nodes_calls(cluster: LocalCluster) -> None:
    first, second = cluster.servers[0], cluster.servers[1]
    assert all(url.startswith("https://127.0.0.1:") for url in cluster.servers)
    code, out = post(
        cluster, first + "/v1/topics", {"name": "secure", "partitions": 3, "replication_factor": 3}
    )
    assert code == 0 and json.loads(out)["partitions"] == 3, out
    for partition in range(3):  # two of three are led elsewhere: forwarded over HTTPS between nodes
        code, out = post(
            cluster, f"{first}/topics/secure/partitions/{partition}", {"records": [{"value": partition}]}
        )
        assert code == 0 and json.loads(out)["offsets"][0]["error_code"] is None, out
    for partition in range(3):
        code, out = curl(
            cluster, f"{second}/topics/secure/partitions/{partition}/records?offset=0&timeout=5000"
        )
        assert code == 0 and [r["value"] for r in json.loads(out)] == [partition], out


def test_refused_without_trust_or_a_valid_client_certificate(
    cluster: LocalCluster, tmp_path: pathlib.Path
) -> None:
    url = cluster.servers[0] + "/status/ready"
    assert curl(cluster, url)[0] == 0
    assert curl(cluster, url, ca=False)[0] == 60  # the client does not trust the cluster's CA
    assert curl(cluster, url, cert=("", ""))[0] != 0  # no client certificate: the handshake fails
    tls = pathlib.Path(cluster.tls["ca"]).parent
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    expired = issue(
        str(tls / "ca.pem"), str(tls / "ca.key"), "expired", str(tmp_path / "expired"), server=False,
        not_before=past - datetime.timedelta(days=30), not_after=past,
    )  # fmt: skip
    assert curl(cluster, url, cert=expired)[0] != 0
    other_ca = make_ca(str(tmp_path))
    stranger = issue(*other_ca, "stranger", str(tmp_path / "stranger"), server=False)
    assert curl(cluster, url, cert=stranger)[0] != 0
    plain = url.replace("https://", "http://")
    assert curl(cluster, plain)[0] != 0  # plain HTTP to the TLS port gets no answer


def test_our_clients_give_up_on_a_cluster_whose_certificates_they_do_not_trust_at_once(
    cluster: LocalCluster, tmp_path: pathlib.Path
) -> None:
    """Given another CA, both clients fail naming the certificate after one try of each node, with a
    retry budget of ten minutes left: no wait makes a certificate trusted (retry.py)."""
    other_ca, _ = make_ca(str(tmp_path))
    blocking = BlockingClient(cluster.servers, 600_000, ca=other_ca)
    try:
        with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
            blocking.partition_count("anything")
    finally:
        blocking.close()

    async def asynchronous() -> None:
        client = RaftlogClient(cluster.servers, retries=None, retry_for_s=600.0, ca=other_ca)
        try:
            with pytest.raises(Unavailable, match="certificate verify failed"):
                await client.topics()
        finally:
            await client.close()

    asyncio.run(asynchronous())


def test_kafka_clients_over_ssl(cluster: LocalCluster) -> None:
    ssl = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "ssl",
        "ssl.ca.location": cluster.tls["ca"],
        "ssl.certificate.location": cluster.tls["client_cert"],
        "ssl.key.location": cluster.tls["client_key"],
    }
    topic = f"kafka-{uuid.uuid4().hex[:8]}"
    post(
        cluster, cluster.servers[0] + "/v1/topics", {"name": topic, "partitions": 1, "replication_factor": 3}
    )
    producer = Producer({**ssl, "enable.idempotence": True})
    delivered: list[object] = []
    for i in range(5):
        producer.produce(
            topic, value=b"v%d" % i, on_delivery=lambda err, msg: delivered.append(err or msg.offset())
        )
    assert producer.flush(30) == 0
    assert delivered == [0, 1, 2, 3, 4]
    consumer = Consumer({**ssl, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 5:
                break
    finally:
        consumer.close()
    assert values == [b"v0", b"v1", b"v2", b"v3", b"v4"]

    settings = [
        arg for key, value in ssl.items() if key != "bootstrap.servers" for arg in ("-X", f"{key}={value}")
    ]
    listed = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-L", "-t", topic, *settings],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert listed.returncode == 0 and "3 brokers" in listed.stdout and f'topic "{topic}"' in listed.stdout
    refused = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-L", "-X", "security.protocol=ssl",
         "-X", f"ssl.ca.location={cluster.tls['ca']}", "-m", "5"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0  # no client certificate: no metadata


def test_dev_status_reaches_the_tls_nodes(cluster: LocalCluster) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "raftlog_cli", "dev", "status", "--json", "--data-dir", cluster.directory],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    nodes = json.loads(done.stdout)["nodes"]
    assert [n["ready"] for n in nodes] == [True, True, True]
