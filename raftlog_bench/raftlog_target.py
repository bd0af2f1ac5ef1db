"""raftlog as ``raftlog bench perf`` drives it: the HTTP API, one batch per produce request, read back in
one of three formats (``targets.py`` holds the interface the peers share). Answers are parsed with orjson
and values decoded with pybase64, as a Python client that reads fast would."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import orjson
import pybase64

from raftlog.storage.batch import Compression, ProducerRecord, encode_batch
from raftlog.storage.batch_reads import record_rows, split_batches
from raftlog_bench.cluster_http import REMOVAL_METRIC, Http
from raftlog_bench.targets import COMPRESSIONS, Layout, SendFailed, check_choice, sample_values
from raftlog_client.errors import ClientError
from raftlog_client.http1 import Http1Client, ProtocolError
from raftlog_contract import (
    BINARY_V2,
    COLUMNAR_MSGPACK,
    LEADER_HEADER,
    RECORD_BATCH,
    partition_path,
    records_path,
)

REQUEST_TIMEOUT_S = 30.0
RETRY_503_S = 0.05  # pause before retrying a produce answered 503 (retriable: nothing was written)
LEADER_HEADER_LOWER = LEADER_HEADER.lower()
# After creating a topic, wait until its partition leaders stood still this long, at most
# LEADERS_SETTLE_MAX_S: a phase then measures a settled cluster, as it does for the peers, whose streams
# keep the leader they were created with. A new partition is led by its preferred replica from the start,
# so the controller's leader balancer (at most one move every 3 s, each stalling that partition's writes
# briefly) has nothing to move; this outlasts one of its rounds, in case it does.
LEADERS_SETTLE_S = 3.5
LEADERS_SETTLE_MAX_S = 30.0
REMOVAL_SETTLE_MAX_S = 120.0
ROUTES = ("leader", "any")
PRODUCE_FORMATS = ("batch", "json")
FETCH_FORMATS = ("batch", "columnar", "json")


@dataclass(frozen=True, slots=True)
class ReadSpec:
    """What a reader in another process needs to read a target's partitions as the target would
    (``readers.py``): where the cluster is, how to read, and the leaders the target last saw."""

    servers: list[str]
    admin_token: str | None
    fetch_bytes: int
    route: str
    fetch_format: str
    layout: Layout
    records_paths: list[str]
    url_of_node: dict[str, str]
    leader_url: dict[int, str]


class RaftlogTarget:
    """raftlog through its HTTP API: one batch per produce request (acks = a majority has it fsynced),
    columnar msgpack fetches to read back.

    ``produce_format="batch"`` encodes a record batch (Kafka's RecordBatch v2) per request here, as a
    Kafka producer does, and posts it as ``application/vnd.raftlog.batch.v2``; ``"json"`` posts one
    prepared binary-flavour JSON body (base64 values) for every request.

    ``compression`` other than ``"none"`` creates the topic with that ``compression.type``, has the batch
    producer compress with it too (as a Kafka producer's ``compression.type``; the leader then stores the
    batch as it came) and uses varied text records (``sample_values``) instead of one random value, so
    that the ratio means something; ``stored_ratios`` then holds a batch's stored size over its
    uncompressed size, by record size. ``fetch_format="batch"`` reads the stored batches and unpacks
    their rows here (CRC-checked); ``"columnar"`` reads msgpack pages of parallel arrays; ``"json"`` the
    REST v2 answer of binary-flavour rows (base64 values), as a Confluent REST consumer reads it.

    ``route="leader"`` sends each request to the partition's leader, as a Kafka client does: the leaders
    come from ``GET /topics/{t}/partitions`` and every answer's ``X-Raftlog-Leader`` header keeps them
    current. ``route="any"`` has worker j ask node j mod n, and non-leaders forward (the cost of one hop)."""

    system = "raftlog"

    def __init__(
        self,
        servers: list[str],
        admin_token: str | None,
        fetch_bytes: int,
        route: str = "leader",
        produce_format: str = "batch",
        fetch_format: str = "batch",
        settle_s: float = LEADERS_SETTLE_S,
        compression: str = "none",
    ) -> None:
        check_choice("route", route, ROUTES)
        check_choice("produce_format", produce_format, PRODUCE_FORMATS)
        check_choice("fetch_format", fetch_format, FETCH_FORMATS)
        check_choice("compression", compression, COMPRESSIONS)
        self.produce_format = produce_format
        self.fetch_format = fetch_format
        self.compression = compression
        self._codec = COMPRESSIONS[compression]
        self.stored_ratios: dict[int, float] = {}
        self._accept = {"batch": RECORD_BATCH, "columnar": COLUMNAR_MSGPACK, "json": BINARY_V2}[fetch_format]
        self._content_type = RECORD_BATCH if produce_format == "batch" else BINARY_V2
        self._produce_headers = {"Content-Type": self._content_type}
        self._fetch_headers = {"Accept": self._accept}
        self._produce_paths: list[str] = []  # partition -> the path a produce to it posts to (create())
        self._records_paths: list[str] = []  # partition -> the path a fetch from it gets
        self._batch_records: list[ProducerRecord] = []
        self.servers = servers
        self.admin_token = admin_token
        self.fetch_bytes = fetch_bytes
        self.route = route
        self.settle_s = settle_s  # 0: measure right after creating a topic
        self.layout: Layout | None = None
        self._produce_client = Http1Client()
        self._http: Http | None = None
        self._batch_body = b""
        self._one_body = b""
        self._url_of_node: dict[str, str] = {}
        self._leader_url: dict[int, str] = {}  # partition -> base URL of its leader, as last seen

    @property
    def http(self) -> Http:
        if self._http is None:
            raise RuntimeError("RaftlogTarget used before connect()")
        return self._http

    async def connect(self) -> None:
        self._http = Http(self.servers, self.admin_token, 2048)

    def read_spec(self) -> ReadSpec:
        if self.layout is None:
            raise RuntimeError("read_spec before create()")
        return ReadSpec(
            self.servers, self.admin_token, self.fetch_bytes, self.route, self.fetch_format, self.layout,
            list(self._records_paths), dict(self._url_of_node), dict(self._leader_url),
        )  # fmt: skip

    @classmethod
    async def reader(cls, spec: ReadSpec) -> RaftlogTarget:
        """A target that reads what ``spec`` describes (made by ``read_spec`` in another process)."""
        target = cls(
            spec.servers, spec.admin_token, spec.fetch_bytes, spec.route, fetch_format=spec.fetch_format
        )
        await target.connect()
        target.layout = spec.layout
        target._records_paths = list(spec.records_paths)
        target._url_of_node = dict(spec.url_of_node)
        target._leader_url = dict(spec.leader_url)
        return target

    async def create(self, layout: Layout) -> None:
        self.layout = layout
        self._produce_paths = [partition_path(layout.name, p) for p in range(layout.partitions)]
        self._records_paths = [records_path(layout.name, p) for p in range(layout.partitions)]
        configs: dict[str, Any] = {}
        if self._codec is Compression.NONE:
            values = [os.urandom(layout.record_bytes)] * layout.batch_records
        else:
            values = sample_values(layout.record_bytes, layout.batch_records)
            configs["compression.type"] = self.compression
        self._batch_records = [ProducerRecord(value) for value in values]
        texts = [base64.b64encode(value).decode("ascii") for value in values]
        self._batch_body = json.dumps({"records": [{"value": text} for text in texts]}).encode()
        self._one_body = json.dumps({"records": [{"value": texts[0]}]}).encode()
        if self._codec is not Compression.NONE:
            plain = encode_batch(0, self._batch_records, 0, 0)
            stored = len(self._encode(self._batch_records)) / len(plain)
            self.stored_ratios[layout.record_bytes] = stored
            print(
                f"raftlog: {self.compression} batches of {layout.batch_records} x {layout.record_bytes} B"
                f" are stored at {stored:.3f} of their uncompressed size",
                file=sys.stderr,
                flush=True,
            )
        created_s = await self.http.create_topic(layout.name, layout.partitions, configs)
        print(f"raftlog: {layout.name} created and led in {created_s:.2f} s", file=sys.stderr, flush=True)
        if self.settle_s > 0:
            await self._settle_leaders(layout.name)
        if self.route == "leader":
            await self._learn_leaders(layout.name)

    async def _settle_leaders(self, topic: str) -> None:
        """Until every partition of ``topic`` has a leader and none changed for ``settle_s``."""
        print(f"raftlog: waiting for the leaders of {topic} to settle", file=sys.stderr, flush=True)
        start = time.monotonic()
        seen: list[object] | None = None
        since = start
        while time.monotonic() - start < LEADERS_SETTLE_MAX_S:
            try:
                leaders: list[object] | None = [
                    view.get("leader") for view in await self.http.admin.partitions(topic)
                ]
            except ClientError:
                leaders = None
            now = time.monotonic()
            if leaders != seen:
                seen, since = leaders, now
            elif leaders and all(leaders) and now - since >= self.settle_s:
                return
            await asyncio.sleep(0.2)
        print(
            f"raftlog: leaders of {topic} still moving after {LEADERS_SETTLE_MAX_S:g} s; measuring anyway",
            file=sys.stderr,
            flush=True,
        )

    async def _learn_leaders(self, topic: str) -> None:
        with contextlib.suppress(ClientError):
            self._url_of_node = await self.http.learn_nodes()
        with contextlib.suppress(ClientError):
            for view in await self.http.admin.partitions(topic):
                self._note_leader(int(view["partition"]), view.get("leader"))

    def _note_leader(self, partition: int, leader: str | None) -> None:
        url = self._url_of_node.get(leader.split(",")[0]) if leader else None
        if url is not None:
            self._leader_url[partition] = url

    def _url(self, worker: int, partition: int) -> str:
        if self.route == "leader" and partition in self._leader_url:
            return self._leader_url[partition]
        return self.servers[worker % len(self.servers)]

    async def _post(self, worker: int, partition: int, body: bytes) -> int:
        """One produce request; a 503 (not done: no leader yet, queue full) is retried, as a client would,
        until REQUEST_TIMEOUT_S, and the retries count in its latency. Sent with the lean HTTP/1.1 client
        (``http1.py``): aiohttp's client cost the shared cores ~300 µs per request."""
        if self.layout is None:
            raise RuntimeError("send before create()")
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        path = self._produce_paths[partition]
        while True:
            url = self._url(worker, partition)
            try:
                answer = await self._produce_client.request(
                    "POST", url, path, body, self._produce_headers, max(0.1, deadline - time.monotonic())
                )
            except TimeoutError:
                raise SendFailed(f"timeout > {REQUEST_TIMEOUT_S:g} s") from None
            except (OSError, ProtocolError) as exc:
                self._leader_url.pop(partition, None)  # that node may be gone: ask any node next time
                raise SendFailed(f"connection: {type(exc).__name__}") from None
            if self.route == "leader":
                self._note_leader(partition, answer.headers.get(LEADER_HEADER_LOWER))
            if answer.status == 503 and time.monotonic() < deadline - RETRY_503_S:
                await asyncio.sleep(RETRY_503_S)
                continue
            if answer.status != 200:
                raise SendFailed(f"HTTP {answer.status}")
            text = answer.body
            break
        answer = orjson.loads(text)
        if self.produce_format == "batch":  # a batch answers with its base offset and count
            return int(answer["count"])
        entries = answer["offsets"]
        acked = sum(1 for entry in entries if entry.get("error_code") is None)
        if acked != len(entries):
            raise SendFailed("record error_code")
        return acked

    async def send_batch(self, worker: int, partition: int) -> int:
        if self.produce_format == "batch":
            return await self._post(worker, partition, self._encode(self._batch_records))
        return await self._post(worker, partition, self._batch_body)

    async def send_one(self, worker: int, partition: int) -> None:
        if self.produce_format == "batch":
            await self._post(worker, partition, self._encode(self._batch_records[:1]))
        else:
            await self._post(worker, partition, self._one_body)

    def _encode(self, records: list[ProducerRecord]) -> bytes:
        return encode_batch(0, records, 0, int(time.time() * 1000), compression=self._codec)

    async def consume(
        self, partition: int, records: int, deadline: float, counted: Callable[[int], None] | None = None
    ) -> tuple[int, int]:
        """Read ``partition`` from its start until ``records`` were read or ``deadline``: (records, bytes).
        ``counted`` hears each answer's records as they come (a reader process's progress)."""
        if self.layout is None:
            raise RuntimeError("consume before create()")
        offset = 0
        nbytes = 0
        while offset < records and time.perf_counter() < deadline:
            url = self._url(partition, partition)
            try:
                answer = await self.http.session.exchange(
                    "GET", url + self._records_paths[partition],
                    params={"offset": offset, "max_bytes": self.fetch_bytes}, headers=self._fetch_headers,
                    timeout_s=REQUEST_TIMEOUT_S,
                )  # fmt: skip
            except ClientError:
                self._leader_url.pop(partition, None)
                await asyncio.sleep(0.02)
                continue
            if self.route == "leader":
                self._note_leader(partition, answer.header(LEADER_HEADER))
            if answer.status != 200:
                await asyncio.sleep(0.02)
                continue
            body = answer.body
            if self.fetch_format == "batch":
                values = []
                for batch in split_batches(body):
                    header, rows = record_rows(batch)
                    values += [row[2] for row in rows[max(0, offset - header.base_offset) :]]
                read = len(values)
            elif self.fetch_format == "json":  # Confluent v2's binary flavour: base64 values in JSON rows
                rows = orjson.loads(body)
                values = [pybase64.b64decode(row["value"], validate=True) for row in rows]
                read = len(rows)
            else:
                page = msgpack.unpackb(body, raw=False)
                values, read = page["values"], len(page["offsets"])
            if not read:
                break
            offset += read
            nbytes += sum(map(len, values))
            if counted is not None:
                counted(read)
        return offset, nbytes

    async def delete(self) -> None:
        if self.layout is not None:
            await self.http.delete_topic(self.layout.name)
            if self.settle_s > 0:
                await self._settle_removal()

    async def _settle_removal(self) -> None:
        """Until every node removed the deleted topic's files (at most REMOVAL_SETTLE_MAX_S): a node
        removes them at a pace, in the background, and a phase measured meanwhile measures that removal
        (on this machine single-record p99 100-200 ms while gigabytes go), not the phase's workload.
        Nodes drop their replicas as each applies the deletion, so "none left" must hold for a second."""
        start = time.monotonic()
        shown = 0.0
        clear_since: float | None = None
        while time.monotonic() - start < REMOVAL_SETTLE_MAX_S:
            left = await self.http.removal_backlog()
            now = time.monotonic()
            if left is None:  # a server without the metric (another version), or one that did not answer
                print(f"raftlog: a node did not report {REMOVAL_METRIC}; not waiting for removals",
                      file=sys.stderr, flush=True)  # fmt: skip
                return
            if left:
                clear_since = None
                if now - shown >= 2.0:
                    shown = now
                    print(f"raftlog: nodes removing deleted files, {left / (1 << 20):,.0f} MiB left",
                          file=sys.stderr, flush=True)  # fmt: skip
            elif clear_since is None:
                clear_since = now
            elif now - clear_since >= 1.0:
                return
            await asyncio.sleep(0.25)
        print(
            f"raftlog: deleted files still being removed after {REMOVAL_SETTLE_MAX_S:g} s; going on",
            file=sys.stderr,
            flush=True,
        )

    async def close(self) -> None:
        self._produce_client.close()
        if self._http is not None:
            await self._http.close()
