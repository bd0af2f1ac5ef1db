"""ACLs in Kafka's model and the authorizer's decision (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitions.security.acls import (
    CLUSTER_NAME,
    REGISTRY_NAME,
    VALID_OPERATIONS,
    AclBinding,
    AclFilter,
    Authorizer,
    Authorizers,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    client_host,
    kafka_filters,
    kafka_resource_type,
    select,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(
    kind: ResourceType = T,
    name: str = "orders",
    pattern: PatternType = LIT,
    principal: str = "User:alice",
    operation: Operation = Operation.READ,
    permission: Permission = ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding.of(kind, name, pattern, principal, host, operation, permission)


def test_nothing_is_allowed_without_an_acl_but_a_super_user_may_do_anything() -> None:
    authorizer = Authorizer([], super_users={"User:admin"})
    assert not authorizer.allows("User:alice", "10.0.0.1", Operation.READ, T, "orders")
    decision = authorizer.decide("User:admin", "10.0.0.1", Operation.DELETE, C, CLUSTER_NAME)
    assert decision.allowed and decision.reason == "super user"


def test_literal_wildcard_and_prefixed_names() -> None:
    authorizer = Authorizer(
        [
            acl(name="orders"),
            acl(name="*", principal="User:bob"),
            acl(name="logs-", pattern=PRE, principal="User:carol", operation=Operation.WRITE),
        ]
    )
    assert authorizer.allows("User:alice", "h", Operation.READ, T, "orders")
    assert not authorizer.allows("User:alice", "h", Operation.READ, T, "orders2")  # literal is exact
    assert authorizer.allows("User:bob", "h", Operation.READ, T, "anything")
    assert not authorizer.allows("User:bob", "h", Operation.READ, G, "anything")  # another resource type
    assert authorizer.allows("User:carol", "h", Operation.WRITE, T, "logs-eu")
    assert not authorizer.allows("User:carol", "h", Operation.WRITE, T, "log")


def test_a_deny_wins_over_any_allow_and_all_covers_every_operation() -> None:
    authorizer = Authorizer(
        [
            acl(operation=Operation.ALL),
            acl(name="orders", operation=Operation.WRITE, permission=DENY, host="10.0.0.9"),
            acl(name="secret", pattern=PRE, principal="User:*", operation=Operation.ALL, permission=DENY),
            acl(name="secret-x", operation=Operation.READ),
        ]
    )
    assert authorizer.allows("User:alice", "10.0.0.1", Operation.WRITE, T, "orders")
    denied = authorizer.decide("User:alice", "10.0.0.9", Operation.WRITE, T, "orders")
    assert not denied.allowed and denied.reason.startswith("denied by deny User:alice write")
    assert authorizer.allows("User:alice", "10.0.0.9", Operation.READ, T, "orders")  # deny was for write
    assert not authorizer.allows("User:alice", "h", Operation.READ, T, "secret-x")  # User:* deny, all ops


def test_describe_is_implied_by_read_write_delete_alter_and_describe_configs_by_alter_configs() -> None:
    for granted in (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER):
        authorizer = Authorizer([acl(operation=granted)])
        assert authorizer.allows("User:alice", "h", Operation.DESCRIBE, T, "orders"), granted
        assert not authorizer.allows("User:alice", "h", Operation.DESCRIBE_CONFIGS, T, "orders")
    configs = Authorizer([acl(operation=Operation.ALTER_CONFIGS)])
    assert configs.allows("User:alice", "h", Operation.DESCRIBE_CONFIGS, T, "orders")
    assert not configs.allows("User:alice", "h", Operation.DESCRIBE, T, "orders")
    describe_only = Authorizer([acl(operation=Operation.DESCRIBE)])
    assert not describe_only.allows("User:alice", "h", Operation.READ, T, "orders")  # not the other way


def test_a_transactional_id_takes_write_and_describe_by_kafka_s_code_5_and_write_implies_describe() -> None:
    tid = ResourceType.TRANSACTIONAL_ID
    assert VALID_OPERATIONS[tid] == {Operation.ALL, Operation.WRITE, Operation.DESCRIBE}
    by_code = AclBinding.of(5, "payments-", "prefixed", "User:alice", "*", "write", "allow")
    assert by_code == AclBinding.of(
        "transactional_id", "payments-", PRE, "User:alice", "*", Operation.WRITE, ALLOW
    )
    assert by_code.to_json()["resource_type"] == "transactional_id"
    authorizer = Authorizer([by_code])
    assert authorizer.allows("User:alice", "h", Operation.WRITE, tid, "payments-1")
    assert authorizer.allows("User:alice", "h", Operation.DESCRIBE, tid, "payments-1")
    assert not authorizer.allows("User:alice", "h", Operation.WRITE, T, "payments-1")  # another type


def test_a_user_resource_takes_kafka_s_token_operations_by_code_7() -> None:
    user = ResourceType.USER
    assert VALID_OPERATIONS[user] == {Operation.ALL, Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}
    by_code = AclBinding.of(7, "User:alice", "literal", "User:bob", "*", 13, "allow")  # as kafka-acls sends
    assert by_code.to_json()["resource_type"] == "user" and by_code.operation is Operation.CREATE_TOKENS
    authorizer = Authorizer([by_code])
    assert authorizer.allows("User:bob", "h", Operation.CREATE_TOKENS, user, "User:alice")
    assert not authorizer.allows(
        "User:bob", "h", Operation.DESCRIBE_TOKENS, user, "User:alice"
    )  # not implied
    assert not authorizer.allows("User:bob", "h", Operation.CREATE_TOKENS, user, "User:carol")
    assert not authorizer.allows("User:bob", "h", Operation.CREATE_TOKENS, T, "User:alice")  # another type
    with pytest.raises(InvalidAcl, match="a topic takes"):
        AclBinding.of("topic", "t", "literal", "User:bob", "*", "create_tokens", "allow")
    with pytest.raises(InvalidAcl, match="a user takes all, create_tokens, describe_tokens"):
        AclBinding.of("user", "User:alice", "literal", "User:bob", "*", "read", "allow")


def test_a_delegation_token_resource_takes_describe_by_code_6() -> None:
    token = ResourceType.DELEGATION_TOKEN
    assert VALID_OPERATIONS[token] == {Operation.ALL, Operation.DESCRIBE}
    by_code = AclBinding.of(
        6, "Ju6x0XgOQmqnGh7B5sFhMg", "literal", "User:bob", "*", 8, "allow"
    )  # kafka-acls'
    assert by_code.to_json()["resource_type"] == "delegation_token"
    authorizer = Authorizer([by_code])
    assert authorizer.allows("User:bob", "h", Operation.DESCRIBE, token, "Ju6x0XgOQmqnGh7B5sFhMg")
    assert not authorizer.allows("User:bob", "h", Operation.DESCRIBE, token, "another-token-id")
    with pytest.raises(InvalidAcl, match="a delegation_token takes all, describe"):
        AclBinding.of("delegation_token", "id", "literal", "User:bob", "*", "read", "allow")


def test_a_deny_of_describe_does_not_deny_read_as_kafka_decides() -> None:
    authorizer = Authorizer(
        [acl(operation=Operation.READ), acl(operation=Operation.DESCRIBE, permission=DENY)]
    )
    assert authorizer.allows("User:alice", "h", Operation.READ, T, "orders")
    assert not authorizer.allows("User:alice", "h", Operation.DESCRIBE, T, "orders")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": ResourceType.ANY}, "an ACL names one resource type"),
        ({"pattern": PatternType.MATCH}, "an ACL is literal or prefixed"),
        ({"operation": Operation.ANY}, "one operation and one permission"),
        ({"kind": G, "operation": Operation.WRITE}, "a group takes"),
        ({"kind": ResourceType.TRANSACTIONAL_ID, "operation": Operation.READ}, "a transactional_id takes"),
        ({"kind": C, "name": "other", "operation": Operation.ALTER}, "the cluster resource is the literal"),
        ({"principal": "alice"}, "must be 'User:<name>' or 'User:*'"),
        ({"principal": "Group:x"}, "must be 'User:<name>' or 'User:*'"),
        ({"name": ""}, "must be a non-empty string"),
        ({"name": "a\nb"}, "printable"),
        ({"name": "*", "pattern": PRE}, "a prefixed pattern cannot be '*'"),
        ({"host": ""}, "must be a non-empty string"),
    ],
)
def test_an_acl_that_cannot_be_used_is_refused_by_name(fields: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidAcl, match=message.replace("(", r"\(").replace("*", r"\*")):
        acl(**fields)  # type: ignore[arg-type]


def test_names_and_codes_both_read_and_rows_round_trip() -> None:
    by_name = AclBinding.of("topic", "orders", "prefixed", "User:a", "*", "describe_configs", "deny")
    by_code = AclBinding.of(2, "orders", 4, "User:a", "*", 10, 2)
    assert by_name == by_code and AclBinding.from_row(by_name.to_row()) == by_name
    assert by_name.to_json()["operation"] == "describe_configs"
    with pytest.raises(InvalidAcl, match="one of"):
        AclBinding.of("topics", "orders", "literal", "User:a", "*", "read", "allow")
    with pytest.raises(InvalidAcl, match="is not an ACL row"):
        AclBinding.from_row(["too", "short"])


def test_filters_select_as_describe_and_delete_acls_take_them() -> None:
    acls = [
        acl(name="orders"),
        acl(name="*", principal="User:bob"),
        acl(name="ord", pattern=PRE, operation=Operation.WRITE),
        acl(kind=G, name="billing"),
    ]
    everything = AclFilter.of()
    assert len(select(acls, [everything])) == 4
    assert select(acls, [AclFilter.of(resource_type="group")]) == (acls[3],)
    assert {a.name for a in select(acls, [AclFilter.of(name="orders", pattern_type="match")])} == {
        "orders",
        "*",
        "ord",
    }
    assert select(acls, [AclFilter.of(name="orders")]) == (acls[0],)  # any pattern, this exact name
    assert select(acls, [AclFilter.of(pattern_type="prefixed")]) == (acls[2],)
    assert select(acls, [AclFilter.of(principal="User:bob"), AclFilter.of(operation="write")]) == tuple(
        sorted([acls[1], acls[2]], key=AclBinding.to_row)
    )


topic_operations = st.sampled_from(sorted(VALID_OPERATIONS[T]))
bindings = (
    st.tuples(
        st.sampled_from(["orders", "ord", "*", "logs"]),
        st.sampled_from([LIT, PRE]),
        st.sampled_from(["User:alice", "User:*", "User:bob"]),
        topic_operations,
        st.sampled_from([ALLOW, DENY]),
    )
    .filter(lambda parts: not (parts[0] == "*" and parts[1] is PRE))
    .map(lambda parts: acl(T, parts[0], parts[1], parts[2], parts[3], parts[4]))
)


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings, max_size=8), topic_operations, st.sampled_from(["orders", "logs-1", "x"]))
def test_a_matching_deny_always_refuses_and_other_types_never_matter(acls, operation, name) -> None:
    """Against a brute-force reading of the rules: refused when a DENY concerns it; else allowed exactly
    when an ALLOW of the operation, ALL or an operation implying it concerns it."""
    authorizer = Authorizer(acls)
    concerning = [a for a in acls if a.concerns(T, name) and a.principal in ("User:alice", "User:*")]
    denied = any(a.permission is DENY and a.operation in (operation, Operation.ALL) for a in concerning)
    implies = {
        Operation.DESCRIBE: {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
        Operation.DESCRIBE_CONFIGS: {Operation.ALTER_CONFIGS},
    }.get(operation, set())
    allowed = any(
        a.permission is ALLOW and a.operation in ({operation, Operation.ALL} | implies) for a in concerning
    )
    assert authorizer.allows("User:alice", "h", operation, T, name) is (allowed and not denied)
    with_groups = Authorizer([*acls, acl(kind=G, name="*", operation=Operation.ALL, permission=DENY)])
    assert with_groups.allows("User:alice", "h", operation, T, name) is (allowed and not denied)


def test_codes_that_crossed_between_nodes_come_back_as_enums_and_unknown_codes_are_refused() -> None:
    binding = AclBinding(2, "orders", 3, "User:a", "*", 3, 3)  # type: ignore[arg-type]
    assert binding.resource_type is T and binding.operation is Operation.READ and binding.permission is ALLOW
    assert binding == acl(principal="User:a")
    filter_ = AclFilter(resource_type=3, operation=8)  # type: ignore[arg-type]
    assert filter_.resource_type is G and filter_.operation is Operation.DESCRIBE
    assert AclFilter.from_row(filter_.to_row()) == filter_
    with pytest.raises(InvalidAcl, match="one of"):
        AclBinding(2, "orders", 3, "User:a", "*", 99, 3)  # type: ignore[arg-type]


def test_allows_any_topic_as_kafka_authorizes_by_resource_type() -> None:
    write = Operation.WRITE
    orders = acl(name="orders", operation=write)
    no_orders = acl(name="orders", operation=write, permission=DENY)
    no_ord_prefix = acl(name="ord", pattern=PRE, operation=write, permission=DENY)
    no_logs_prefix = acl(name="logs-", pattern=PRE, operation=write, permission=DENY)
    nothing_for_anyone = acl(name="*", principal="User:*", operation=Operation.ALL, permission=DENY)

    def any_write(*acls: AclBinding) -> bool:
        return Authorizer(acls).allows_any("User:alice", "h", write, T)

    assert not any_write()
    assert any_write(orders)
    assert any_write(acl(name="logs-", pattern=PRE, operation=Operation.ALL))
    assert not any_write(acl(name="orders", operation=Operation.READ))  # implied operations do not count
    assert not any_write(acl(kind=G, name="orders", operation=Operation.READ))
    assert not any_write(orders, no_orders)
    assert not any_write(orders, no_ord_prefix)
    assert not any_write(acl(name="logs-eu", pattern=PRE, operation=write), no_logs_prefix)
    assert not any_write(orders, nothing_for_anyone)
    assert any_write(orders, acl(name="logs", operation=write), no_orders)  # another topic stays allowed
    assert Authorizer((), {"User:root"}).allows_any("User:root", "h", write, T)


def test_the_authorizer_is_made_again_only_when_the_acls_change() -> None:
    authorizers = Authorizers({"User:root"})
    first = (acl(),)
    made = authorizers.of(first)
    assert authorizers.of(first) is made and made.allows("User:alice", "h", Operation.READ, T, "orders")
    second = (acl(name="logs"),)
    assert authorizers.of(second) is not made
    assert not authorizers.of(second).allows("User:alice", "h", Operation.READ, T, "orders")
    assert authorizers.of(()).allows("User:root", "h", Operation.ALL, C, CLUSTER_NAME)


@pytest.mark.parametrize(
    ("address", "host"),
    [("10.0.0.1", "10.0.0.1"), ("::ffff:10.0.0.1", "10.0.0.1"), ("::1", "::1"), ("fe80::1%eth0", "fe80::1"),
     (None, ""), ("", "")],
)  # fmt: skip
def test_the_host_is_the_clients_address_in_its_plain_form(address: str | None, host: str) -> None:
    assert client_host(address) == host
    from_v4 = client_host("::ffff:10.0.0.1")
    assert Authorizer([acl(host="10.0.0.1")]).allows("User:alice", from_v4, Operation.READ, T, "orders")


S, R = ResourceType.SUBJECT, ResourceType.REGISTRY


def test_the_registry_types_decide_as_kafka_s_with_redpanda_s_operations_and_codes() -> None:
    assert (int(S), int(R)) == (100, 101)  # Redpanda's wire values, outside Kafka's enum
    readers = Authorizer(
        [acl(S, "orders-", PRE), acl(R, REGISTRY_NAME, operation=Operation.ALTER_CONFIGS), acl(T, "orders-v")]
    )
    allows = readers.allows
    assert allows("User:alice", "h", Operation.READ, S, "orders-value")
    assert allows("User:alice", "h", Operation.DESCRIBE, S, "orders-value")  # READ implies DESCRIBE
    assert not allows("User:alice", "h", Operation.WRITE, S, "orders-value")
    assert not allows("User:alice", "h", Operation.READ, S, "logs-value")
    assert not allows("User:alice", "h", Operation.READ, T, "orders-value")  # a topic ACL is no subject's
    assert allows("User:alice", "h", Operation.DESCRIBE_CONFIGS, R, REGISTRY_NAME)
    assert not allows("User:alice", "h", Operation.DESCRIBE, R, REGISTRY_NAME)
    assert AclBinding.of("subject", "x", "literal", "User:a", "*", "delete", "allow").resource_type is S
    with pytest.raises(InvalidAcl, match="the registry resource is the literal 'schema-registry'"):
        acl(R, "*")
    with pytest.raises(InvalidAcl, match="a subject takes"):
        acl(S, operation=Operation.CREATE)


def test_kafka_s_acl_apis_neither_take_nor_select_the_registry_types() -> None:
    assert kafka_resource_type(2) is T and kafka_resource_type("any") is ResourceType.ANY
    for code in (100, 101, "subject"):
        with pytest.raises(InvalidAcl, match="Kafka's ACL APIs take"):
            kafka_resource_type(code)
    held = [acl(S, "orders-value"), acl(R, REGISTRY_NAME), acl(T), acl(G, "g")]
    everything = kafka_filters(AclFilter.of())
    assert select(held, everything) == tuple(sorted([acl(T), acl(G, "g")], key=AclBinding.to_row))
    assert kafka_filters(AclFilter.of(resource_type="topic")) == (AclFilter.of(resource_type="topic"),)
