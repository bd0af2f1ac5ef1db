"""ACLs, the same scenario against raftlog and against Apache Kafka, with the same assertions: a super
user makes a SCRAM user and a topic (with confluent-kafka's AdminClient), and the user's produce is refused
until an ACL allows it, allowed by a literal and by a prefixed ACL, refused again by a DENY beside an ALLOW
and after the ACLs are deleted; only a super user may create ACLs; DescribeAcls and DeleteAcls answer the
same bindings on both.

raftlog runs as ``raftlog dev --secure`` (SASL over TLS, ``--enforce-acls``, its admin user a super user);
Kafka runs its StandardAuthorizer with ``allow.everyone.if.no.acl.found=true`` and PLAINTEXT's ANONYMOUS
as super user (``KafkaCluster(authorizer=True)``). raftlog refuses a resource no ACL names; Kafka so set up
lets everyone at it, so the topic here and the cluster first get an ACL for somebody else: from then on
both decide by their ACLs alone."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import Systems

from raftlog_client.local_cluster import LocalCluster

pytestmark = pytest.mark.slow

SYSTEMS = ("raftlog", "kafka")
PATIENCE_S = 30.0  # an ACL or a user reaches every broker of either cluster within it


@dataclass
class Door:
    """Where a super user and a SASL user of one system connect (confluent-kafka settings)."""

    admin: dict[str, Any]
    login: Callable[[str, str], dict[str, Any]]  # (user, password) -> settings


@pytest.fixture(scope="module")
def secure_raftlog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp("acls")), nodes=3, dev_args=["--secure"]) as running:
        yield running


@pytest.fixture(scope="module")
def doors(systems: Systems, secure_raftlog: LocalCluster) -> dict[str, Door]:
    """Each system's door by name (Kafka's made, and its cluster started, when a test asks for it)."""

    def raftlog_login(user: str, password: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": secure_raftlog.bootstrap_servers,
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": secure_raftlog.security["ca"],
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
        }

    def kafka_login(user: str, password: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": systems.kafka.sasl_bootstrap_servers,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
        }

    def door(system: str) -> Door:
        if system == "raftlog":
            admin = secure_raftlog.security
            return Door(raftlog_login(admin["user"], admin["password"]), raftlog_login)
        return Door({"bootstrap.servers": systems.kafka.bootstrap_servers}, kafka_login)

    return _Doors(door)


class _Doors(dict[str, Door]):
    """Each system's door, made the first time a test asks for it (Kafka's cluster starts only then)."""

    def __init__(self, make: Callable[[str], Door]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, system: str) -> Door:
        self[system] = made = self._make(system)
        return made


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _make_user(admin: AdminClient, user: str, password: str) -> None:
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    assert admin.alter_user_scram_credentials([upsert])[user].result(30) is None


def _make_topic(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=30)[topic].result(60)

    def led() -> bool:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        return (
            found is not None
            and found.error is None
            and all(p.leader >= 0 for p in found.partitions.values())
        )

    _until(led, f"{topic} has no leader")


def _binding(
    principal: str,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)


def _create_acls(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings), request_timeout=30).values():
        assert future.result(30) is None


def _produce(settings: dict[str, Any], topic: str) -> int:
    """One record through a new producer (not idempotent: no cluster-wide permission is asked): its offset,
    or the error code it failed with (negative: librdkafka's own, positive: the broker's)."""
    producer = Producer(
        {**settings, "enable.idempotence": False, "acks": "all", "message.timeout.ms": 10_000}
    )
    outcome: list[int] = []

    def delivered(error: KafkaError | None, message: Any) -> None:
        outcome.append(message.offset() if error is None else -1000 - error.code())

    producer.produce(topic, b"v", partition=0, on_delivery=delivered)
    producer.flush(30)
    assert len(outcome) == 1, "the delivery report never came"
    return outcome[0]


REFUSED = -1000 - KafkaError.TOPIC_AUTHORIZATION_FAILED


def _produces(settings: dict[str, Any], topic: str) -> Callable[[], bool]:
    return lambda: _produce(settings, topic) >= 0


def _refused(settings: dict[str, Any], topic: str) -> Callable[[], bool]:
    return lambda: _produce(settings, topic) == REFUSED


def _described(admin: AdminClient, topic: str) -> set[tuple[str, str, str, str]]:
    """The topic's literal bindings as (principal, host, operation, permission)."""
    query = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = admin.describe_acls(query, request_timeout=30).result(30)
    return {(b.principal, b.host, b.operation.name, b.permission_type.name) for b in found}


def _until_described(admin: AdminClient, topic: str, expected: set[tuple[str, str, str, str]]) -> None:
    """Until DescribeAcls answers ``expected`` (Kafka's brokers learn ACLs from the metadata log a moment
    after CreateAcls or DeleteAcls answered, and the admin client may ask any of them)."""
    deadline = time.monotonic() + PATIENCE_S
    while (found := _described(admin, topic)) != expected:
        assert time.monotonic() < deadline, f"DescribeAcls answered {found}, not {expected}"
        time.sleep(0.2)


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_user_produces_only_where_its_acls_allow_and_only_a_super_user_makes_acls(
    doors: dict[str, Door], system: str
) -> None:
    door = doors[system]
    admin = AdminClient(door.admin)  # held until its futures end: a client collected first cancels them
    user, other = f"u{uuid.uuid4().hex[:8]}", f"o{uuid.uuid4().hex[:8]}"
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    _make_user(admin, user, "right")
    _make_topic(admin, topic)
    _create_acls(  # the topic and the cluster are ACL-governed on both from now on
        admin,
        _binding(f"User:{other}", topic, AclOperation.READ),
        AclBinding(
            ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, f"User:{other}", "*",
            AclOperation.DESCRIBE, AclPermissionType.ALLOW,
        ),
    )  # fmt: skip
    settings = door.login(user, "right")

    _until(_refused(settings, topic), f"{user} was never refused on {topic}")

    as_user = AdminClient(settings)

    def acls_refused() -> bool:
        """Whether the user's CreateAcls is refused (an ACL that it made before the broker it asked knew
        the cluster's, names a user and a topic that do not exist)."""
        probe = _binding(
            f"User:nobody-{uuid.uuid4().hex[:8]}", f"none-{uuid.uuid4().hex[:8]}", AclOperation.READ
        )
        try:
            next(iter(as_user.create_acls([probe], request_timeout=30).values())).result(30)
        except KafkaException as refused:
            assert refused.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, refused
            return True
        return False

    _until(acls_refused, f"{user}, no super user, was let create ACLs")

    _create_acls(admin, _binding(f"User:{user}", topic, AclOperation.WRITE))
    _until(_produces(settings, topic), f"{user} was never let write to {topic}")
    _until_described(
        admin, topic, {(f"User:{other}", "*", "READ", "ALLOW"), (f"User:{user}", "*", "WRITE", "ALLOW")}
    )

    _create_acls(admin, _binding(f"User:{user}", topic, AclOperation.WRITE, AclPermissionType.DENY))
    _until(_refused(settings, topic), "a DENY beside an ALLOW did not refuse")

    query = AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    deleted = admin.delete_acls([query], request_timeout=30)[query].result(30)
    assert sorted((b.operation.name, b.permission_type.name) for b in deleted) == [
        ("WRITE", "ALLOW"),
        ("WRITE", "DENY"),
    ]
    _until_described(admin, topic, {(f"User:{other}", "*", "READ", "ALLOW")})

    prefix = topic[: len("acl-") + 4]
    _create_acls(
        admin, _binding(f"User:{user}", prefix, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
    )
    _until(_produces(settings, topic), f"a prefixed ACL on {prefix} did not let {user} write to {topic}")
    query = AclBindingFilter(
        ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, f"User:{user}", None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    assert len(admin.delete_acls([query], request_timeout=30)[query].result(30)) == 1
    _until(_refused(settings, topic), f"{user} was still let write after its ACLs were deleted")

    def deleted_by_user() -> int:
        """The user's DeleteRecords of every record: the new log start offset, or the error code it was
        refused with (as ``_produce`` gives it)."""
        fresh = AdminClient(settings)  # its own metadata: a client's cache would not see a new ACL
        try:
            futures = fresh.delete_records([TopicPartition(topic, 0, -1)], operation_timeout=30)
            return int(next(iter(futures.values())).result(30).low_watermark)
        except KafkaException as refused:
            return -1000 - refused.args[0].code()

    # a user that may not even DESCRIBE the topic does not find its leader (librdkafka: _NOENT); one that
    # may DESCRIBE it but not DELETE it is refused by the broker
    assert deleted_by_user() == -1000 - KafkaError._NOENT
    _create_acls(admin, _binding(f"User:{user}", topic, AclOperation.DESCRIBE))
    _until(lambda: deleted_by_user() == REFUSED, f"{user}'s DeleteRecords was never refused by the broker")
    _create_acls(admin, _binding(f"User:{user}", topic, AclOperation.DELETE))
    _until(lambda: deleted_by_user() >= 2, f"{user} was never let delete the records of {topic}")


@pytest.mark.kafka_answer
@pytest.mark.parametrize("system", SYSTEMS)
def test_a_consumer_group_shows_a_user_only_the_topics_it_may_describe(
    doors: dict[str, Door], system: str
) -> None:
    """Issue 72 item 6, as Kafka answers it (KIP-848, ``group.protocol=consumer``): a user with READ on its
    groups and on one topic subscribes by regex to that topic's name and another's it may not DESCRIBE,
    and is assigned only the first; a subscription naming the other is TOPIC_AUTHORIZATION_FAILED; and a
    group a super user's consumer holds the other in is described to the user as
    TOPIC_AUTHORIZATION_FAILED. (Imports and helpers here, not at the top: the module's other tests keep
    their recorded Kafka sides.)"""
    from confluent_kafka import Consumer

    door = doors[system]
    admin = AdminClient(door.admin)  # held until its futures end: a client collected first cancels them
    user, other, tag = f"u{uuid.uuid4().hex[:8]}", f"o{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    seen, hidden = f"rx-{tag}-seen", f"rx-{tag}-hidden"
    _make_user(admin, user, "right")
    for topic in (seen, hidden):
        _make_topic(admin, topic)
    _create_acls(
        admin,
        _binding(f"User:{user}", seen, AclOperation.READ),  # READ implies DESCRIBE
        _binding(f"User:{other}", hidden, AclOperation.READ),  # the hidden topic is ACL-governed on both
        AclBinding(
            ResourceType.GROUP, f"rx-{tag}", ResourcePatternType.PREFIXED, f"User:{user}", "*",
            AclOperation.READ, AclPermissionType.ALLOW,
        ),
    )  # fmt: skip
    settings = door.login(user, "right")
    consumers: list[Consumer] = []

    def consumer(group: str, login: dict[str, Any], topics: list[str]) -> Consumer:
        made = Consumer(
            {**login, "group.id": group, "group.protocol": "consumer", "enable.auto.commit": False}
        )
        made.subscribe(topics)
        consumers.append(made)
        return made

    def assigned(member: Consumer, wanted: set[tuple[str, int]]) -> Callable[[], bool]:
        def check() -> bool:
            member.poll(0.2)
            return {(tp.topic, tp.partition) for tp in member.assignment()} == wanted

        return check

    def refused(member: Consumer) -> bool:
        message = member.poll(0.5)
        return (
            message is not None
            and message.error() is not None
            and message.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        )

    try:
        peek = consumer(f"rx-{tag}-peek", settings, [f"^rx-{tag}-.*"])
        _until(assigned(peek, {(seen, 0)}), f"{user}'s regex was never assigned {seen} alone")
        named = consumer(f"rx-{tag}-named", settings, [hidden])
        _until(lambda: refused(named), f"{user}'s subscription to {hidden} was never refused")
        holder = consumer(f"rx-{tag}-shared", door.admin, [hidden])
        _until(assigned(holder, {(hidden, 0)}), f"the super user's consumer was never assigned {hidden}")
        as_user = AdminClient(settings)

        def described_hidden() -> bool:
            future = as_user.describe_consumer_groups([f"rx-{tag}-shared"], request_timeout=30)
            try:
                next(iter(future.values())).result(30)
            except KafkaException as failed:
                return bool(failed.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED)
            return False

        _until(described_hidden, f"the group holding {hidden} was described to {user}")
    finally:
        for member in consumers:
            member.close()
