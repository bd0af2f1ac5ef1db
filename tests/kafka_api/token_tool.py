"""Kafka's delegation token tool (``kafka-delegation-tokens``, the class ``DelegationTokenCommand`` of the
reference's jars) against a ``raftlog dev --secure`` cluster, as the token tests and the Spark tests
run it: a client config for SASL_SSL with SCRAM-SHA-512 (the password in a file, never in argv), the tool,
and a token made for a user."""

from __future__ import annotations

import pathlib
import re
import subprocess
import uuid

from kafka_jvm import run_tool

from raftlog_client.local_cluster import LocalCluster

JAVA_TIMEOUT_S = 120


def java_config(
    tmp_path: pathlib.Path, cluster: LocalCluster, user: str, password: str, token: bool = False
) -> str:
    """A client config file (the password in a file, never in argv) for SASL_SSL with SCRAM-SHA-512;
    ``token``: ``user`` and ``password`` are a delegation token's id and HMAC (``tokenauth``)."""
    extension = ' tokenauth="true"' if token else ""
    path = tmp_path / f"{uuid.uuid4().hex}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}"{extension};\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={cluster.security['ca']}\n"
    )
    path.chmod(0o600)
    return str(path)


def kafka_tool(main: str, cluster: LocalCluster, config: str, *argv: str) -> subprocess.CompletedProcess[str]:
    # a short-lived client: C1 only, the serial collector (2.1 -> 1.35 CPU s a run of the token tool) and
    # the run's class archive (kafka_jvm.py)
    argv = ("--bootstrap-server", cluster.bootstrap_servers, "--command-config", config, *argv)
    return run_tool(main, argv, JAVA_TIMEOUT_S)


def delegation_tokens(cluster: LocalCluster, config: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return kafka_tool("org.apache.kafka.tools.DelegationTokenCommand", cluster, config, *argv)


def create_token(tmp_path: pathlib.Path, cluster: LocalCluster, user: str, password: str) -> tuple[str, str]:
    """A token ``user`` makes for itself with the tool (no expiry asked: the cluster's default lifetime):
    its id and its HMAC, as the tool prints them."""
    made = delegation_tokens(cluster, java_config(tmp_path, cluster, user, password), "--create",
                             "--max-life-time-period", "-1")  # fmt: skip
    assert made.returncode == 0, made.stderr
    row = re.search(rf"^(\S{{22}})\s+(\S+)\s+User:{re.escape(user)}\s", made.stdout, re.M)
    assert row is not None, made.stdout
    return row.group(1), row.group(2)
