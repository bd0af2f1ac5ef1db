"""Authentication on every door of a real 3-node ``raftlog dev --secure`` cluster (TLS, ``--require-auth``,
``--enforce-acls``, an admin user who is every node's super user; the users here are granted what they
use, ACLs themselves are ``test_acl_clients.py``'s), tried with clients of other authors: confluent-kafka over
SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (idempotent produce, a group consume), kafka-python
over SASL_SSL with SCRAM, Apache Kafka's Java client (kafka-clients) over SASL_SSL with SCRAM-SHA-512 and
refused on a topic its ACLs leave out, kcat with SASL, curl with HTTP Basic, and the hints ``raftlog dev``
prints, run as printed. Refused, with words that do not say whether the user exists: a wrong password, an
unknown user, no credentials (a Metadata before SASL closes the connection), a user deleted or given a new
password (from the next connection on). Users made through confluent-kafka's AdminClient
(AlterUserScramCredentials, a super user's call only) log in over Kafka and HTTP alike."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import ssl
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from java_client import JavaClient, scram_settings
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.sasl import failure_message
from raftlog_client.local_cluster import LocalCluster
from raftlog_dev.hints import HINTS_TOPIC
from tests.waiting import wait_for

PATIENCE_S = 15.0  # a user made on one node reaches the others' controller metadata within it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("secure")
    with LocalCluster(str(directory), nodes=3, dev_args=["--secure"]) as running:
        yield running


def curl(cluster: LocalCluster, *argv: str) -> tuple[int, str]:
    """HTTP status and body of one curl call trusting the cluster's CA."""
    command = ["curl", "-sS", "--max-time", "20", "--cacert", cluster.security["ca"], "-w", "\n%{http_code}"]
    done = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=60)
    body, _, status = done.stdout.rpartition("\n")
    return int(status or 0), body


def as_admin(cluster: LocalCluster, method: str, path: str, body: object = None) -> tuple[int, str]:
    argv = [
        "-X",
        method,
        cluster.servers[0] + path,
        "-H",
        f"Authorization: Bearer {cluster.security['admin_token']}",
    ]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    return curl(cluster, *argv)


def new_topic(cluster: LocalCluster, partitions: int = 1) -> str:
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    status, body = as_admin(cluster, "POST", "/v1/topics", {"name": topic, "partitions": partitions})
    assert status == 201, body
    return topic


def http_login(cluster: LocalCluster, url: str, user: str, password: str) -> int:
    return curl(cluster, f"{url}/topics", "-u", f"{user}:{password}")[0]


def until_every_node(cluster: LocalCluster, user: str, password: str, status: int) -> None:
    """Wait until every node answers ``status`` to the user over HTTP Basic (its controller metadata has
    the change)."""
    waiting = list(cluster.servers)  # a node that answered is not asked again

    def answered() -> bool:
        while waiting and http_login(cluster, waiting[0], user, password) == status:
            waiting.pop(0)
        return not waiting

    wait_for(answered, f"every node answering {status} to {user} over HTTP Basic", PATIENCE_S)


def make_user(cluster: LocalCluster, name: str, password: str) -> None:
    status, body = as_admin(cluster, "POST", "/v1/users", {"name": name, "password": password})
    assert status == 200, body
    until_every_node(cluster, name, password, 200)


def grant(cluster: LocalCluster, *acls: dict[str, Any]) -> None:
    """Add ACLs through ``/v1/acls`` and wait until every node has applied them."""
    status, body = as_admin(cluster, "POST", "/v1/acls", {"acls": list(acls)})
    assert status == 200, body
    wanted = [{"pattern_type": "literal", "host": "*", "permission": "allow", **acl} for acl in acls]
    waiting = list(cluster.servers)  # a node that applied them is not asked again

    def applied(url: str) -> bool:
        status, listed = curl(
            cluster, f"{url}/v1/acls", "-H", f"Authorization: Bearer {cluster.security['admin_token']}"
        )
        return status == 200 and all(acl in json.loads(listed)["acls"] for acl in wanted)

    def everywhere() -> bool:
        while waiting and applied(waiting[0]):
            waiting.pop(0)
        return not waiting

    wait_for(everywhere, f"every node having applied the ACLs {acls}", PATIENCE_S, every_s=0.1)


def grant_everything(cluster: LocalCluster, user: str) -> None:
    """Every operation on every topic and group (not the cluster's: only super users manage users)."""
    grant(
        cluster,
        *({"resource_type": kind, "name": "*", "principal": f"User:{user}", "operation": "all"}
          for kind in ("topic", "group")),
    )  # fmt: skip


def sasl(cluster: LocalCluster, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, Any]:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": cluster.security["ca"],
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def admin_client(cluster: LocalCluster, user: str | None = None, password: str | None = None) -> AdminClient:
    user = user or cluster.security["user"]
    return AdminClient(sasl(cluster, user, password or cluster.security["password"]))


def refused(settings: dict[str, Any]) -> list[KafkaError]:
    """The errors a client with ``settings`` reports on its way to a refusal (its Metadata fails). The
    refusal shows in those errors (an authentication error names it), so the Metadata is given one second:
    it only has to start the connection, whose failure is then awaited."""
    errors: list[KafkaError] = []
    admin = AdminClient({**settings, "error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=1)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        admin.poll(0.5)
    return errors


def authentication_errors(errors: list[KafkaError]) -> list[str]:
    return [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]


def lets_in(settings: dict[str, Any]) -> bool:
    try:
        AdminClient(settings).list_topics(timeout=10)
    except KafkaException:
        return False
    return True


def produce_and_consume(settings: dict[str, Any], topic: str) -> list[bytes]:
    """Five records through an idempotent producer, read back by a group member."""
    producer = Producer({**settings, "enable.idempotence": True})
    delivered: list[object] = []
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda e, m: delivered.append(e or m.offset()))
    assert producer.flush(30) == 0
    assert delivered == [0, 1, 2, 3, 4]
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(values) < 5 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


# -- raftlog dev --secure --------------------------------------------------------------------------------


def test_cluster_json_names_the_ca_the_user_and_its_password_readable_by_its_owner_only(
    cluster: LocalCluster,
) -> None:
    path = pathlib.Path(cluster.directory) / "cluster.json"
    described = json.loads(path.read_text())
    security = described["security"]
    assert set(security) == {"ca", "user", "password", "admin_token"}
    assert security["user"] == "admin" and len(security["password"]) >= 20
    assert security["ca"] == described["tls"]["ca"] and os.path.isfile(security["ca"])
    for private in (path, pathlib.Path(cluster.directory) / "security.json"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    for node in described["nodes"]:
        argv = node["argv"]
        assert "--require-auth" in argv and argv[argv.index("--super-user") + 1] == "admin"
        assert node["http"].startswith("https://")
    assert http_login(cluster, cluster.servers[0], "admin", "not the password") == 401


def test_the_printed_hints_work_as_printed(cluster: LocalCluster) -> None:
    text = pathlib.Path(cluster.dev_log).read_text()
    printed = text[text.rindex("up; cluster.json") :].splitlines()[1:]
    hints = [line.strip() for line in printed if line.startswith("  ")]
    assert any(h.startswith("curl") for h in hints) and any(h.startswith("kcat") for h in hints)
    # as a user runs them: from the directory raftlog dev ran in, the .venv not on the PATH
    venv = str(pathlib.Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv)
    env = {**os.environ, "PATH": path}
    outputs = []
    for hint in hints:
        if " dev restart " in hint:
            continue  # it would restart n3; the supervisor's commands are tested in tests/raftlog_dev/
        done = subprocess.run(["bash", "-c", hint], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, (hint, done.stdout, done.stderr)
        outputs.append(done.stdout)
    created, produced, fetched, listed, kcat_read, confluent, consumed, status = outputs
    assert json.loads(created)["name"] == HINTS_TOPIC  # not the tour's "orders", which the README creates
    assert json.loads(produced)["offsets"][0]["error_code"] is None
    assert [r["value"] for r in json.loads(fetched)] == [{"hello": "world"}]
    assert "3 brokers" in listed and f'topic "{HINTS_TOPIC}"' in listed
    assert "hello" in kcat_read.splitlines(), kcat_read  # what kcat produced, read back by kcat
    assert re.fullmatch(r"\[b'.+'\]\n", confluent), confluent  # a record, read by a confluent-kafka group
    assert "hello" in consumed, consumed  # the raftlog command over HTTPS, trusting the CA with --ca
    assert "n1" in status


# -- Kafka clients over SASL ------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_produces_idempotently_and_consumes_in_a_group_over_sasl_ssl(
    cluster: LocalCluster, mechanism: str
) -> None:
    user = f"cf-{mechanism.lower()}"
    make_user(cluster, user, f"{user}'s password")
    grant_everything(cluster, user)
    topic = new_topic(cluster)
    settings = sasl(cluster, user, f"{user}'s password", mechanism)
    assert produce_and_consume(settings, topic) == [b"v0", b"v1", b"v2", b"v3", b"v4"]


def test_kafka_python_over_sasl_ssl_with_scram(cluster: LocalCluster) -> None:
    make_user(cluster, "kp", "kafka-python's password")
    grant_everything(cluster, "kp")
    topic = new_topic(cluster)
    settings = {
        "bootstrap_servers": cluster.bootstrap_servers.split(","),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": cluster.security["ca"],
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "kp",
        "sasl_plain_password": "kafka-python's password",
    }
    producer = KafkaProducer(**settings)
    try:
        offsets = [producer.send(topic, b"kp%d" % i).get(30).offset for i in range(3)]
    finally:
        producer.close()
    assert offsets == [0, 1, 2]
    consumer = KafkaConsumer(**settings, consumer_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = [message.value for _, message in zip(range(3), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [b"kp0", b"kp1", b"kp2"]


def test_the_java_client_over_sasl_ssl_with_scram_sha_512_and_refused_where_acls_say(
    cluster: LocalCluster, java_client: JavaClient
) -> None:
    make_user(cluster, "java", "the reference client's password")
    prefix = f"java-{uuid.uuid4().hex[:6]}-"
    grant(
        cluster,
        {"resource_type": "topic", "name": prefix, "pattern_type": "prefixed", "principal": "User:java",
         "operation": "all"},
    )  # fmt: skip
    settings = scram_settings(
        cluster.bootstrap_servers, cluster.security["ca"], "java", "the reference client's password",
        "SCRAM-SHA-512",
    )  # fmt: skip
    observed = java_client("produce-consume", settings, prefix + "mine", "zstd")
    assert observed == {"dense_offsets_from_0": True, "read": 300, "read_as_written": True}
    assert java_client("refused-topic", settings, new_topic(cluster)) == {
        "produce": "TopicAuthorizationException"
    }
    assert java_client("login", settings, "-") == {"describe_cluster": "ok"}, "no ACL needed, as on Kafka"
    wrong = {**settings, **scram_settings(cluster.bootstrap_servers, cluster.security["ca"], "java", "guess",
                                          "SCRAM-SHA-512")}  # fmt: skip
    assert java_client("login", wrong, "-") == {"describe_cluster": "SaslAuthenticationException"}


def test_kcat_with_sasl(cluster: LocalCluster) -> None:
    make_user(cluster, "kc", "kcat's password")
    grant_everything(cluster, "kc")
    topic = new_topic(cluster)
    settings = sasl(cluster, "kc", "kcat's password", "SCRAM-SHA-512")
    args = [a for k, v in settings.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]

    def kcat(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [shutil.which("kcat") or "kcat", "-b", cluster.bootstrap_servers, *args, *argv],
            input=stdin, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    listed = kcat("-L", "-t", topic)
    assert listed.returncode == 0 and "3 brokers" in listed.stdout, listed.stderr
    assert kcat("-P", "-t", topic, "-K:", stdin="a:1\nb:2\n").returncode == 0
    read = kcat("-C", "-t", topic, "-e", "-f", "%k=%s\\n")
    assert read.returncode == 0 and read.stdout.split() == ["a=1", "b=2"], read.stderr
    wrong = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, *args[:-2], "-X", "sasl.password=wrong", "-L", "-m", "5"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert wrong.returncode != 0 and "Authentication failed" in wrong.stderr


# -- refused --------------------------------------------------------------------------------------------


def test_a_wrong_password_and_an_unknown_user_are_refused_alike(cluster: LocalCluster) -> None:
    make_user(cluster, "grace", "grace's password")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"):
        wrong = authentication_errors(refused(sasl(cluster, "grace", "not it", mechanism)))
        unknown = authentication_errors(refused(sasl(cluster, "nobody", "not it", mechanism)))
        told = failure_message(mechanism)
        assert wrong and all(told in e for e in wrong), wrong
        assert unknown and all(told in e for e in unknown), unknown
        assert not any("grace" in e or "nobody" in e for e in wrong + unknown)


def test_without_credentials_only_api_versions_and_sasl_are_served(cluster: LocalCluster) -> None:
    no_sasl = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "ssl",
        "ssl.ca.location": cluster.security["ca"],
    }
    assert not lets_in(no_sasl)
    context = ssl.create_default_context(cafile=cluster.security["ca"])
    metadata = wire.request_class(3, 8)
    raw = RawKafka(cluster.kafka["n1"], context)
    try:
        versions = raw.call(18, 3, wire.build(wire.request_class(18, 3), client_software_name="raw",
                                              client_software_version="1"))  # fmt: skip
        assert versions.error_code is ErrorCode.none and {17, 36} <= {k.api_key for k in versions.api_keys}
        raw.send_raw(raw.frame(3, 8, wire.build(metadata, topics=None, allow_auto_topic_creation=False,
                                                include_cluster_authorized_operations=False,
                                                include_topic_authorized_operations=False)))  # fmt: skip
        assert raw.closed_by_server(), "a Metadata before SASL closes the connection"
    finally:
        raw.close()


def _handshake(raw: RawKafka, mechanism: str, version: int = 1) -> Any:
    return raw.call(17, version, wire.build(wire.request_class(17, version), mechanism=mechanism))


def _authenticate(raw: RawKafka, token: bytes) -> Any:
    return raw.call(36, 2, wire.build(wire.request_class(36, 2), auth_bytes=token))


def test_the_sasl_exchange_refuses_what_is_out_of_turn_and_closes(cluster: LocalCluster) -> None:
    make_user(cluster, "heidi", "heidi's password")
    context = ssl.create_default_context(cafile=cluster.security["ca"])
    address = cluster.kafka["n2"]

    def connection() -> RawKafka:
        return RawKafka(address, context)

    raw = connection()  # authenticate before the handshake
    answer = _authenticate(raw, b"\0heidi\0heidi's password")
    assert answer.error_code is ErrorCode.illegal_sasl_state and raw.closed_by_server()
    raw = connection()  # a mechanism not offered
    answer = _handshake(raw, "GSSAPI")
    assert answer.error_code is ErrorCode.unsupported_sasl_mechanism
    assert answer.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and raw.closed_by_server()
    raw = connection()  # v0: raw SASL tokens would follow, which the listener does not read
    assert _handshake(raw, "PLAIN", 0).error_code is ErrorCode.unsupported_version and raw.closed_by_server()
    raw = connection()  # a wrong password
    assert _handshake(raw, "PLAIN").error_code is ErrorCode.none
    answer = _authenticate(raw, b"\0heidi\0wrong")
    assert answer.error_code is ErrorCode.sasl_authentication_failed
    assert answer.error_message == failure_message("PLAIN") and raw.closed_by_server()
    raw = connection()  # a garbled SCRAM message
    assert _handshake(raw, "SCRAM-SHA-256").error_code is ErrorCode.none
    answer = _authenticate(raw, b"p=tls-unique,,n=heidi,r=abc")
    assert answer.error_code is ErrorCode.sasl_authentication_failed and raw.closed_by_server()
    raw = connection()  # let in: the connection is served, and a second authentication is refused
    try:
        assert _handshake(raw, "PLAIN").error_code is ErrorCode.none
        assert _authenticate(raw, b"\0heidi\0heidi's password").error_code is ErrorCode.none
        metadata = wire.request_class(3, 8)
        answer = raw.call(3, 8, wire.build(metadata, topics=None, allow_auto_topic_creation=False,
                                           include_cluster_authorized_operations=False,
                                           include_topic_authorized_operations=False))  # fmt: skip
        assert len(answer.brokers) == 3
        assert _handshake(raw, "PLAIN").error_code is ErrorCode.illegal_sasl_state
        assert raw.call(3, 8, wire.build(metadata, topics=None, allow_auto_topic_creation=False,
                                         include_cluster_authorized_operations=False,
                                         include_topic_authorized_operations=False)).brokers  # fmt: skip
    finally:
        raw.close()


def test_a_new_password_or_a_deleted_user_is_refused_from_the_next_connection_on(
    cluster: LocalCluster,
) -> None:
    make_user(cluster, "ivan", "first")
    assert lets_in(sasl(cluster, "ivan", "first", "SCRAM-SHA-512"))
    status, body = as_admin(cluster, "POST", "/v1/users", {"name": "ivan", "password": "second"})
    assert status == 200, body
    until_every_node(cluster, "ivan", "first", 401)
    assert authentication_errors(refused(sasl(cluster, "ivan", "first", "SCRAM-SHA-512")))
    assert lets_in(sasl(cluster, "ivan", "second", "SCRAM-SHA-512"))
    assert as_admin(cluster, "DELETE", "/v1/users/ivan")[0] == 204
    until_every_node(cluster, "ivan", "second", 401)
    assert authentication_errors(refused(sasl(cluster, "ivan", "second", "SCRAM-SHA-512")))


def test_a_users_api_token_stands_in_for_its_password_over_plain_and_basic(cluster: LocalCluster) -> None:
    """As Confluent Cloud takes an API key and its secret: SASL/PLAIN and HTTP Basic take the user's name
    and one of its tokens for the password; not another user's, not over SCRAM (whose proof is made from
    the password's salted hash), and not once revoked."""
    make_user(cluster, "kate", "kate's password")
    make_user(cluster, "liam", "liam's password")
    status, body = as_admin(cluster, "POST", "/v1/users/kate/tokens", {"description": "a client"})
    assert status == 201, body
    made = json.loads(body)
    token = made["token"]
    wait_for(  # every node has the token
        lambda: lets_in(sasl(cluster, "kate", token, "PLAIN")),
        "kate let in by her token over SASL/PLAIN",
        PATIENCE_S,
    )
    until_every_node(cluster, "kate", token, 200)  # HTTP Basic kate:<token>
    told = failure_message("PLAIN")
    assert all(told in e for e in authentication_errors(refused(sasl(cluster, "liam", token, "PLAIN"))))
    assert authentication_errors(refused(sasl(cluster, "kate", token, "SCRAM-SHA-256")))
    assert http_login(cluster, cluster.servers[0], "liam", token) == 401

    assert as_admin(cluster, "DELETE", f"/v1/users/kate/tokens/{made['id']}")[0] == 204
    until_every_node(cluster, "kate", token, 401)
    assert authentication_errors(refused(sasl(cluster, "kate", token, "PLAIN")))
    assert lets_in(sasl(cluster, "kate", "kate's password", "PLAIN")), "the password still works"


def _plain_login(cluster: LocalCluster, user: str, password: str) -> RawKafka:
    """A raw connection to the first node authenticated over SASL/PLAIN."""
    context = ssl.create_default_context(cafile=cluster.security["ca"])
    raw = RawKafka(cluster.bootstrap_servers.split(",")[0], context)
    assert _handshake(raw, "PLAIN").error_code is ErrorCode.none
    assert _authenticate(raw, f"\0{user}\0{password}".encode()).error_code is ErrorCode.none
    return raw


def test_a_revoked_token_or_a_deleted_user_cuts_the_connections_it_authenticated(
    cluster: LocalCluster,
) -> None:
    """What KIP-368's re-authentication is for, without it: the listener re-checks each connection's
    credential at every request and every second. A producer authenticated with a token that is then
    revoked has its next produce fail (its connection cut, a new one refused), and a connection of a user
    then deleted is closed within seconds without sending anything."""
    make_user(cluster, "mona", "mona's password")
    grant_everything(cluster, "mona")
    topic = new_topic(cluster)
    status, body = as_admin(cluster, "POST", "/v1/users/mona/tokens", {"description": "revoked below"})
    assert status == 201, body
    made = json.loads(body)
    wait_for(  # every node has the token
        lambda: lets_in(sasl(cluster, "mona", made["token"], "PLAIN")), "mona let in by her token", PATIENCE_S
    )
    errors: list[KafkaError] = []
    settings = {**sasl(cluster, "mona", made["token"], "PLAIN"), "error_cb": errors.append}
    producer = Producer({**settings, "message.timeout.ms": 10_000})
    delivered: list[object] = []
    producer.produce(topic, b"before", on_delivery=lambda e, m: delivered.append(e or m.offset()))
    assert producer.flush(30) == 0 and delivered == [0]

    assert as_admin(cluster, "DELETE", f"/v1/users/mona/tokens/{made['id']}")[0] == 204
    until_every_node(cluster, "mona", made["token"], 401)
    producer.produce(topic, b"after", on_delivery=lambda e, m: delivered.append(e or m.offset()))
    producer.flush(30)
    assert len(delivered) == 2 and isinstance(delivered[1], KafkaError), f"delivered {delivered}"
    assert authentication_errors(errors), "its connection was cut and logging in again is refused"

    raw = _plain_login(cluster, "mona", "mona's password")
    assert as_admin(cluster, "DELETE", "/v1/users/mona")[0] == 204
    until_every_node(cluster, "mona", "mona's password", 401)
    raw.sock.settimeout(10)
    assert raw.closed_by_server(), "the deleted user's idle connection is closed within seconds"
    raw.close()


# -- SCRAM credentials through Kafka's admin APIs ------------------------------------------------------------


def _result(future: Any) -> str | None:
    """None when the future succeeded, else its error's text."""
    try:
        future.result(30)
    except KafkaException as exc:
        return str(exc)
    return None


def test_a_super_user_manages_scram_credentials_and_the_user_made_logs_in_everywhere(
    cluster: LocalCluster,
) -> None:
    admin = admin_client(cluster)
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    made = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("judy", sha512, b"judy's password")]
    )
    assert _result(made["judy"]) is None
    described = admin.describe_user_scram_credentials(["judy"])["judy"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    until_every_node(cluster, "judy", "judy's password", 200)  # HTTP Basic, checked against that credential
    grant_everything(cluster, "judy")
    topic = new_topic(cluster)
    judy = sasl(cluster, "judy", "judy's password", "SCRAM-SHA-512")
    assert produce_and_consume(judy, topic) == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert authentication_errors(refused(sasl(cluster, "judy", "judy's password", "SCRAM-SHA-256")))

    everyone = admin.describe_user_scram_credentials().result(30)
    assert {"admin", "judy"} <= set(everyone)

    # refusals, each for its user only, changing nothing
    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    answers = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("judy", ScramMechanism.SCRAM_SHA_256),  # she has none
        UserScramCredentialUpsertion("kim", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw"),
        UserScramCredentialUpsertion("lee", sha256, b"pw"),
        UserScramCredentialDeletion("lee", ScramMechanism.SCRAM_SHA_256),  # the same mechanism twice
    ])  # fmt: skip
    assert "RESOURCE_NOT_FOUND" in (_result(answers["judy"]) or "")
    assert "UNACCEPTABLE_CREDENTIAL" in (_result(answers["kim"]) or "")
    assert "DUPLICATE_RESOURCE" in (_result(answers["lee"]) or "")
    unknown = admin.describe_user_scram_credentials(["kim"])["kim"]
    assert "RESOURCE_NOT_FOUND" in (_result(unknown) or "")

    # a user who is not a super user may not
    judy_admin = AdminClient(judy)
    denied = judy_admin.alter_user_scram_credentials([UserScramCredentialUpsertion("mia", sha256, b"pw")])
    assert "CLUSTER_AUTHORIZATION_FAILED" in (_result(denied["mia"]) or "")
    assert "CLUSTER_AUTHORIZATION_FAILED" in (_result(judy_admin.describe_user_scram_credentials()) or "")
    named = judy_admin.describe_user_scram_credentials(["judy"])["judy"]
    assert "CLUSTER_AUTHORIZATION_FAILED" in (_result(named) or "")

    # deleting her last credential deletes her
    gone = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("judy", ScramMechanism.SCRAM_SHA_512)]
    )
    assert _result(gone["judy"]) is None
    until_every_node(cluster, "judy", "judy's password", 401)
    assert "RESOURCE_NOT_FOUND" in (_result(admin.describe_user_scram_credentials(["judy"])["judy"]) or "")
