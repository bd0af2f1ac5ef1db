"""AddRaftVoter's answers, each edge as Kafka 4.4 answers it (read from kafka-raft-4.4.0's
``AddVoterHandler``), on the handler alone with the controller's members as the leader gives them: the
node added as ``raftlog controller add`` adds it and answered once a voter; one that does not catch up
within the request's timeout taken out again. ``tests/kafka_reference/test_remove_controller.py`` runs
Kafka's tool against a real cluster, with the files each node writes for it."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from types import SimpleNamespace
from typing import Any

from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest, Listener
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, u16

from kafka_api.controller_files import directory_id
from kafka_api.node_state_apis import add_raft_voter
from partitions.controller.members import ControllerMembers
from partitions.errors import ClusterAuthorizationFailed
from partitions.metadata.service import AdminService

CLUSTER_ID = "cluster-a"


class Admin:
    """The controller leader's AdminService, as far as AddRaftVoter asks it: an added node a learner,
    promoted at the next look when ``catches_up``."""

    def __init__(self, members: ControllerMembers, catches_up: bool = True) -> None:
        self.members = members
        self.catches_up = catches_up
        self.calls: list[tuple[str, str]] = []

    async def call(self, method: Any, *args: Any) -> Any:
        m = self.members
        if method is AdminService.controller_members:
            if m.learners and self.catches_up:
                self.members = dataclasses.replace(m, voters=(*m.voters, *m.learners), learners=())
            return m
        node = args[0]
        if method is AdminService.add_controller_voter:
            self.calls.append(("add", node))
            self.members = dataclasses.replace(m, learners=(node,))
        else:
            assert method is AdminService.remove_controller_voter, method
            self.calls.append(("remove", node))
            self.members = dataclasses.replace(m, learners=())
        return self.members


def _door(admin: Admin, allowed: bool = True) -> Any:
    nodes = [SimpleNamespace(node_id=n, state="alive") for n in ("n1", "n2", "n3", "n4")]
    return SimpleNamespace(
        cluster_id=CLUSTER_ID,
        allows=lambda operation, resource: allowed,
        refusal=lambda operation, resource: ClusterAuthorizationFailed.of(
            "User:bob", "alter", "cluster", "kafka-cluster"
        ),
        node=SimpleNamespace(
            cluster=SimpleNamespace(admin=admin), metadata=SimpleNamespace(nodes=lambda: nodes)
        ),
    )


def _members(**changes: Any) -> ControllerMembers:
    return ControllerMembers("n1", 4, ("n1", "n2", "n3"), changes.pop("learners", ()), 40, **changes)


async def _add(
    admin: Admin, voter: int, directory: uuid.UUID, allowed: bool = True, timeout_s: float = 2
) -> Any:
    listener = Listener(name="PLAINTEXT", host="127.0.0.1", port=u16(9092))
    body = AddRaftVoterRequest(
        cluster_id=None, timeout=datetime.timedelta(seconds=timeout_s), voter_id=i32(voter),
        voter_directory_id=directory, listeners=(listener,),
    )  # fmt: skip
    request = SimpleNamespace(api_key=80, api_version=1, body=body)
    return await add_raft_voter(_door(admin, allowed), request)  # type: ignore[arg-type]


async def test_a_node_is_answered_once_it_is_a_voter() -> None:
    admin = Admin(_members())
    answer = await _add(admin, 4, directory_id(CLUSTER_ID, "n4"))
    assert (answer.error_code, admin.calls) == (ErrorCode.none, [("add", "n4")])
    assert admin.members.voters == ("n1", "n2", "n3", "n4")


async def test_a_node_that_does_not_catch_up_in_time_is_taken_out_again() -> None:
    admin = Admin(_members(), catches_up=False)
    answer = await _add(admin, 4, directory_id(CLUSTER_ID, "n4"), timeout_s=0.3)
    assert answer.error_code == ErrorCode.request_timed_out
    assert "since it is lagging behind" in answer.error_message
    assert admin.calls == [("add", "n4"), ("remove", "n4")] and not admin.members.learners


async def test_the_refusals_add_nothing() -> None:
    admin = Admin(_members())
    n4 = directory_id(CLUSTER_ID, "n4")
    denied = await _add(admin, 4, n4, allowed=False)
    assert denied.error_code == ErrorCode.cluster_authorization_failed
    duplicate = await _add(admin, 2, directory_id(CLUSTER_ID, "n2"))
    assert duplicate.error_code == ErrorCode.duplicate_voter
    assert "The voter id for ReplicaKey(id=2, directoryId=" in duplicate.error_message
    assert (await _add(admin, 4, uuid.UUID(int=0))).error_code == ErrorCode.invalid_request
    nobody = await _add(admin, 4, directory_id(CLUSTER_ID, "n3"))  # n4's id, n3's directory
    assert nobody.error_code == ErrorCode.request_timed_out and "no node" in nobody.error_message
    busy = Admin(_members(learners=("n4",)))
    assert (await _add(busy, 4, n4)).error_code == ErrorCode.request_timed_out
    assert admin.calls == busy.calls == []
