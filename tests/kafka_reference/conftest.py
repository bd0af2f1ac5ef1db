"""Apache Kafka beside raftlog for the tests of this folder: both clusters (3 nodes, replication factor
3; Kafka with its authorizer, a resource open to all until an ACL names it) once for the run, Kafka's own
Java client (``java_client.py``) and a Go client (franz-go, ``go/``).

A test marked ``kafka_answer`` has its Kafka case (``system`` = ``"kafka"``) answered from
``kafka_answers.json`` while Kafka passed it as it is now, and run live (and recorded) otherwise; a test
that compares raftlog's outcome with Kafka's in one case takes Kafka's through ``kafka_outcome``, replayed
the same way: ``kafka_answers.py``. Kafka's cluster starts the first time a test asks for it, so a run whose
every Kafka side is replayed starts no JVM for it."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kafka_api"))  # kafka_fixtures

import folder_scope
from go_client import build_go_client
from java_client import JavaClient
from kafka_answers import STASH, answers_of, key

from raftlog_bench.kafka_peer import KAFKA_VERSION, SHORT_LIVED, KafkaCluster
from raftlog_client.local_cluster import LocalCluster


class Systems:
    """Both clusters of the run: raftlog's, and Apache Kafka's, started the first time a test asks for it
    (``kafka``, ``servers()["kafka"]``); their bootstrap servers, and a node of either killed and
    restarted."""

    def __init__(self, raftlog: LocalCluster, start_kafka: Callable[[], KafkaCluster]) -> None:
        self.raftlog = raftlog
        self._start_kafka = start_kafka
        self._kafka: KafkaCluster | None = None

    @property
    def kafka(self) -> KafkaCluster:
        if self._kafka is None:
            self._kafka = self._start_kafka()
        return self._kafka

    def servers(self) -> Mapping[str, str]:
        return _Servers(self, sasl=False)

    def sasl_servers(self) -> Mapping[str, str]:
        """Where a client logs in with SASL (SCRAM) over plaintext: raftlog offers SASL on its Kafka
        listeners without ``--require-auth``; Kafka has a SASL_PLAINTEXT listener of its own."""
        return _Servers(self, sasl=True)

    def kill(self, system: str, broker_id: int) -> None:
        """SIGKILL the node with that broker id (raftlog's ``n<id>``)."""
        if system == "kafka":
            self.kafka.kill(broker_id - 1)
        else:
            self.raftlog.control("stop", f"n{broker_id}", kill=True)

    def restart(self, system: str, broker_id: int) -> None:
        if system == "kafka":
            self.kafka.restart(broker_id - 1)
        else:
            self.raftlog.control("start", f"n{broker_id}")


class _Servers(Mapping[str, str]):
    """Each system's bootstrap servers by name, Kafka's cluster started only once its servers are read."""

    def __init__(self, systems: Systems, sasl: bool) -> None:
        self._systems = systems
        self._sasl = sasl

    def __getitem__(self, system: str) -> str:
        if system == "raftlog":
            return self._systems.raftlog.bootstrap_servers
        if system == "kafka":
            kafka = self._systems.kafka
            return kafka.sasl_bootstrap_servers if self._sasl else kafka.bootstrap_servers
        raise KeyError(system)

    def __iter__(self) -> Iterator[str]:
        return iter(("raftlog", "kafka"))

    def __len__(self) -> int:
        return 2


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_answer: the test's Kafka case is answered from tests/kafka_reference/kafka_answers.json "
        "while Kafka passed it as it is now (make kafka-answers runs every one live)",
    )


ANSWER_KEY = pytest.StashKey[str]()


@pytest.fixture(autouse=True)
def _kafka_answer(request: pytest.FixtureRequest) -> None:
    """A ``kafka_answer`` test's Kafka case: replayed (skipped, Kafka passed it as it is now) or run live
    under the key its pass is recorded with (``pytest_runtest_makereport``)."""
    node = request.node
    callspec = getattr(node, "callspec", None)
    if node.get_closest_marker("kafka_answer") is None or callspec is None:
        return
    if callspec.params.get("system") != "kafka":
        return
    answer_key = key(pathlib.Path(node.path), node.originalname, callspec.id)
    if answers_of(request.config).passed(node.nodeid, answer_key):
        pytest.skip(f"Apache Kafka {KAFKA_VERSION} passed this test as it is now (kafka_answers.json)")
    node.stash[ANSWER_KEY] = answer_key


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" and report.passed and ANSWER_KEY in item.stash:
        answers_of(item.config).recorded(item.nodeid, item.stash[ANSWER_KEY])
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    if STASH in session.config.stash:
        answers_of(session.config).save()


# The folder's files share both systems (``file_costs.SHARED_SESSION_FOLDERS`` gives the folder to one
# worker whole) until the run leaves the folder (``folder_scope``).
@pytest.fixture(scope="module")
def systems(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Systems:
    return folder_scope.shared(request, lambda: _systems(tmp_path_factory))


def _systems(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Systems]:
    started: list[KafkaCluster] = []

    def start_kafka() -> KafkaCluster:
        kafka = KafkaCluster(
            str(tmp_path_factory.mktemp("apache-kafka")), authorizer=True, performance=SHORT_LIVED
        )
        started.append(kafka)
        kafka.start()
        return kafka

    try:
        # as the Kafka peer: no automatic topic creation (auto.create.topics.enable=false)
        directory = str(tmp_path_factory.mktemp("raftlog"))
        with LocalCluster(directory, nodes=3, dev_args=["--no-auto-create-topics"]) as raftlog:
            yield Systems(raftlog, start_kafka)
    finally:
        for kafka in started:
            kafka.stop()


@pytest.fixture(scope="module")
def servers(systems: Systems) -> Mapping[str, str]:
    """Bootstrap servers of both systems."""
    return systems.servers()


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory) -> JavaClient:
    return JavaClient(tmp_path_factory.mktemp("java-client"))


@pytest.fixture(scope="session")
def go_client(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict[str, Any]]:
    """``go_client(scenario, bootstrap, topic, argument="")``: what franz-go's scenario observed (its RESULT
    line), from ``go/main.go`` built once per run (``go_client.py``)."""
    binary = build_go_client(tmp_path_factory.mktemp("go-client"))

    def run(scenario: str, bootstrap: str, topic: str, argument: str = "") -> dict[str, Any]:
        done = subprocess.run(
            [str(binary), scenario, bootstrap, topic, argument], capture_output=True, text=True, timeout=300
        )
        results = [line[len("RESULT ") :] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        assert done.returncode == 0 and results, (
            f"{scenario} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
        found: dict[str, Any] = json.loads(results[-1])
        return found

    return run
