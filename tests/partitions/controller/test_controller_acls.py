"""ACLs as controller state: CreateAcls and DeleteAcls applied deterministically (a delete answers what each
filter removed), refused whole, published immutable, kept in the controller's snapshot (one taken before
ACLs existed reads as none), and carried between nodes as the enums they are."""

from __future__ import annotations

import asyncio

import msgpack
import pytest
from leader_at_level import LeaderAtLevel

from partitions.controller import acls as controller_acls
from partitions.controller.acls import ACLS_PER_CHANGE_MAX, CreateAcls, DeleteAcls
from partitions.controller.commands import CreateTopic, decode, encode
from partitions.controller.state import ControllerStateMachine
from partitions.errors import FeatureNotFinalized, InvalidCommand, InvalidName
from partitions.metadata.security_records import SecurityRecords
from partitions.peers.client import ERRORS, REGISTRY
from partitions.peers.codec import pack, unpack
from partitions.security.acls import AclBinding, AclFilter, InvalidAcl, Operation, ResourceType


def acl(
    name: str = "orders", operation: str = "read", principal: str = "User:alice", **more: str
) -> AclBinding:
    return AclBinding.of(
        more.get("kind", "topic"), name, more.get("pattern", "literal"), principal, more.get("host", "*"),
        operation, more.get("permission", "allow"),
    )  # fmt: skip


def test_create_adds_what_is_new_and_answers_it_the_same_on_every_replica() -> None:
    replicas = [ControllerStateMachine(), ControllerStateMachine()]
    commands = [
        CreateAcls((acl("orders"), acl("logs-", "write", pattern="prefixed"))),
        CreateAcls((acl("orders"), acl(kind="group", name="billing"))),  # one exists: only the other is new
    ]
    answers = [[m.apply(i + 1, 1, encode(c)) for i, c in enumerate(commands)] for m in replicas]
    assert answers[0] == answers[1]
    first, second = answers[0]
    assert set(first) == {acl("orders"), acl("logs-", "write", pattern="prefixed")}  # type: ignore[arg-type]
    assert second == (acl(kind="group", name="billing"),)
    held = replicas[0].metadata.acls
    assert isinstance(held, tuple) and len(held) == 3 and list(held) == sorted(held, key=AclBinding.to_row)
    assert replicas[0].metadata == replicas[1].metadata


def test_delete_answers_what_each_filter_removed_and_keeps_the_rest() -> None:
    machine = ControllerStateMachine()
    kept = acl(kind="group", name="billing")
    machine.apply(1, 1, encode(CreateAcls((acl("orders"), acl("orders", "write"), acl("logs"), kept))))
    filters = (AclFilter.of(name="orders"), AclFilter.of(operation="write"), AclFilter.of("group", "nothing"))
    removed = machine.apply(2, 1, encode(DeleteAcls(filters)))
    assert removed == (
        (acl("orders"), acl("orders", "write")),
        (acl("orders", "write"),),  # an ACL two filters match is named under both, as Kafka answers
        (),
    )
    assert set(machine.metadata.acls) == {acl("logs"), kept}
    everything = machine.apply(3, 1, encode(DeleteAcls((AclFilter.of(),))))
    assert everything == ((acl("logs"), kept),) and machine.metadata.acls == ()


def test_the_tuple_is_replaced_only_when_the_acls_change() -> None:
    machine = ControllerStateMachine()
    machine.apply(1, 1, encode(CreateAcls((acl(),))))
    held = machine.metadata.acls
    machine.apply(2, 1, encode(CreateAcls((acl(),))))  # nothing new
    machine.apply(3, 1, encode(DeleteAcls((AclFilter.of(name="nothing"),))))
    machine.apply(4, 1, encode(CreateTopic("t", [["n1"]])))
    assert machine.metadata.acls is held and machine.metadata.applied_index == 4


def test_a_refused_change_changes_nothing() -> None:
    machine = ControllerStateMachine()
    machine.apply(1, 1, encode(CreateAcls((acl(),))))
    before = machine.metadata.acls
    too_many = tuple(acl(f"t{i}") for i in range(ACLS_PER_CHANGE_MAX + 1))
    refused = machine.apply(2, 1, encode(CreateAcls(too_many)))
    assert isinstance(refused, InvalidAcl) and "1 to 1000" in str(refused)
    assert isinstance(machine.apply(3, 1, encode(DeleteAcls(()))), InvalidAcl)
    # a row no binding can be (a group's WRITE), as a node of another version might send it
    bad = msgpack.packb([1, 11, [[3, "g", 3, "User:a", "*", 4, 3]]])
    assert isinstance(machine.apply(4, 1, bad), InvalidCommand)
    assert isinstance(machine.apply(5, 1, msgpack.packb([1, 12, "not rows"])), InvalidCommand)
    assert machine.metadata.acls is before and machine.metadata.applied_index == 5


def test_the_cluster_holds_at_most_acls_max() -> None:
    held = tuple(acl(f"t{i}") for i in range(controller_acls.ACLS_MAX))
    with pytest.raises(InvalidName, match="at most"):
        controller_acls.apply(held, CreateAcls((acl("one-more"),)))
    assert controller_acls.apply(held, CreateAcls((acl("t0"),)))[1] == ()  # nothing new: not refused


def test_commands_round_trip_through_their_encoding() -> None:
    create = CreateAcls((acl(), acl("x", "describe_configs", principal="User:*", permission="deny")))
    delete = DeleteAcls((AclFilter.of(), AclFilter.of("topic", "x", "match", "User:bob", "10.0.0.1", "read")))
    assert decode(encode(create)) == create and decode(encode(delete)) == delete


def test_the_snapshot_keeps_the_acls_and_an_older_one_reads_as_none() -> None:
    machine = ControllerStateMachine()
    machine.apply(
        1, 1, encode(CreateAcls((acl(), acl(kind="cluster", name="kafka-cluster", operation="alter"))))
    )
    copy = ControllerStateMachine()
    copy.restore(machine.snapshot())
    assert copy.metadata == machine.metadata and len(copy.metadata.acls) == 2
    older = msgpack.unpackb(machine.snapshot(), raw=False)
    del older["acls"]
    before_acls = ControllerStateMachine()
    before_acls.restore(msgpack.packb(older, use_bin_type=True))
    assert before_acls.metadata.acls == () and before_acls.metadata.applied_index == 1


def test_acls_and_filters_cross_between_nodes_as_enums() -> None:
    bindings = [acl(), acl(kind="group", name="g", operation="describe")]
    filters = [AclFilter.of("topic", None, "match", None, None, "any", "allow")]
    value = {"bindings": bindings, "filters": filters, "removed": [tuple(bindings)]}
    back = unpack(pack(value, REGISTRY), REGISTRY, ERRORS)
    assert isinstance(back, dict)
    assert (
        back["bindings"] == bindings and back["filters"] == filters and back["removed"] == [tuple(bindings)]
    )
    assert back["bindings"][1].resource_type is ResourceType.GROUP
    assert back["filters"][0].operation is Operation.ANY


def _nothing_done(command: object) -> object:
    """What the controller answers an ACL change that did nothing."""
    return () if isinstance(command, CreateAcls) else tuple(() for _ in command.filters)  # type: ignore[attr-defined]


def test_a_registry_acl_is_proposed_only_once_every_node_can_read_its_type() -> None:
    subject = acl("orders-value", kind="subject")
    old = LeaderAtLevel(
        1, _nothing_done
    )  # a node of release 0.1.0 may still run: codes 100 and 101 are unknown to it
    records = SecurityRecords(old)  # type: ignore[arg-type]
    with pytest.raises(
        FeatureNotFinalized, match=r"ACL of the schema registry needs feature raftlog\.version"
    ):
        asyncio.run(records.create_acls([acl(), subject]))
    with pytest.raises(FeatureNotFinalized):
        asyncio.run(records.delete_acls([AclFilter.of(resource_type="registry")]))
    assert old.proposed == []
    asyncio.run(records.create_acls([acl()]))  # Kafka's types as before
    asyncio.run(records.delete_acls([AclFilter.of()]))  # any type: a filter 0.1.0 reads
    assert len(old.proposed) == 2
    new = LeaderAtLevel(2, _nothing_done)
    asyncio.run(SecurityRecords(new).create_acls([subject]))  # type: ignore[arg-type]
    assert new.proposed == [CreateAcls((subject,))]


def test_a_user_acl_or_a_token_operation_is_proposed_only_once_every_node_can_read_its_code() -> None:
    on_user = acl("User:bob", "create_tokens", kind="user")
    old = LeaderAtLevel(1, _nothing_done)  # a node of release 0.1.0 knows neither code 7 nor 13 and 14
    records = SecurityRecords(old)  # type: ignore[arg-type]
    with pytest.raises(
        FeatureNotFinalized, match=r"ACL of a User resource or of its tokens .*raftlog\.version"
    ):
        asyncio.run(records.create_acls([acl(), on_user]))
    assert old.proposed == []
    # a delete naming the User type or a token operation removes nothing and is not proposed (none can
    # exist yet, and 0.1.0 cannot decode it): Kafka's DeleteAcls of every type names the User type too
    every_type = [AclFilter.of(resource_type=kind) for kind in ("topic", "user")]
    token_operation = AclFilter.of(operation="describe_tokens")
    assert asyncio.run(records.delete_acls([*every_type, token_operation])) == [[], [], []]
    assert old.proposed == [DeleteAcls((every_type[0],))]
    assert asyncio.run(records.delete_acls([token_operation])) == [[]] and len(old.proposed) == 1
    old.proposed.clear()
    new = LeaderAtLevel(2, _nothing_done)
    asyncio.run(SecurityRecords(new).create_acls([on_user]))  # type: ignore[arg-type]
    assert new.proposed == [CreateAcls((on_user,))]
    command = decode(encode(CreateAcls((on_user,))))
    assert command == CreateAcls((on_user,)) and int(command.bindings[0].resource_type) == 7
    assert int(command.bindings[0].operation) == 13


def test_a_delegation_token_acl_waits_for_the_same_level_and_crosses_the_log_as_code_6() -> None:
    on_token = acl("Ju6x0XgOQmqnGh7B5sFhMg", "describe", "User:watcher", kind="delegation_token")
    old = LeaderAtLevel(1, _nothing_done)  # release 0.1.0 knows no code 6
    with pytest.raises(FeatureNotFinalized, match=r"or of a delegation token .*raftlog\.version"):
        asyncio.run(SecurityRecords(old).create_acls([on_token]))  # type: ignore[arg-type]
    tokens = AclFilter.of(resource_type="delegation_token")
    assert asyncio.run(SecurityRecords(old).delete_acls([tokens])) == [[]]  # type: ignore[arg-type]
    assert old.proposed == []
    new = LeaderAtLevel(2, _nothing_done)
    asyncio.run(SecurityRecords(new).create_acls([on_token]))  # type: ignore[arg-type]
    command = decode(encode(CreateAcls((on_token,))))
    assert new.proposed == [command] and int(command.bindings[0].resource_type) == 6


def test_a_registry_acl_crosses_the_controller_log_and_snapshot_as_its_code() -> None:
    held = (
        acl("orders-", kind="subject", pattern="prefixed"),
        acl("schema-registry", "describe", kind="registry"),
    )
    command = decode(encode(CreateAcls(held)))
    assert command == CreateAcls(held) and {int(a.resource_type) for a in command.bindings} == {100, 101}
