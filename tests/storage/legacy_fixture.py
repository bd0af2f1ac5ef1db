"""The committed data directory of an older raftlog (``tests/fixtures/legacy-v1-datadir``) and what its
node answered over HTTP (``expected.json``), as the tests compare them."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
from typing import Any

FIXTURE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "legacy-v1-datadir"
NODE_DIR = "n1"
# the partition logs of the fixture: (topic, partition) -> directory under n1/logs
LOGS = {("orders", 0): "orders-0.3", ("orders", 1): "orders-1.3", ("audit", 0): "audit-0.4"}


def expected() -> dict[str, Any]:
    with open(FIXTURE / "expected.json", encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def expected_rows(topic: str, partition: int) -> list[dict[str, Any]]:
    """The records of one partition as the old node answered them: offset, timestamp, key, value,
    headers, bytes as base64."""
    fields = ("offset", "timestamp", "key", "value", "headers")
    return [
        {k: row[k] for k in fields}
        for row in expected()["records"]
        if row["topic"] == topic and row["partition"] == partition
    ]


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def rows_of(records: Any) -> list[dict[str, Any]]:
    """Stored records (``Record``) in the shape of :func:`expected_rows`."""
    return [
        {
            "offset": r.offset,
            "timestamp": r.timestamp_ms,
            "key": _b64(r.key),
            "value": _b64(r.value),
            "headers": [{"key": k, "value": _b64(v)} for k, v in r.headers],
        }
        for r in records
    ]


def copy_fixture(target: str | os.PathLike[str]) -> pathlib.Path:
    """A copy of the fixture to migrate or start a node on; returns the copy's root (``n1/`` inside)."""
    root = pathlib.Path(target) / "legacy-v1-datadir"
    shutil.copytree(FIXTURE, root)
    return root


def log_dir(root: pathlib.Path, topic: str, partition: int) -> str:
    return str(root / NODE_DIR / "logs" / LOGS[(topic, partition)])
