"""The format against a secured cluster: ``raftlog dev --secure`` (TLS with a CA of its own,
``--require-auth``, ``--enforce-acls``), written by Spark as a user with a password and read back as
that user's API token, both over https trusting the cluster's CA; and refused, with the words that say
why, without the CA, with a wrong password, with a revoked token and with no user at all. Spark's own
Kafka source and sink over SASL_SSL against the same cluster's Kafka listeners, with a password and with a
Kafka delegation token."""

from __future__ import annotations

import asyncio
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from raftlog_client.blocking import BlockingClient
from raftlog_client.client import RaftlogClient
from raftlog_client.local_cluster import LocalCluster
from raftlog_spark import spark_kafka
from tests.kafka_api.token_tool import create_token, delegation_tokens, java_config

pytestmark = pytest.mark.spark

QUICK_MS = "3000"  # requestTimeoutMs of the calls that must fail: no use waiting the default 30 s


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One node: what these tests meet is the doors' TLS and authentication, which every node has alike
    (secured 3-node clusters are tested with Kafka clients in tests/kafka_api/test_sasl_clients.py); a
    node is a Python process whose start and heartbeats cost the Spark tests beside it seconds of CPU."""
    with LocalCluster(
        str(tmp_path_factory.mktemp("secure-spark")), nodes=1, dev_args=["--secure"]
    ) as running:
        yield running


def admin(cluster: LocalCluster) -> RaftlogClient:
    return RaftlogClient(
        cluster.servers, admin_token=cluster.security["admin_token"], ca=cluster.security["ca"]
    )


def new_topic(cluster: LocalCluster) -> str:
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    with BlockingClient(
        cluster.servers, 30_000, ca=cluster.security["ca"], admin_token=cluster.security["admin_token"]
    ) as client:
        client.create_topic(topic, 2, 1)
    return topic


async def _token(cluster: LocalCluster, user: str) -> tuple[str, str]:
    async with admin(cluster) as client:
        made = await client.cluster.create_token(user, description="spark test")
    return str(made["token"]), str(made["id"])


async def _revoke(cluster: LocalCluster, user: str, token_id: str) -> None:
    async with admin(cluster) as client:
        await client.cluster.delete_token(user, token_id)


def access(cluster: LocalCluster, **more: str) -> dict[str, str]:
    return {"servers": ",".join(cluster.servers), "ca": cluster.security["ca"], **more}


def read_values(spark: Any, topic: str, options: dict[str, str]) -> list[int]:
    df = spark.read.format("raftlog").options(**options).option("subscribe", topic).load()
    return sorted(int(r.v) for r in df.selectExpr("CAST(value AS STRING) v").collect())


def test_spark_writes_as_a_user_and_reads_with_its_token_over_tls(spark: Any, secure: LocalCluster) -> None:
    assert all(url.startswith("https://") for url in secure.servers)
    topic = new_topic(secure)
    user, password = secure.security["user"], secure.security["password"]
    rows = spark.range(0, 300, 1, 3).selectExpr("CAST(id AS STRING) value")
    as_user = access(secure, user=user, password=password)
    rows.write.format("raftlog").options(**as_user).option("topic", topic).mode("append").save()

    token, token_id = asyncio.run(_token(secure, user))
    assert read_values(spark, topic, access(secure, userToken=token)) == list(range(300))
    assert read_values(spark, topic, as_user) == list(range(300))

    asyncio.run(_revoke(secure, user, token_id))
    revoked = access(secure, userToken=token, requestTimeoutMs=QUICK_MS)
    with pytest.raises(Exception, match=r"HTTP 401 \(error_code 40101\)"):
        read_values(spark, topic, revoked)


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("no CA", "CERTIFICATE_VERIFY_FAILED"),
        ("a wrong password", r"HTTP 401 \(error_code 40101\)"),
        ("no user", r"HTTP 401 \(error_code 40101\)"),
    ],
)
def test_spark_is_refused_without_what_the_cluster_asks(
    spark: Any, secure: LocalCluster, how: str, words: str
) -> None:
    topic = new_topic(secure)
    options = access(secure, user=secure.security["user"], password=secure.security["password"])
    options["requestTimeoutMs"] = QUICK_MS
    if how == "no CA":
        del options["ca"]
    elif how == "a wrong password":
        options["password"] += "-not"
    else:
        del options["user"], options["password"]
    with pytest.raises(Exception, match=words):
        read_values(spark, topic, options)
    with pytest.raises(Exception, match=words):
        spark.range(3).selectExpr("CAST(id AS STRING) value").write.format("raftlog").options(
            **options
        ).option("topic", topic).mode("append").save()
    with BlockingClient(
        secure.servers,
        30_000,
        ca=secure.security["ca"],
        user=(secure.security["user"], secure.security["password"]),
    ) as client:
        assert client.offsets(topic, 0) == (0, 0) and client.offsets(topic, 1) == (0, 0), (
            "a refused write wrote"
        )


def test_spark_kafka_format_over_sasl_ssl(spark: Any, secure: LocalCluster) -> None:
    """Spark's own Kafka source and sink against the Kafka listeners over SASL_SSL (the cluster's CA as a
    PEM truststore): written as the user with SCRAM-SHA-512, read back with SCRAM-SHA-256 and PLAIN, and
    refused with a wrong password."""
    topic = new_topic(secure)
    user, password, ca = secure.security["user"], secure.security["password"], secure.security["ca"]

    def kafka(mechanism: str, secret: str = password) -> dict[str, str]:
        return spark_kafka.options(secure.bootstrap_servers, ca=ca, user=user, password=secret,
                                   mechanism=mechanism)  # fmt: skip

    assert kafka("PLAIN")["kafka.security.protocol"] == "SASL_SSL"
    rows = spark.range(0, 300, 1, 3).selectExpr("CAST(id AS STRING) value", "CAST(id % 2 AS INT) partition")
    rows.write.format("kafka").options(**kafka("SCRAM-SHA-512")).option("topic", topic).save()
    for mechanism in ("SCRAM-SHA-256", "PLAIN"):
        df = spark.read.format("kafka").options(**kafka(mechanism)).option("subscribe", topic).load()
        got = df.selectExpr("partition", "offset", "CAST(CAST(value AS STRING) AS INT) v").collect()
        assert sorted(r.v for r in got) == list(range(300)), mechanism
        assert all(r.v % 2 == r.partition for r in got) and max(r.offset for r in got) == 149, mechanism

    refused = kafka("SCRAM-SHA-512", password + "-not")
    refused["kafka.request.timeout.ms"] = refused["kafka.default.api.timeout.ms"] = QUICK_MS
    with pytest.raises(Exception, match=r"SaslAuthenticationException|Authentication failed"):
        spark.read.format("kafka").options(**refused).option("subscribe", topic).load().count()


def test_spark_kafka_format_reads_with_a_delegation_token(
    spark: Any, secure: LocalCluster, tmp_path: pathlib.Path
) -> None:
    """Spark's own Kafka source with a Kafka delegation token, as a job is handed one instead of its
    user's password: the user makes it with Kafka's tool (``kafka-delegation-tokens --create``), Spark logs
    in with its id and HMAC (SCRAM with ``tokenauth``) and reads as the token's owner; once the owner has
    expired it with the tool, the same read is refused."""
    topic = new_topic(secure)
    user, password, ca = secure.security["user"], secure.security["password"], secure.security["ca"]
    as_user = spark_kafka.options(secure.bootstrap_servers, ca=ca, user=user, password=password)
    rows = spark.range(0, 100, 1, 2).selectExpr("CAST(id AS STRING) value", "CAST(id % 2 AS INT) partition")
    rows.write.format("kafka").options(**as_user).option("topic", topic).save()
    token_id, hmac = create_token(tmp_path, secure, user, password)
    by_token = spark_kafka.options(secure.bootstrap_servers, ca=ca, user=token_id, password=hmac, token=True)
    assert 'tokenauth="true"' in by_token["kafka.sasl.jaas.config"]

    def read(options: dict[str, str]) -> list[int]:
        df = spark.read.format("kafka").options(**options).option("subscribe", topic).load()
        return sorted(r.v for r in df.selectExpr("CAST(CAST(value AS STRING) AS INT) v").collect())

    assert read(by_token) == list(range(100))
    owner = java_config(tmp_path, secure, user, password)
    expired = delegation_tokens(secure, owner, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert expired.returncode == 0 and "Completed expire operation" in expired.stdout, expired.stderr
    refused = {**by_token, "kafka.request.timeout.ms": QUICK_MS, "kafka.default.api.timeout.ms": QUICK_MS}
    with pytest.raises(Exception, match=r"SaslAuthenticationException|Authentication failed"):
        read(refused)
    assert read(as_user) == list(range(100)), "the owner's own login is untouched"
