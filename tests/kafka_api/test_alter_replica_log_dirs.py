"""AlterReplicaLogDirs on the handler alone, over a node's log directory as DescribeLogDirs names it: a
node has one, so every answer is one a Kafka broker with one log directory gives
(``tests/kafka_reference/test_replica_log_dirs.py`` asks both systems the same, with Kafka's own tool
and by hand)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.alter_replica_log_dirs.v2.request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from kio.static.primitive import i32

from kafka_api.node_state_apis import alter_replica_log_dirs
from partitions.errors import ClusterAuthorizationFailed, UnknownTopic
from partitions.replicas.log_dirs import DirMove, LogDir, ReplicaDir, log_dir, move_within

PATH = "/data/n1/logs"
HELD = log_dir(PATH, (100, 50), [ReplicaDir("orders", 0, 10, 0), ReplicaDir("orders", 2, 10, 0)])
TOPICS = {"orders": 3}  # partition 1 is held by other nodes only


class Metadata:
    def log_dir(self) -> LogDir:
        return HELD

    def topic(self, name: str) -> Any:
        if name not in TOPICS:
            raise UnknownTopic(name)
        return SimpleNamespace(name=name, partitions=TOPICS[name])


def _door(allowed: bool = True) -> Any:
    return SimpleNamespace(
        allows=lambda operation, resource: allowed,
        refusal=lambda operation, resource: ClusterAuthorizationFailed.of(
            "User:bob", "alter", "cluster", "kafka-cluster"
        ),
        node=SimpleNamespace(metadata=Metadata()),
    )


async def _alter(dirs: dict[str, dict[str, list[int]]], allowed: bool = True) -> dict[tuple[str, int], int]:
    body = AlterReplicaLogDirsRequest(
        dirs=tuple(
            AlterReplicaLogDir(
                path=path,
                topics=tuple(
                    AlterReplicaLogDirTopic(name=t, partitions=tuple(i32(p) for p in ps))
                    for t, ps in topics.items()
                ),
            )
            for path, topics in dirs.items()
        )
    )
    request = SimpleNamespace(api_key=34, api_version=2, body=body)
    answer = await alter_replica_log_dirs(_door(allowed), request)
    return {
        (t.topic_name, p.partition_index): p.error_code.value for t in answer.results for p in t.partitions
    }


async def test_a_replica_asked_into_its_own_directory_is_there_and_others_are_refused_each_alone() -> None:
    answered = await _alter({PATH: {"orders": [0, 1, 2, 7], "gone": [0]}, "/data/n1/other": {"orders": [2]}})
    # orders-2 is named twice: the last path named wins, as Kafka's request reads it
    assert answered == {
        ("orders", 0): 0,  # NONE: in that directory already
        ("orders", 1): 9,  # REPLICA_NOT_AVAILABLE: no replica on this node
        ("orders", 2): 57,  # LOG_DIR_NOT_FOUND: not this node's directory
        ("orders", 7): 3,  # UNKNOWN_TOPIC_OR_PARTITION: no such partition
        ("gone", 0): 3,
    }


async def test_without_alter_on_the_cluster_every_partition_is_refused() -> None:
    answered = await _alter({PATH: {"orders": [0, 1]}}, allowed=False)
    assert answered == {("orders", 0): 31, ("orders", 1): 31}  # CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.parametrize(
    ("topic", "partition", "path", "exists", "expected"),
    [
        ("orders", 0, PATH, True, DirMove.IN_PLACE),
        ("orders", 0, PATH + "/", True, DirMove.NO_SUCH_DIR),  # compared as given, as Kafka compares it
        ("orders", 1, "/elsewhere", True, DirMove.NO_SUCH_DIR),  # the directory is checked first
        ("orders", 1, PATH, True, DirMove.NOT_HERE),
        ("orders", 9, PATH, False, DirMove.NO_SUCH_PARTITION),
    ],
)
def test_what_a_move_within_the_node_comes_to(
    topic: str, partition: int, path: str, exists: bool, expected: DirMove
) -> None:
    assert move_within(HELD, topic, partition, path, exists) is expected
