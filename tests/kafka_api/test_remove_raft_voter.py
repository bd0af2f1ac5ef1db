"""RemoveRaftVoter's answers, each edge as Kafka 4.4 answers it (read from kafka-raft-4.4.0's
``KafkaRaftClient.handleRemoveVoterRequest``, ``RemoveVoterHandler`` and ``VoterSet.removeVoter``), on the
handler alone with the controller's members as the leader gives them: only a request naming a voter by
its id and directory id, with no other change under way, removes anything.
``tests/kafka_reference/test_remove_controller.py`` runs Kafka's tool against a real cluster."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.static.primitive import i32

from kafka_api.controller_files import directory_id, kafka_uuid
from kafka_api.node_state_apis import remove_raft_voter
from partitions.controller.members import ControllerMembers
from partitions.errors import ClusterAuthorizationFailed
from partitions.metadata.service import AdminService

CLUSTER_ID = "cluster-a"


class Admin:
    """The controller leader's AdminService, as far as RemoveRaftVoter asks it."""

    def __init__(self, members: ControllerMembers) -> None:
        self.members = members
        self.removed: list[str] = []

    async def call(self, method: Any, *args: Any) -> Any:
        if method is AdminService.controller_members:
            return self.members
        assert method is AdminService.remove_controller_voter, method
        self.removed.append(args[0])
        return self.members


def _door(admin: Admin, allowed: bool = True) -> Any:
    return SimpleNamespace(
        cluster_id=CLUSTER_ID,
        allows=lambda operation, resource: allowed,
        refusal=lambda operation, resource: ClusterAuthorizationFailed.of(
            "User:bob", "alter", "cluster", "kafka-cluster"
        ),
        node=SimpleNamespace(cluster=SimpleNamespace(admin=admin)),
    )


def _members(voters: tuple[str, ...] = ("n1", "n2", "n3"), **changes: Any) -> ControllerMembers:
    return ControllerMembers("n1", 4, voters, changes.pop("learners", ()), 40, **changes)


async def _remove(
    admin: Admin, voter: int, directory: uuid.UUID, cluster_id: str | None = None, allowed: bool = True
) -> Any:
    body = RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=i32(voter), voter_directory_id=directory)
    request = SimpleNamespace(api_key=81, api_version=0, body=body)
    return await remove_raft_voter(_door(admin, allowed), request)  # type: ignore[arg-type]


def _directory(node: str) -> uuid.UUID:
    return directory_id(CLUSTER_ID, node)


async def test_a_voter_named_by_its_id_and_directory_id_is_removed() -> None:
    admin = Admin(_members())
    answer = await _remove(admin, 3, _directory("n3"), cluster_id=CLUSTER_ID)
    assert (answer.error_code, answer.error_message) == (ErrorCode.none, None)
    assert admin.removed == ["n3"]


async def test_each_refusal_removes_nothing_and_answers_as_kafka() -> None:
    admin = Admin(_members())
    foreign = await _remove(admin, 3, _directory("n3"), cluster_id="cluster-b")
    assert foreign.error_code == ErrorCode.inconsistent_cluster_id
    assert foreign.error_message == 'The given id "cluster-b" doesn\'t match the cluster id "cluster-a"'
    for voter, directory in ((3, uuid.UUID(int=0)), (-1, _directory("n3"))):
        invalid = await _remove(admin, voter, directory)
        assert invalid.error_code == ErrorCode.invalid_request
        assert invalid.error_message == "Remove voter request didn't include a valid voter"
    for voter, directory in ((3, _directory("n2")), (9, _directory("n3")), (4, _directory("n4"))):
        missing = await _remove(admin, voter, directory)
        assert missing.error_code == ErrorCode.voter_not_found, (voter, missing)
        assert missing.error_message.startswith(  # Kafka's ReplicaKey.toString
            f"Cannot remove voter ReplicaKey(id={voter}, directoryId={kafka_uuid(directory)}) from the set "
            "of voters [ReplicaKey(id="
        )
    refused = await _remove(admin, 3, _directory("n3"), allowed=False)
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert admin.removed == []


async def test_the_last_voter_is_not_found_and_a_change_under_way_times_out() -> None:
    last = Admin(_members(("n1",)))
    answer = await _remove(last, 1, _directory("n1"))
    assert answer.error_code == ErrorCode.voter_not_found  # VoterSet.removeVoter keeps one voter
    for busy in (_members(learners=("n4",)), _members(pending="rem n2 not yet applied")):
        admin = Admin(busy)
        answer = await _remove(admin, 3, _directory("n3"))
        assert answer.error_code == ErrorCode.request_timed_out
        assert answer.error_message.startswith(
            "Request timed out waiting for leader to handle previous voter change request"
        )
        assert admin.removed == []
    assert last.removed == []


def test_directory_ids_are_per_node_and_per_cluster_and_never_look_like_an_option() -> None:
    ids = {directory_id(cluster, f"n{i}") for cluster in ("a", "b") for i in range(1, 200)}
    assert len(ids) == 2 * 199 and uuid.UUID(int=0) not in ids
    assert not any(kafka_uuid(value).startswith("-") for value in ids)
    assert directory_id("a", "n1") == directory_id("a", "n1")
