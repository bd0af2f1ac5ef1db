"""Kafka's ``kafka-features.sh describe`` (Kafka 4.1's FeatureCommand, which reads ApiVersions v3's
supported and finalized features, KIP-584) against a real cluster: it shows raftlog.version, the levels
this code supports and the level the cluster finalized."""

from __future__ import annotations

import subprocess

from partitions.features import RAFTLOG_VERSION, SUPPORTED
from raftlog_bench.kafka_peer import kafka_libs
from raftlog_client.local_cluster import LocalCluster


def test_kafka_features_describe_shows_the_finalized_level(kafka_cluster: LocalCluster) -> None:
    described = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{kafka_libs()}/*", "org.apache.kafka.tools.FeatureCommand",
         "--bootstrap-server", kafka_cluster.bootstrap_servers, "describe"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert described.returncode == 0, described.stdout + described.stderr
    fields = dict(part.split(": ", 1) for part in described.stdout.strip().split("\t"))
    assert fields["Feature"] == RAFTLOG_VERSION, described.stdout
    assert (fields["SupportedMinVersion"], fields["SupportedMaxVersion"]) == (
        "1",
        str(SUPPORTED[RAFTLOG_VERSION]),
    )
    assert fields["FinalizedVersionLevel"] == str(SUPPORTED[RAFTLOG_VERSION])  # a new cluster: the newest
    assert int(fields["Epoch"]) > 0


def test_kafka_features_upgrade_raises_to_what_every_node_supports_and_refuses_a_downgrade(
    kafka_cluster: LocalCluster,
) -> None:
    def features(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["java", "-Xmx256m", "-cp", f"{kafka_libs()}/*", "org.apache.kafka.tools.FeatureCommand",
             "--bootstrap-server", kafka_cluster.bootstrap_servers, *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    top = SUPPORTED[RAFTLOG_VERSION]
    same = features("upgrade", "--feature", f"{RAFTLOG_VERSION}={top}")
    assert same.returncode == 0, same.stdout + same.stderr
    down = features("downgrade", "--feature", f"{RAFTLOG_VERSION}=1")
    assert down.returncode != 0 and "downgrade is refused" in down.stdout + down.stderr, (
        down.stdout + down.stderr
    )
    beyond = features("upgrade", "--feature", f"{RAFTLOG_VERSION}={top + 1}")
    assert beyond.returncode != 0 and f"supports levels 1..{top}" in beyond.stdout + beyond.stderr
