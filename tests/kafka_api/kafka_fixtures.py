"""One real 3-node cluster (``raftlog dev``, each node with a Kafka listener) for the Kafka tests of a
module, and a small raw Kafka client for what real clients never send."""

from __future__ import annotations

import io
import pathlib
import socket
import ssl
import struct
from collections.abc import Iterator
from typing import Any

import folder_scope
import pytest
from kio.serial import entity_reader, entity_writer

from kafka_api import wire
from raftlog_client.blocking import BlockingClient
from raftlog_client.local_cluster import LocalCluster

SHARE_LOCK_MS = 4_000  # a share group's record lock: 4 s, not Kafka's 30 s (test_share_groups waits one out)


def _shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("kafka")
    args = ["--group-share-record-lock-duration-ms", str(SHARE_LOCK_MS)]
    with LocalCluster(str(directory), nodes=3, serve_args=args) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def shared_kafka_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> LocalCluster:
    """One cluster for the modules of this folder that ask for ``kafka_cluster`` (a start is 10 to 25 s,
    and these modules only use topics, groups and transactional ids of their own names), until the run
    leaves the folder (``folder_scope``). A parallel run gives those modules to one worker together
    (``file_costs.SHARED_FIXTURE_FILES``): one cluster a run, not one idling on every worker to its end."""
    return folder_scope.shared(request, lambda: _shared(tmp_path_factory))


@pytest.fixture(scope="module")
def kafka_cluster(shared_kafka_cluster: LocalCluster) -> LocalCluster:
    """The shared cluster, every node of it running when a module begins (a module whose test failed
    between a node's kill and its restart leaves it stopped)."""
    for node in shared_kafka_cluster.stopped():
        shared_kafka_cluster.control("start", node)
    return shared_kafka_cluster


@pytest.fixture(scope="module")
def compacting_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A module's 3-node cluster whose nodes look for compaction to do every 200 ms (15 s by default)."""
    directory = tmp_path_factory.mktemp("compacting")
    with LocalCluster(str(directory), nodes=3, serve_args=["--cleaner-interval-ms", "200"]) as cluster:
        yield cluster


def http_client(cluster: LocalCluster) -> BlockingClient:
    return BlockingClient(cluster.servers, timeout_ms=15_000)


def request_frame(api_key: int, version: int, body: Any, correlation_id: int) -> bytes:
    """A whole request frame (size prefix included) built with kio."""
    cls = wire.request_class(api_key, version)
    header_cls = cls.__header_schema__
    buffer = io.BytesIO()
    header = header_cls(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id="raw"
    )
    entity_writer(header_cls)(buffer, header)
    entity_writer(cls)(buffer, body)
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


class RawKafka:
    """One connection speaking frames built with kio: for requests real clients never send (over TLS
    with ``context``)."""

    def __init__(
        self, address: str, context: ssl.SSLContext | None = None, source: str | None = None
    ) -> None:
        host, _, port = address.rpartition(":")
        local = None if source is None else (source, 0)
        sock = socket.create_connection((host, int(port)), timeout=10, source_address=local)
        self.sock = sock if context is None else context.wrap_socket(sock, server_hostname=host)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def frame(self, api_key: int, version: int, body: Any) -> bytes:
        self.correlation_id += 1
        return request_frame(api_key, version, body, self.correlation_id)

    def call(self, api_key: int, version: int, body: Any) -> Any:
        self.send_raw(self.frame(api_key, version, body))
        return self.answer(api_key, version)

    def answer(self, api_key: int, version: int) -> Any:
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        cls = wire.response_class(api_key, version)
        header, used = entity_reader(cls.__header_schema__)(frame, 0)
        assert header.correlation_id == self.correlation_id
        body, _ = entity_reader(cls)(frame, used)
        return body

    def closed_by_server(self) -> bool:
        """Whether the server closed the connection (EOF within the socket's timeout)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLEOFError):
            return True

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the server")
            data += chunk
        return data


def kcat_path() -> str:
    for directory in ("/usr/bin", "/usr/local/bin"):
        candidate = pathlib.Path(directory) / "kcat"
        if candidate.exists():
            return str(candidate)
    raise RuntimeError("kcat is missing: make bootstrap installs it (scripts/bootstrap.sh)")


def set_group_configs(cluster: LocalCluster, group: str, configs: dict[str, str]) -> None:
    """A group's configs set (IncrementalAlterConfigs, resource type GROUP: what ``kafka-configs
    --entity-type groups --alter`` sends), answered without error."""
    cls = wire.request_class(44, 1)
    resource_cls, config_cls = wire.sibling(cls, "AlterConfigsResource"), wire.sibling(cls, "AlterableConfig")
    built = tuple(wire.build(config_cls, config_operation=0, name=n, value=v) for n, v in configs.items())
    resource = wire.build(resource_cls, resource_type=32, resource_name=group, configs=built)
    raw = RawKafka(cluster.bootstrap_servers.split(",")[0])
    try:
        answer = raw.call(44, 1, wire.build(cls, resources=(resource,), validate_only=False))
    finally:
        raw.close()
    (response,) = answer.responses
    assert response.error_code == 0, response
