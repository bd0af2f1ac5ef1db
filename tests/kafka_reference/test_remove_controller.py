"""Kafka 4.4's ``kafka-metadata-quorum remove-controller`` and ``add-controller`` against a real 3-node
raftlog cluster: the controller leader, named by the id and directory id ``describe --replication``
shows, leaves the controller group (it hands its leadership over first), and the group goes on serving
metadata with the two voters left; then ``add-controller``, given the files the node wrote for it
(``DATA_DIR/kafka/controller.properties``), makes it a voter again. Removals are refused first as Kafka
4.4's ``KafkaRaftClient`` refuses (read from kafka-raft-4.4.0's classes: Kafka's reference cluster of
this folder has a static quorum, ``kraft.version`` 0, which answers every removal UNSUPPORTED_VERSION, so
it cannot be the judge here): a directory id that is not the voter's and an id that is no voter's
``VOTER_NOT_FOUND``, the zero directory id ``INVALID_REQUEST``, another cluster's id
``INCONSISTENT_CLUSTER_ID``; nothing is removed by them. Additions too, as Kafka 4.4's
``AddVoterHandler``: a voter's own file ``DUPLICATE_VOTER``, the zero directory id ``INVALID_REQUEST``, a
directory id no node has ``REQUEST_TIMED_OUT``."""

from __future__ import annotations

import base64
import datetime
import os
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_fixtures import RawKafka
from kafka_tools import KafkaTools, Outcome
from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest
from kio.schema.add_raft_voter.v1.request import Listener as VoterListener
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.static.primitive import i32, u16

from raftlog_client.local_cluster import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PATIENCE_S = 60.0
ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("raftlog"))


@pytest.fixture(scope="module")
def cluster(data_dir: str) -> Iterator[LocalCluster]:
    with LocalCluster(data_dir, nodes=3) as started:
        yield started


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTools]:
    started = KafkaTools(tmp_path_factory.mktemp("tools"))
    try:
        yield started
    finally:
        started.close()


def _quorum(tools: KafkaTools, bootstrap: str, part: str) -> Outcome:
    return tools.run("kafka-metadata-quorum", "--bootstrap-server", bootstrap, "describe", part)


def _replication(tools: KafkaTools, bootstrap: str) -> dict[int, dict[str, str]]:
    """``describe --replication``'s rows by node id."""
    outcome = _quorum(tools, bootstrap, "--replication")
    assert outcome.status == 0, outcome.output
    header, *rows = (line.split() for line in outcome.lines())
    return {int(row[0]): dict(zip(header, row, strict=True)) for row in rows}


def _voters(tools: KafkaTools, bootstrap: str) -> tuple[int, list[int]]:
    """``describe --status``: the leader's id and the voters' ids."""
    outcome = _quorum(tools, bootstrap, "--status")
    assert outcome.status == 0, outcome.output
    fields = dict(re.split(r":\s+", line, maxsplit=1) for line in outcome.lines() if ":" in line)
    voters = re.findall(r'"id":\s*(\d+)', fields["CurrentVoters"])
    return int(fields["LeaderId"]), sorted(int(v) for v in voters)


def _remove(tools: KafkaTools, bootstrap: str, voter: int, directory: str) -> Outcome:
    return tools.run(
        "kafka-metadata-quorum", "--bootstrap-server", bootstrap, "remove-controller",
        "--controller-id", str(voter), "--controller-directory-id", directory,
    )  # fmt: skip


def _raw_remove(address: str, cluster_id: str | None, voter: int, directory: uuid.UUID) -> Any:
    connection = RawKafka(address)
    try:
        body = RemoveRaftVoterRequest(
            cluster_id=cluster_id, voter_id=i32(voter), voter_directory_id=directory
        )
        return connection.call(REMOVE_RAFT_VOTER, 0, body)
    finally:
        connection.close()


def _add(tools: KafkaTools, bootstrap: str, data_dir: str, node: int) -> Outcome:
    config = os.path.join(data_dir, f"n{node}", "kafka", "controller.properties")
    return tools.run(
        "kafka-metadata-quorum", "--bootstrap-server", bootstrap, "--command-config", config, "add-controller"
    )


def _raw_add(address: str, voter: int, directory: uuid.UUID) -> Any:
    connection = RawKafka(address)
    try:
        listener = VoterListener(name="PLAINTEXT", host="127.0.0.1", port=u16(9092))
        body = AddRaftVoterRequest(
            cluster_id=None, timeout=datetime.timedelta(seconds=5), voter_id=i32(voter),
            voter_directory_id=directory, listeners=(listener,),
        )  # fmt: skip
        return connection.call(ADD_RAFT_VOTER, 1, body)
    finally:
        connection.close()


def _kafka_uuid(text: str) -> uuid.UUID:
    """A UUID as Kafka's tools print it (``Uuid.toString``: URL-safe base64, no padding)."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def test_kafka_s_tool_removes_the_controller_leader_the_group_goes_on_and_the_tool_adds_it_back(
    cluster: LocalCluster, tools: KafkaTools, data_dir: str
) -> None:
    bootstrap = cluster.bootstrap_servers
    leader, voters = _voters(tools, bootstrap)
    assert voters == [1, 2, 3]
    rows = _replication(tools, bootstrap)
    directories = {node: row["DirectoryId"] for node, row in rows.items()}
    assert len(set(directories.values())) == 3 and "AAAAAAAAAAAAAAAAAAAAAA" not in directories.values()
    other = next(node for node in voters if node != leader)

    # refusals: nothing removed
    wrong = _remove(tools, bootstrap, leader, directories[other])
    assert wrong.status != 0 and "VoterNotFoundException" in wrong.output, wrong.output
    unknown = _remove(tools, bootstrap, 9, directories[leader])
    assert unknown.status != 0 and "VoterNotFoundException" in unknown.output, unknown.output
    address = cluster.kafka["n1"]
    zero = _raw_remove(address, None, leader, uuid.UUID(int=0))
    assert zero.error_code == ErrorCode.invalid_request, zero
    foreign = _raw_remove(address, "another-cluster", leader, _kafka_uuid(directories[leader]))
    assert foreign.error_code == ErrorCode.inconsistent_cluster_id, foreign
    assert foreign.error_message is not None and '"another-cluster"' in foreign.error_message
    assert _voters(tools, bootstrap) == (leader, [1, 2, 3])

    removed = _remove(tools, bootstrap, leader, directories[leader])
    assert removed.status == 0, removed.output
    assert removed.lines()[-1] == f"Removed KRaft controller {leader} with directory id {directories[leader]}"
    deadline = time.monotonic() + PATIENCE_S
    while True:  # the removed voter's node may be the one asked: it follows the metadata from then on
        new_leader, left = _voters(tools, bootstrap)
        if left == sorted(set(voters) - {leader}) and new_leader in left:
            break
        assert time.monotonic() < deadline, (new_leader, left)
        time.sleep(0.5)

    # the two voters left commit metadata: a topic is created and described through Kafka's tools
    created = tools.run(
        "kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "after-removal",
        "--partitions", "1", "--replication-factor", "3",
    )  # fmt: skip
    assert created.status == 0 and "Created topic after-removal." in created.lines(), created.output
    rows = _replication(tools, bootstrap)
    assert sorted(node for node, row in rows.items() if row["Status"] in ("Leader", "Follower")) == left
    assert all(int(rows[node]["LastFetchTimestamp"]) > 0 for node in left)

    # add-controller, with the files the removed node wrote: refused for a voter, then the node a voter again
    duplicate = _add(tools, bootstrap, data_dir, left[0])
    assert duplicate.status != 0 and "DuplicateVoterException" in duplicate.output, duplicate.output
    zero = _raw_add(address, leader, uuid.UUID(int=0))
    assert zero.error_code == ErrorCode.invalid_request, zero
    nobody = _raw_add(address, leader, _kafka_uuid(directories[other]))
    assert nobody.error_code == ErrorCode.request_timed_out and "no node" in (nobody.error_message or ""), (
        nobody
    )
    assert _voters(tools, bootstrap)[1] == left
    added = _add(tools, bootstrap, data_dir, leader)
    assert added.status == 0, added.output
    assert added.lines()[-1].startswith(
        f"Added controller {leader} with directory id {directories[leader]} and endpoints: PLAINTEXT://"
    ), added.output
    assert _voters(tools, bootstrap)[1] == [1, 2, 3]  # answered once it is a voter, as Kafka answers
