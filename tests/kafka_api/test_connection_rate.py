"""An address's connection creation rate (KIP-612, ``kafka-configs --entity-type ips``) on a real 3-node
cluster, through both doors' listeners (one rule: ``ClientQuotas.connection``): new connections from an
address with a quota of 2 per second are served until its rate passes 2 (measured as Kafka measures every
quota, over at least ten whole windows), then closed unserved (the Kafka door holds one at most a second
first, as Kafka's acceptor; the HTTP door answers 429 with Retry-After), while another address is served.
The bound checked is the quota's own: at most 2 per second over the span measured, counted from what was
served, not a timing."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterator

import pytest
from kafka_fixtures import RawKafka
from kio.schema.errors import ErrorCode
from waiting import wait_for

from kafka_api import wire
from raftlog_client.local_cluster import LocalCluster

DESCRIBE_QUOTAS, ALTER_QUOTAS, API_VERSIONS = 48, 49, 18
RATE = 2  # new connections per second
KAFKA_SOURCE, HTTP_SOURCE = "127.0.0.9", "127.0.0.10"  # loopback addresses no other test connects from
ATTEMPTS_MAX = 200  # far more than RATE lets through before its rate passes it, however slow the machine
MEASURED_MIN_S = 10.0  # a quota's rate is measured over at least ten whole one-second windows


def _alter(raw: RawKafka, value: float | None) -> None:
    cls = wire.request_class(ALTER_QUOTAS, 1)
    entries = tuple(
        wire.build(
            wire.sibling(cls, "EntryData"),
            entity=(wire.build(wire.sibling(cls, "EntityData"), entity_type="ip", entity_name=address),),
            ops=(
                wire.build(
                    wire.sibling(cls, "OpData"),
                    key="connection_creation_rate",
                    value=value or 0.0,
                    remove=value is None,
                ),
            ),
        )
        for address in (KAFKA_SOURCE, HTTP_SOURCE)
    )
    answer = raw.call(ALTER_QUOTAS, 1, wire.build(cls, entries=entries, validate_only=False))
    assert all(e.error_code is ErrorCode.none for e in answer.entries), answer


def _described(address: str) -> set[str]:
    """The addresses with a connection creation rate that the node at ``address`` applies."""
    raw = RawKafka(address)
    try:
        cls = wire.request_class(DESCRIBE_QUOTAS, 1)
        component = wire.build(wire.sibling(cls, "ComponentData"), entity_type="ip", match_type=2, match=None)
        answer = raw.call(DESCRIBE_QUOTAS, 1, wire.build(cls, components=(component,), strict=True))
    finally:
        raw.close()
    return {e.entity[0].entity_name for e in answer.entries or ()}


@pytest.fixture
def rated(kafka_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """Both source addresses at RATE, on every node, removed afterwards."""
    raw = RawKafka(kafka_cluster.kafka["n1"])
    try:
        _alter(raw, float(RATE))
        for address in kafka_cluster.kafka.values():
            wait_for(
                lambda a=address: {KAFKA_SOURCE, HTTP_SOURCE} <= _described(a), f"the quotas at {address}"
            )
        yield kafka_cluster
        _alter(raw, None)
    finally:
        raw.close()


def _kafka_served(address: str, source: str | None) -> bool:
    """Whether a new connection from ``source`` is answered an ApiVersions (False: closed unanswered)."""
    try:
        raw = RawKafka(address, source=source)
    except OSError:
        return False
    try:
        body = wire.build(
            wire.request_class(API_VERSIONS, 3), client_software_name="t", client_software_version="1"
        )
        return raw.call(API_VERSIONS, 3, body).error_code is ErrorCode.none
    except (OSError, AssertionError, ValueError, EOFError):  # closed: RawKafka reads nothing more
        return False
    finally:
        raw.close()


def _until_refused(connect: Callable[[], bool]) -> tuple[int, float]:
    """New connections until one is refused: (how many were served first, over how many seconds)."""
    started = time.monotonic()
    for served in range(ATTEMPTS_MAX):
        if not connect():
            return served, time.monotonic() - started
    raise AssertionError(f"{ATTEMPTS_MAX} connections served at a quota of {RATE}/s")


def _bound(span_s: float) -> int:
    """The most a quota of RATE lets through over ``span_s`` (one more may complete the window)."""
    return int(RATE * max(MEASURED_MIN_S, span_s + 1.0)) + 1


def test_an_address_past_its_connection_creation_rate_is_refused_by_both_doors(rated: LocalCluster) -> None:
    kafka, http_url = rated.kafka["n1"], rated.servers[0]
    served, span_s = _until_refused(lambda: _kafka_served(kafka, KAFKA_SOURCE))
    assert 1 <= served <= _bound(span_s), (served, span_s)
    assert _kafka_served(kafka, None), "another address is served meanwhile"

    url = urllib.parse.urlsplit(http_url)
    refusal: list[tuple[int, dict[str, str], bytes]] = []

    def http_served() -> bool:
        connection = http.client.HTTPConnection(
            url.hostname, url.port, timeout=10, source_address=(HTTP_SOURCE, 0)
        )
        try:
            connection.request("GET", "/status/live")
            answer = connection.getresponse()
            body = answer.read()
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()
        if answer.status == 429:
            refusal.append((answer.status, dict(answer.getheaders()), body))
            return False
        return True

    served, span_s = _until_refused(http_served)
    assert 1 <= served <= _bound(span_s), (served, span_s)
    (status, headers, body) = refusal[0]
    assert status == 429
    assert headers["Retry-After"] == "1" and json.loads(body)["error_code"] == 42902, (headers, body)
    with socket.create_connection((url.hostname, url.port), timeout=10) as other:  # from 127.0.0.1
        other.sendall(b"GET /status/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert other.recv(64).startswith(b"HTTP/1.1 200"), "another address is served meanwhile"
