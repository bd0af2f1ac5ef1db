"""What ``raftlog bench perf`` drives: one interface over raftlog (HTTP), NATS JetStream and RabbitMQ
streams, so that the same load loops run unchanged against each system.

A ``Target`` knows how to reach a running cluster of its system: create the partitions (raftlog topic
partitions, or one R3 stream per partition for the peers), send a batch of records and wait until every
record is acknowledged by a quorum, send one record, and read a partition back from its start. Load loops,
timing and statistics live in ``perf.py``; starting and stopping servers lives in ``perf.py`` (raftlog)
and ``peers.py`` (the peers)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from raftlog.bench.cluster import BINARY_V2, Http

REQUEST_TIMEOUT_S = 30.0


class SendFailed(Exception):
    """A request that was not acknowledged; ``key`` says how, for the error counts."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a phase writes: ``partitions`` partitions of a topic (or streams) named from ``name``."""

    name: str
    partitions: int
    record_bytes: int
    batch_records: int


class Target(Protocol):
    """A running cluster of one system, reached from this process."""

    system: str

    async def connect(self) -> None: ...

    async def create(self, layout: Layout) -> None: ...

    async def send_batch(self, worker: int, partition: int) -> int:
        """Send one batch of ``layout.batch_records`` records to ``partition`` and wait until the system
        acknowledged every one; the count acknowledged. Raises ``SendFailed``."""
        ...

    async def send_one(self, worker: int, partition: int) -> None:
        """Send one record and wait for its acknowledgement. Raises ``SendFailed``."""
        ...

    async def consume(self, partition: int, records: int, deadline: float) -> tuple[int, int]:
        """Read ``partition`` from its first record until ``records`` were read or ``deadline``
        (``time.perf_counter()``) passed; (records read, payload bytes read)."""
        ...

    async def delete(self) -> None: ...

    async def close(self) -> None: ...


# -- raftlog ---------------------------------------------------------------------------------------------


class RaftlogTarget:
    """raftlog through its HTTP API: binary-flavour produce of one batch per request (acks = a majority
    has it fsynced), worker j asks node j mod n (non-leaders forward), binary fetches to read back."""

    system = "raftlog"

    def __init__(self, servers: list[str], admin_token: str | None, fetch_bytes: int) -> None:
        self.servers = servers
        self.admin_token = admin_token
        self.fetch_bytes = fetch_bytes
        self.layout: Layout | None = None
        self._session: aiohttp.ClientSession | None = None
        self._http: Http | None = None
        self._batch_body = b""
        self._one_body = b""

    @property
    def http(self) -> Http:
        if self._http is None:
            raise RuntimeError("RaftlogTarget used before connect()")
        return self._http

    async def connect(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=2048))
        headers = {"Authorization": f"Bearer {self.admin_token}"} if self.admin_token else {}
        self._http = Http(self._session, self.servers, headers, {})

    async def create(self, layout: Layout) -> None:
        self.layout = layout
        value = base64.b64encode(os.urandom(layout.record_bytes)).decode("ascii")
        self._batch_body = json.dumps({"records": [{"value": value}] * layout.batch_records}).encode()
        self._one_body = json.dumps({"records": [{"value": value}]}).encode()
        await self.http.create_topic(layout.name, layout.partitions)

    async def _post(self, worker: int, partition: int, body: bytes) -> int:
        if self.layout is None:
            raise RuntimeError("send before create()")
        url = self.servers[worker % len(self.servers)]
        try:
            async with self.http.session.post(
                f"{url}/topics/{self.layout.name}/partitions/{partition}",
                data=body,
                headers={"Content-Type": BINARY_V2},
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
            ) as answer:
                text = await answer.read()
                if answer.status != 200:
                    raise SendFailed(f"HTTP {answer.status}")
        except TimeoutError:
            raise SendFailed(f"timeout > {REQUEST_TIMEOUT_S:g} s") from None
        except aiohttp.ClientError as exc:
            raise SendFailed(f"connection: {type(exc).__name__}") from None
        entries = json.loads(text)["offsets"]
        acked = sum(1 for entry in entries if entry.get("error_code") is None)
        if acked != len(entries):
            raise SendFailed("record error_code")
        return acked

    async def send_batch(self, worker: int, partition: int) -> int:
        return await self._post(worker, partition, self._batch_body)

    async def send_one(self, worker: int, partition: int) -> None:
        await self._post(worker, partition, self._one_body)

    async def consume(self, partition: int, records: int, deadline: float) -> tuple[int, int]:
        if self.layout is None:
            raise RuntimeError("consume before create()")
        url = self.servers[partition % len(self.servers)]
        base = f"{url}/topics/{self.layout.name}/partitions/{partition}/records"
        offset = 0
        nbytes = 0
        while offset < records and time.perf_counter() < deadline:
            try:
                async with self.http.session.get(
                    base,
                    params={"offset": offset, "max_bytes": self.fetch_bytes},
                    headers={"Accept": BINARY_V2},
                    timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
                ) as answer:
                    text = await answer.read()
                    if answer.status != 200:
                        await asyncio.sleep(0.02)
                        continue
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.02)
                continue
            rows = json.loads(text)
            if not rows:
                break
            offset = int(rows[-1]["offset"]) + 1
            nbytes += sum(len(row["value"]) * 3 // 4 for row in rows)  # base64 -> bytes
        return offset, nbytes

    async def delete(self) -> None:
        if self.layout is not None:
            await self.http.delete_topic(self.layout.name)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
