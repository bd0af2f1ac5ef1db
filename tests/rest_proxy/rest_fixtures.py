"""One real 3-node cluster (``raftlog dev``) for the REST conformance tests of a module, and a plain HTTP
helper that sends exactly the bytes and headers given (no client library adding its own)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yarl
from aiohttp import ClientSession

from raftlog_client.local_cluster import LocalCluster

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"


@pytest.fixture(scope="module")
def rest_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(str(tmp_path_factory.mktemp("rest")), nodes=3) as cluster:
        yield cluster


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass
class Answer:
    status: int
    content_type: str | None
    body: Any  # parsed JSON, or None for an empty body

    @property
    def error_code(self) -> int | None:
        return self.body.get("error_code") if isinstance(self.body, dict) else None


async def call(
    base: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    raw: bytes | None = None,
    content_type: str | None = V2,
    accept: str | None = None,
    params: dict[str, str] | None = None,
) -> Answer:
    """One request: ``body`` as JSON (or ``raw`` bytes) with ``content_type`` (None: no header at all),
    ``accept`` (None: no header). The path is sent as given (percent-encoding kept)."""
    headers = {}
    if accept is not None:
        headers["Accept"] = accept
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if data is not None and content_type is not None:
        headers["Content-Type"] = content_type
    url = yarl.URL(base.rstrip("/") + path, encoded=True)
    async with (
        ClientSession(skip_auto_headers=("Content-Type", "Accept")) as session,
        session.request(method, url, data=data, headers=headers, params=params) as response,
    ):
        text = await response.text()
        content_type_header = response.headers.get("Content-Type")
        return Answer(
            response.status,
            content_type_header.split(";")[0].strip() if content_type_header else None,
            json.loads(text) if text else None,
        )
