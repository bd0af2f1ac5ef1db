"""Spark's own Kafka source and sink (``spark-sql-kafka-0-10``, ``format("kafka")``) against raftlog's
Kafka listeners, beside this package's ``format("raftlog")``: the jars the project's set-up resolved
from Maven Central (``scripts/spark_kafka/install.sh``, run by ``make test``'s bootstrap), for a
session's ``spark.jars``, and the ``kafka.*`` options that reach a cluster, over SASL_SSL when it asks.

    spark = SparkSession.builder.config("spark.jars", ",".join(spark_kafka.jars())).getOrCreate()
    spark.read.format("kafka").options(**spark_kafka.options(bootstrap)).option("subscribe", "t").load()

The jars live in a checkout (``.peers/``, beside ``scripts/``); nothing is fetched at run time."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POM = os.path.join(ROOT, "scripts", "spark_kafka", "pom.xml")
INSTALL = "scripts/spark_kafka/install.sh"
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class JarsMissing(FileNotFoundError):
    """The set-up has not put Spark's Kafka connector in place (``make bootstrap`` does)."""


def version(root: str = ROOT) -> str:
    """The connector's version: ``spark.version`` of ``scripts/spark_kafka/pom.xml``."""
    with open(os.path.join(root, "scripts", "spark_kafka", "pom.xml"), encoding="utf-8") as f:
        found = re.search(r"<spark\.version>([^<]+)</spark\.version>", f.read())
    if found is None:
        raise ValueError(f"{POM}: no <spark.version>")
    return found.group(1)


def jars(root: str = ROOT) -> list[str]:
    """Absolute paths of the connector's jars and the dependencies pyspark does not ship, sorted."""
    directory = os.path.join(root, ".peers", f"spark-sql-kafka-{version(root)}", "jars")
    if not os.path.exists(os.path.join(directory, ".complete")):
        raise JarsMissing(f"{directory} is not complete: run {INSTALL} (make bootstrap runs it)")
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".jar"))


def options(
    bootstrap_servers: str,
    *,
    ca: str | None = None,
    user: str | None = None,
    password: str | None = None,
    mechanism: str = "SCRAM-SHA-512",
    token: bool = False,
) -> dict[str, str]:
    """The ``kafka.*`` options of Spark's Kafka source and sink for a raftlog cluster: its Kafka listeners
    (``LocalCluster.bootstrap_servers``, or ``raftlog dev``'s 9092-9094), TLS trusting the PEM ``ca``
    (Java 17 reads PEM truststores), and SASL as ``user`` with ``mechanism`` (PLAIN, SCRAM-SHA-256 or
    SCRAM-SHA-512). ``token``: ``user`` and ``password`` are a Kafka delegation token's id and HMAC
    (``kafka-delegation-tokens --create``), sent with SCRAM's ``tokenauth`` extension: the connection acts
    as the token's owner while the token lives."""
    out = {"kafka.bootstrap.servers": bootstrap_servers}
    if (user is None) != (password is None):
        raise ValueError("user and password come together")
    if token and (user is None or not mechanism.startswith("SCRAM-")):
        raise ValueError("a delegation token logs in with SCRAM-SHA-256 or SCRAM-SHA-512, its id and HMAC")
    if user is not None and password is not None:
        if mechanism not in LOGIN_MODULES:
            raise ValueError(f"mechanism {mechanism!r}: one of {', '.join(LOGIN_MODULES)}")
        quoted = password.replace("\\", "\\\\").replace('"', '\\"')
        extension = ' tokenauth="true"' if token else ""
        out["kafka.sasl.mechanism"] = mechanism
        out["kafka.sasl.jaas.config"] = (
            f'{LOGIN_MODULES[mechanism]} required username="{user}" password="{quoted}"{extension};'
        )
    if ca is not None:
        out["kafka.ssl.truststore.type"] = "PEM"
        out["kafka.ssl.truststore.location"] = ca
    protocol = {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT"}
    out["kafka.security.protocol"] = protocol.get((ca is not None, user is not None), "SASL_SSL")
    return out
