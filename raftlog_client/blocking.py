"""A blocking client of the raftlog API, for callers without an event loop (a Spark Python worker makes
one where it is used and never pickles it). Standard library only (``http.client``, keep-alive, https
too), plus msgpack for columnar pages. It says who calls and trusts servers as ``RaftlogClient`` does
(``credentials.py``): a user or a user's token, a CA file, the admin token on the admin API.

Servers are tried in turn from ``first`` on: a connection error moves to the next one. Retries follow
the rule of every client in this package (``retry.py``) until the request's deadline (``timeout_ms``):
503 always, 504 and lost answers too (``repeatable``: the calls here are reads and idempotent produce);
any other error answer raises ``RequestFailed`` at once (``OffsetOutOfRange`` for 416), and ``Unavailable``
says no server gave a usable answer in time.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import ssl
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from raftlog_client.credentials import trusting, user_authorization
from raftlog_client.errors import RequestFailed, decode_error
from raftlog_client.retry import Attempts, RetryRule
from raftlog_client.session import Answer, NoAnswer, NotSent, NotTrusted
from raftlog_contract import (
    ADMIN_PREFIX,
    ADMIN_TOPICS_PATH,
    BINARY_V2,
    COLUMNAR_MSGPACK,
    PLAIN_JSON,
    RECORD_BATCH,
    REGISTRY_V1,
    offsets_path,
    partition_path,
    records_path,
    schema_id_path,
    subject_version_path,
    subject_versions_path,
    topic_path,
)

BACKOFF_S = 0.05
BACKOFF_MAX_S = 2.0


@dataclass(frozen=True, slots=True)
class Page:
    """One fetched page as columns: ``keys[i]`` is None for a keyless record, ``values[i]`` for a
    tombstone; ``headers[i]`` is a list of (name, bytes or None) pairs (as msgpack gives them: 2-element
    lists), usually empty; ``timestamp_types[i]`` is 0 (CreateTime) or 1 (LogAppendTime)."""

    offsets: list[int]
    timestamps_ms: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[Sequence[Sequence[Any]]]
    timestamp_types: list[int]


@dataclass(frozen=True, slots=True)
class RecordResults:
    """Per record of a produce request: its offset, or the error code the server gave it."""

    offsets: list[int | None]
    error_codes: list[int | None]
    errors: list[str | None]


class BlockingClient:
    """``first`` picks the server tried first (modulo their number): callers that start at different
    servers spread parsing and forwarding over the nodes instead of loading the first one. ``servers`` are
    http:// or https:// base URLs; ``ca``, ``user``, ``user_token`` and ``admin_token`` as
    ``RaftlogClient`` takes them."""

    def __init__(
        self,
        servers: Sequence[str],
        timeout_ms: int,
        first: int = 0,
        *,
        ca: str | None = None,
        user: tuple[str, str] | None = None,
        user_token: str | None = None,
        admin_token: str | None = None,
    ) -> None:
        if not servers:
            raise ValueError("at least one server is needed")
        self._servers = [urllib.parse.urlsplit(s) for s in servers]
        for server in self._servers:
            if server.scheme not in ("http", "https") or not server.hostname:
                raise ValueError(
                    f"{urllib.parse.urlunsplit(server)!r} is not an http:// or https:// base URL"
                )
        self._context = trusting(ca) if any(s.scheme == "https" for s in self._servers) else None
        self._as_user = user_authorization(user, user_token)
        self._admin = None if admin_token is None else f"Bearer {admin_token}"
        self._timeout_s = timeout_ms / 1000
        self._current = first % len(self._servers)
        self._connection: http.client.HTTPConnection | None = None
        self._rng = random.Random()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- one request, with failover and retries ---------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout_ms: int | None = None,
        repeatable: bool = True,
    ) -> Answer:
        """The first usable answer (status < 400); raises ``RequestFailed`` for an error answer that is
        not retried, ``Unavailable`` when the deadline passes without a usable answer."""
        budget_s = self._timeout_s if timeout_ms is None else timeout_ms / 1000
        rule = RetryRule(retries=None, budget_s=budget_s, backoff_s=BACKOFF_S, backoff_max_s=BACKOFF_MAX_S)
        attempts = Attempts(rule, servers=len(self._servers), repeatable=repeatable, rng=self._rng)
        headers = dict(headers or {})
        who = self._admin if self._admin is not None and path.startswith(ADMIN_PREFIX) else self._as_user
        if who is not None:
            headers.setdefault("Authorization", who)
        while True:
            try:
                answer = self._send(method, path, body, headers)
            except (NotSent, NoAnswer) as exc:
                self.close()
                self._current = (self._current + 1) % len(self._servers)
                wait = attempts.after_unreachable(
                    sent=isinstance(exc, NoAnswer), untrusted=isinstance(exc, NotTrusted)
                )
                if wait is None:
                    raise attempts.unavailable(f"{method} {path}", str(exc)) from None
            else:
                if answer.status < 400:
                    return answer
                failed = decode_error(answer.status, answer.body, f"{method} {path}")
                wait = attempts.after_error_answer(answer.status, answer.header("Retry-After"))
                if wait is None:
                    raise failed
            time.sleep(wait)

    def _send(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Answer:
        server = self._servers[self._current]
        where = f"{server.hostname}:{server.port}"
        if self._connection is None:
            connection: http.client.HTTPConnection
            if server.scheme == "https":
                connection = http.client.HTTPSConnection(
                    server.hostname or "127.0.0.1",
                    server.port or 443,
                    timeout=self._timeout_s,
                    context=self._context,
                )
            else:
                connection = http.client.HTTPConnection(
                    server.hostname or "127.0.0.1", server.port or 80, timeout=self._timeout_s
                )
            try:
                connection.connect()
            except ssl.SSLCertVerificationError as exc:
                raise NotTrusted(f"{where}: {type(exc).__name__}: {exc}") from None
            except OSError as exc:
                raise NotSent(f"{where}: {type(exc).__name__}: {exc}") from None
            self._connection = connection
        try:
            self._connection.request(method, path, body=body, headers=headers)
            response = self._connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            timed_out = isinstance(exc, TimeoutError)
            raise NoAnswer(f"{where}: {type(exc).__name__}: {exc}", timed_out=timed_out) from None
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)

    def _json(self, method: str, path: str, body: Any = None, repeatable: bool = True) -> Any:
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        headers = {"Content-Type": PLAIN_JSON} if payload is not None else {}
        answer = self.request(method, path, payload, headers, repeatable=repeatable)
        return json.loads(answer.body) if answer.body else None

    # -- calls -------------------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, replication_factor: int | None = None, configs: Any = None
    ) -> Any:
        body: dict[str, Any] = {"name": name, "partitions": partitions, "configs": dict(configs or {})}
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        return self._json("POST", ADMIN_TOPICS_PATH, body, repeatable=False)

    def partition_count(self, topic: str) -> int:
        answer = self._json("GET", topic_path(topic))
        return len(answer["partitions"])

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, end offset) of one partition, from its leader."""
        answer = self._json("GET", offsets_path(topic, partition))
        return int(answer["beginning_offset"]), int(answer["end_offset"])

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, record timestamp) of the first record whose timestamp is at or after ``timestamp_ms``,
        None when no record is that late (Kafka's ``offsetsForTimes``)."""
        path = f"{offsets_path(topic, partition)}?timestamp={timestamp_ms}"
        answer = self._json("GET", path)
        if answer["offset"] is None:
            return None
        return int(answer["offset"]), int(answer["record_timestamp"])

    def fetch_page(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int, columnar: bool
    ) -> Page:
        """One fetch as columns: a columnar msgpack page, or binary JSON records turned into columns."""
        path = f"{records_path(topic, partition)}?offset={offset}&max_bytes={max_bytes}&timeout={timeout_ms}"
        accept = COLUMNAR_MSGPACK if columnar else BINARY_V2
        answer = self.request(
            "GET", path, headers={"Accept": accept}, timeout_ms=int(self._timeout_s * 1000) + timeout_ms
        )
        data = answer.body
        if columnar:
            content_type = answer.header("Content-Type") or ""
            if not content_type.startswith(COLUMNAR_MSGPACK):
                raise RequestFailed(
                    200, None, f"expected {COLUMNAR_MSGPACK}, got {content_type!r}", request=f"GET {path}"
                )
            page = msgpack.unpackb(data, use_list=True)
            return Page(
                page["offsets"],
                page["timestamps"],
                page["keys"],
                page["values"],
                page["headers"],  # kept as unpacked: converting a list per record costs 0.6 us
                page["timestamp_types"],
            )
        rows = json.loads(data)
        return Page(
            [r["offset"] for r in rows],
            [r["timestamp"] for r in rows],
            [_from_b64(r["key"]) for r in rows],
            [_from_b64(r["value"]) for r in rows],
            [[(h["key"], _from_b64(h["value"])) for h in r["headers"]] for r in rows],
            [1 if r["timestamp_type"] == "LogAppendTime" else 0 for r in rows],
        )

    def produce(
        self,
        topic: str,
        records: list[dict[str, Any]],
        producer_id: int | None = None,
        sequence: int | None = None,
        partition: int | None = None,
    ) -> RecordResults:
        """One produce request (binary flavour: records carry base64 key/value/headers), to ``partition``
        or by the records' keys. Idempotent, and so repeated after an unknown outcome, only with a
        ``producer_id`` and ``sequence``."""
        body: dict[str, Any] = {"records": records}
        if producer_id is not None and sequence is not None:
            body.update(producer_id=producer_id, sequence=sequence)
        payload = json.dumps(body, separators=(",", ":")).encode("utf-8")
        path = topic_path(topic) if partition is None else partition_path(topic, partition)
        answer = self.request(
            "POST", path, payload, {"Content-Type": BINARY_V2}, repeatable=producer_id is not None
        )
        entries = json.loads(answer.body)["offsets"]
        return RecordResults(
            [e["offset"] for e in entries], [e["error_code"] for e in entries], [e["error"] for e in entries]
        )

    def produce_batch(self, topic: str, partition: int, batch: bytes, *, idempotent: bool) -> tuple[int, int]:
        """One Kafka RecordBatch v2 the caller encoded (``raftlog.storage.batch.encode_batch``) to one
        partition, stored as it is sent: (base offset, record count). Repeated after an unknown outcome
        only when ``idempotent`` (the batch carries a producer id and sequence); a repeat the partition
        already holds answers its first offsets."""
        answer = self.request(
            "POST",
            partition_path(topic, partition),
            batch,
            {"Content-Type": RECORD_BATCH},
            repeatable=idempotent,
        )
        produced = json.loads(answer.body)
        return int(produced["base_offset"]), int(produced["count"])

    # -- the schema registry (Confluent's API, served by every node) -------------------------------------

    def _registry(self, method: str, path: str, body: Any = None, repeatable: bool = True) -> Any:
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        headers = {"Accept": REGISTRY_V1}
        if payload is not None:
            headers["Content-Type"] = REGISTRY_V1
        answer = self.request(method, path, payload, headers, repeatable=repeatable)
        return json.loads(answer.body)

    def subject_version(self, subject: str, version: int | str = "latest") -> dict[str, Any]:
        """A subject's version (a number or ``latest``) as the registry answers it: ``subject``,
        ``version``, ``id``, ``schema``, ``schemaType`` (absent for Avro), ``references``."""
        answer: dict[str, Any] = self._registry("GET", subject_version_path(subject, version))
        return answer

    def schema_by_id(self, schema_id: int) -> dict[str, Any]:
        """The schema registered with ``schema_id``: ``schema``, ``schemaType`` (absent for Avro),
        ``references``."""
        answer: dict[str, Any] = self._registry("GET", schema_id_path(schema_id))
        return answer

    def register_schema(
        self, subject: str, schema: str, schema_type: str = "AVRO", references: Sequence[Any] = ()
    ) -> int:
        """Register ``schema`` under ``subject`` (or find it there): its id. Registering the same schema
        again answers the same id, so the call is repeated after an unknown outcome."""
        body: dict[str, Any] = {"schema": schema, "schemaType": schema_type}
        if references:
            body["references"] = list(references)
        return int(self._registry("POST", subject_versions_path(subject), body)["id"])


def _from_b64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)
