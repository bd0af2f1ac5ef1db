"""Apache Kafka beside raftlog: a 3-broker KRaft cluster on loopback, started from the jars
``scripts/kafka/install.sh`` copies from Maven Central, and the admin calls the benchmark makes of it.

Each node is a combined broker and controller (``process.roles=broker,controller``, a static quorum of
the three), with the settings a production cluster of three brokers is given: replication factor 3,
``min.insync.replicas=2``, the internal topics replicated 3 ways, no automatic topic creation, and heaps
sized for this 2-core machine (``-Xmx768m`` each; ``$KAFKA_HEAP_OPTS`` and ``$KAFKA_JVM_PERFORMANCE_OPTS``
replace the heap and the collector, as in Kafka's own start scripts). Kafka acknowledges a write once the
in-sync replicas have it in their page cache (its default); ``flush_each=True`` adds
``log.flush.interval.messages=1``, so every record is fsynced before it is acknowledged, as raftlog does.
The cluster's data, configs and logs live in the directory it is given; ``stop`` ends the JVMs by their
PIDs (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import base64
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence

from raftlog_bench.processes import PeerMissing, free_ports, stop_processes
from raftlog_bench.targets import Layout

ROOT = pathlib.Path(__file__).resolve().parent.parent
POM = ROOT / "scripts" / "kafka" / "pom.xml"  # the one setting of the reference's version: <kafka.version>
CONNECT_POM = ROOT / "scripts" / "kafka" / "connect" / "pom.xml"  # Kafka Connect's own: <connect.version>


def pom_version(pom: pathlib.Path, property_name: str) -> str:
    """The version a pom of scripts/kafka/ sets in ``property_name``, read as install.sh reads it."""
    found = re.search(rf"<{re.escape(property_name)}>([^<]+)</{re.escape(property_name)}>", pom.read_text())
    if found is None:
        raise ValueError(f"{pom} names no <{property_name}>")
    return found.group(1).strip()


KAFKA_VERSION = pom_version(POM, "kafka.version")
CONNECT_VERSION = pom_version(CONNECT_POM, "connect.version")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
HEAP = ("-Xms256m", "-Xmx768m")  # a broker's, unless $KAFKA_HEAP_OPTS says otherwise
PERFORMANCE = ("-XX:+UseG1GC",)  # a broker's, unless $KAFKA_JVM_PERFORMANCE_OPTS says otherwise
# The storage tool formats a node's directory before its first start and is done in seconds: the JIT's
# first tier and the serial collector run it on about half the CPU of a broker's options.
TOOL_JVM = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# A broker that lives for a test, not a measurement (the suite's, as $KAFKA_JVM_PERFORMANCE_OPTS or
# ``KafkaCluster(performance=...)``): the same first tier and collector, a third less CPU per broker.
SHORT_LIVED = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
NODES = 3


def kafka_libs() -> pathlib.Path:
    """The jars of Apache Kafka as scripts/kafka/install.sh leaves them; PeerMissing when absent."""
    libs = pathlib.Path(
        os.environ.get("RAFTLOG_KAFKA_LIBS", ROOT / ".peers" / f"kafka-{KAFKA_VERSION}" / "libs")
    )
    if not (libs / ".complete").exists() and not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        raise PeerMissing(f"Apache Kafka {KAFKA_VERSION} is not installed: run scripts/kafka/install.sh")
    return libs


def connect_libs() -> pathlib.Path:
    """Kafka Connect's worker and FileStream connectors as scripts/kafka/install.sh leaves them."""
    libs = ROOT / ".peers" / f"kafka-connect-{CONNECT_VERSION}" / "libs"
    if not (libs / ".complete").exists():
        raise PeerMissing(f"Kafka Connect {CONNECT_VERSION} is not installed: run scripts/kafka/install.sh")
    return libs


def kafka_check() -> None:
    """Before a run: the jars are there (PeerMissing) and Kafka's variables read as options (ValueError)."""
    kafka_libs()
    broker_jvm_options()


def broker_jvm_options(
    performance: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ
) -> list[str]:
    """A broker's heap and performance options: ours, or what ``$KAFKA_HEAP_OPTS`` and
    ``$KAFKA_JVM_PERFORMANCE_OPTS`` say, each replacing its half as Kafka's ``kafka-run-class.sh`` has it;
    ``performance``, when given, replaces the second whatever the environment says."""
    heap = _options(environ, "KAFKA_HEAP_OPTS") or list(HEAP)
    if performance is None:
        performance = _options(environ, "KAFKA_JVM_PERFORMANCE_OPTS") or PERFORMANCE
    return [*heap, *performance]


def _options(environ: Mapping[str, str], name: str) -> list[str]:
    try:
        return shlex.split(environ.get(name, ""))
    except ValueError as exc:  # an unclosed quote
        raise ValueError(f"${name} cannot be read as JVM options ({exc}): {environ[name]!r}") from None


def node_properties(
    node_id: int,
    broker_port: int,
    controller_ports: list[int],
    data: str,
    flush_each: bool,
    sasl_port: int,
    authorizer: bool = False,
) -> str:
    voters = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(controller_ports))
    controller_port = controller_ports[node_id - 1]
    lines = [
        "process.roles=broker,controller",
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        f"listeners=PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port},"
        f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{broker_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        # clients may also log in with SCRAM (users made with AlterUserScramCredentials), as on raftlog
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={data}",
        "num.partitions=1",
        "default.replication.factor=3",
        "min.insync.replicas=2",
        "offsets.topic.replication.factor=3",
        "transaction.state.log.replication.factor=3",
        "transaction.state.log.min.isr=2",
        "share.coordinator.state.topic.replication.factor=3",
        "share.coordinator.state.topic.min.isr=2",
        "share.coordinator.state.topic.num.partitions=3",  # not 50: the first share group starts sooner
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
        "delete.topic.enable=true",
        "num.network.threads=2",
        "num.io.threads=4",
    ]
    if flush_each:
        lines.append("log.flush.interval.messages=1")  # fsync before acknowledging, as raftlog does
    if authorizer:  # ACLs decide for SASL users; PLAINTEXT (ANONYMOUS: admin, brokers) is a super user
        lines += [
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS",
            "allow.everyone.if.no.acl.found=true",  # a resource without ACLs stays open, as without one
        ]
    return "\n".join(lines) + "\n"


def log_config(path: str, info_from: tuple[str, ...] = ()) -> str:
    """log4j2: warnings and worse into the process's own file, and information too from the loggers named
    in ``info_from`` (a Connect worker's own)."""
    lines = [
        "status = error",
        "appender.file.type = File",
        "appender.file.name = file",
        f"appender.file.fileName = {path}",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.file.ref = file",
    ]
    for index, name in enumerate(info_from):
        lines += [f"logger.info{index}.name = {name}", f"logger.info{index}.level = info"]
    return "\n".join(lines) + "\n"


class KafkaCluster:
    """Three KRaft nodes of Apache Kafka on 127.0.0.1, data and logs under ``directory``; each with a
    PLAINTEXT listener and a SASL_PLAINTEXT one (SCRAM, for the users AlterUserScramCredentials makes).
    ``authorizer``: Kafka's StandardAuthorizer decides for the SASL users (whoever comes over PLAINTEXT is
    a super user; a resource no ACL names stays open to all)."""

    def __init__(
        self,
        directory: str,
        flush_each: bool = False,
        authorizer: bool = False,
        performance: Sequence[str] | None = None,
    ) -> None:
        self.directory = directory
        self.flush_each = flush_each
        self.authorizer = authorizer
        self.jvm_options = broker_jvm_options(performance)
        self._libs = kafka_libs()
        ports = free_ports(3 * NODES)
        self._broker_ports, self._controller_ports = ports[:NODES], ports[NODES : 2 * NODES]
        self._sasl_ports = ports[2 * NODES :]
        self._processes: list[subprocess.Popen[bytes]] = []
        self._commands: list[tuple[list[str], str]] = []  # each node's command line and stdout file

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self._broker_ports)

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_PLAINTEXT listeners (SCRAM-SHA-256/512 for users made with AlterUserScramCredentials)."""
        return ",".join(f"127.0.0.1:{port}" for port in self._sasl_ports)

    @property
    def pids(self) -> dict[str, int]:
        return {f"kafka{i + 1}": p.pid for i, p in enumerate(self._processes)}

    def _java(self, main: str, *args: str, options: Sequence[str], logs: str | None = None) -> list[str]:
        argv = ["java", *options, "-Djava.awt.headless=true"]
        if logs is not None:
            argv.append(f"-Dlog4j2.configurationFile={logs}")
        return [*argv, "-cp", f"{self._libs}/*", main, *args]

    def start(self) -> None:
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: a leading dash reads as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        configs = []
        for i in range(NODES):
            node = os.path.join(self.directory, f"kafka{i + 1}")
            os.makedirs(node, exist_ok=True)
            config = os.path.join(node, "server.properties")
            with open(config, "w", encoding="utf-8") as f:
                f.write(
                    node_properties(
                        i + 1,
                        self._broker_ports[i],
                        self._controller_ports,
                        os.path.join(node, "data"),
                        self.flush_each,
                        self._sasl_ports[i],
                        self.authorizer,
                    )
                )
            logs = os.path.join(node, "log4j2.properties")
            with open(logs, "w", encoding="utf-8") as f:
                f.write(log_config(os.path.join(node, "server.log")))
            configs.append((node, config, logs))
        for node, config, logs in configs:  # formatting is quick: one after another
            subprocess.run(
                self._java(
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cluster_id,
                    "-c",
                    config,
                    "--feature",
                    "share.version=1",  # share groups (KIP-932, a preview in Kafka 4.1)
                    options=TOOL_JVM,
                    logs=logs,
                ),
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(node, "format.err"), "wb"),  # noqa: SIM115 (closed by the child's end)
                timeout=120,
            )
        broker = self.jvm_options
        if broker != [*HEAP, *PERFORMANCE]:  # not the benchmark's own: said, next to its numbers
            print(f"kafka: the brokers' JVM options are {shlex.join(broker)}", file=sys.stderr, flush=True)
        self._commands = [
            (self._java("kafka.Kafka", config, options=broker, logs=logs), os.path.join(node, "stdout.log"))
            for node, config, logs in configs
        ]
        self._processes = []
        try:
            for i in range(NODES):
                self._processes.append(self._launch(i))
            self._wait_ready()
        except BaseException:  # a broker that could not start: none of the others outlives the failure
            self.stop()
            raise

    def _launch(self, index: int) -> subprocess.Popen[bytes]:
        command, stdout = self._commands[index]
        with open(stdout, "ab") as out:
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, index: int) -> None:
        """SIGKILL node ``index`` (0-based: broker id ``index + 1``), as a crash would."""
        process = self._processes[index]
        process.kill()
        process.wait()

    def restart(self, index: int) -> None:
        """Start a killed node again on its data; returns once every broker is up."""
        if self._processes[index].poll() is None:
            raise RuntimeError(f"kafka{index + 1} is still running")
        self._processes[index] = self._launch(index)
        self._wait_ready()

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient  # the bench extra's: only when Kafka runs

        # log_level 2 (critical only): librdkafka would log every refused connect to a broker still
        # starting, twenty lines a second; the wait's own progress line says how many are up
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 2})
        deadline = time.monotonic() + START_TIMEOUT_S
        said = 0.0
        while True:
            for i, process in enumerate(self._processes):
                if process.poll() is not None:
                    raise RuntimeError(
                        f"kafka{i + 1} exited with {process.returncode} while starting: see "
                        f"{os.path.join(self.directory, f'kafka{i + 1}', 'stdout.log')}"
                    )
            try:
                brokers = len(admin.list_topics(timeout=2).brokers)
            except Exception:  # not listening yet: KafkaException, a timeout
                brokers = 0
            if brokers == NODES:
                return
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(f"kafka: {brokers} of {NODES} brokers up after {START_TIMEOUT_S:.0f} s")
            if now - said >= 5:
                print(
                    f"kafka: waiting for the brokers ({brokers} of {NODES} up)", file=sys.stderr, flush=True
                )
                said = now
            time.sleep(0.5)

    def stop(self) -> None:
        stop_processes(self._processes, STOP_TIMEOUT_S)
        self._processes = []


class KafkaAdmin:
    """The admin side of ``KafkaTarget`` against Apache Kafka: topics created with replication factor 3
    (waiting until each partition has a leader and three in-sync replicas) and deleted after the phase.
    ``system``: whose brokers these are, as its progress lines name them (the Kafka tools' benchmark
    creates raftlog's topics the same way)."""

    def __init__(self, bootstrap_servers: str, fetch_bytes: int, system: str = "kafka") -> None:
        self.bootstrap_servers = bootstrap_servers
        self.system = system
        self.fetch_bytes = fetch_bytes  # a consumer's fetch size, as raftlog's reader is given
        self._topic: str | None = None
        self._admin: object | None = None

    async def connect(self) -> None:
        from confluent_kafka.admin import AdminClient

        self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})

    async def create(self, layout: Layout) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = self._admin
        assert isinstance(admin, AdminClient)
        started = time.monotonic()
        futures = admin.create_topics([NewTopic(layout.name, layout.partitions, 3)])
        await asyncio.to_thread(futures[layout.name].result, 60)
        self._topic = layout.name
        deadline = time.monotonic() + 60

        def settled() -> bool:
            topic = admin.list_topics(layout.name, timeout=5).topics.get(layout.name)
            return (
                topic is not None
                and topic.error is None
                and len(topic.partitions) == layout.partitions
                and all(p.leader >= 0 and len(p.isrs) == 3 for p in topic.partitions.values())
            )

        while not await asyncio.to_thread(settled):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.system}: {layout.name} has no leaders with 3 in-sync replicas after 60 s"
                )
            await asyncio.sleep(0.2)
        took = time.monotonic() - started
        print(f"{self.system}: {layout.name} created and led in {took:.2f} s", file=sys.stderr, flush=True)

    async def delete(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = self._admin
        if self._topic is None or not isinstance(admin, AdminClient):
            return
        futures = admin.delete_topics([self._topic])
        await asyncio.to_thread(futures[self._topic].result, 60)
        self._topic = None

    async def close(self) -> None:
        self._admin = None
