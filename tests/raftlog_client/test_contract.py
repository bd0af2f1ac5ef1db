"""The contract's names are the server's: the codes a client acts on are the ones the error table
gives, "retriable" means the same on both sides, and every path a client builds is one the server routes."""

from __future__ import annotations

import json
import re

import raftlog_contract as contract
from api import errors
from api.app import ROUTES
from api.errors import lookup
from partitions.errors import SequenceTooOld, UnknownTopic
from partitions.groups.errors import (
    ConsumerInstanceExists,
    PartitionNotAssigned,
    StaleGeneration,
    UnknownConsumerInstance,
)
from raftlog.storage.errors import OffsetOutOfRange as ServerOffsetOutOfRange
from raftlog_client.errors import OffsetOutOfRange, RequestFailed, decode_error


def test_retriable_means_what_the_server_marks_retriable() -> None:
    for kind, mapped in errors.TABLE:
        assert contract.retriable(mapped.error_code) == mapped.retriable, kind.__name__
    assert not contract.retriable(errors.INTERNAL.error_code) and not contract.retriable(None)


def test_named_codes_are_the_tables() -> None:
    assert lookup(UnknownTopic("t")).error_code == contract.UNKNOWN_TOPIC
    assert lookup(SequenceTooOld(1, 2, 3)).error_code == contract.SEQUENCE_TOO_OLD
    assert lookup(ServerOffsetOutOfRange(9, 0, 2)).error_code == contract.OFFSET_OUT_OF_RANGE
    assert lookup(UnknownConsumerInstance("g", "c")).error_code == contract.UNKNOWN_INSTANCE
    assert lookup(ConsumerInstanceExists("g", "c")).error_code == contract.INSTANCE_EXISTS
    assert lookup(StaleGeneration("g", "c", 1, 2)).error_code == contract.STALE_GENERATION
    assert lookup(PartitionNotAssigned("g", "c", "t", 0, 2)).error_code == contract.PARTITION_NOT_ASSIGNED


def test_error_answers_decode_to_typed_errors() -> None:
    body = errors.body(ServerOffsetOutOfRange(9, 0, 2))
    decoded = decode_error(416, json.dumps(body).encode(), "GET /topics/t/partitions/0/records")
    assert isinstance(decoded, OffsetOutOfRange)
    assert (decoded.log_start_offset, decoded.end_offset, decoded.error_code) == (0, 2, 41601)
    assert str(decoded).startswith("GET /topics/t/partitions/0/records: HTTP 416 (error_code 41601)")
    proxy = decode_error(502, b"<html>bad gateway</html>")
    assert type(proxy) is RequestFailed and (proxy.status, proxy.error_code) == (502, None)
    assert "bad gateway" in proxy.message


SAMPLE_ARGUMENTS: dict[str, str | int] = {
    "topic": "orders.v2",
    "partition": 3,
    "group": "billing",
    "instance": "c-1",
    "member": "0f3a9c",
    "node_id": "n2",
    "user": "alice",
    "token_id": "0123456789abcdef",
    "transactional_id": "payments-1",
    "subject": "orders-value",
    "version": "latest",
    "id": 7,
}


def _route_patterns() -> list[re.Pattern[str]]:
    return [re.compile(re.sub(r"\{[^/}]+\}", "[^/]+", op.path) + "$") for op in ROUTES]


def _built_paths() -> dict[str, str]:
    """Every path the contract names or builds (each builder with sample names), by its name."""
    built = {}
    for name, value in vars(contract).items():
        if name.endswith("_PATH") and isinstance(value, str):
            built[name] = value
        elif name.endswith("_path") and isinstance(value, contract.PathTemplate):
            built[name] = value(*(SAMPLE_ARGUMENTS[p] for p in value.names))
    return built


def test_every_path_the_contract_builds_is_a_route_of_the_server() -> None:
    built = _built_paths()
    assert len(built) >= 20, sorted(built)  # the introspection found them
    patterns = _route_patterns()
    strays = {name: path for name, path in built.items() if not any(p.match(path) for p in patterns)}
    assert strays == {}, "paths no route serves"


def test_the_admin_prefix_holds_the_admin_routes_and_no_other() -> None:
    """The client sends the admin token on exactly the paths under the prefix."""
    for op in ROUTES:
        if not op.path.startswith("/internal/"):
            assert op.path.startswith(contract.ADMIN_PREFIX) == (op.tag == "admin"), op.path


def test_a_name_is_one_path_segment_whatever_it_holds() -> None:
    assert contract.topic_path("a/b c") == "/topics/a%2Fb%20c"
    assert contract.instance_path("g/1", "i?x") == "/consumers/g%2F1/instances/i%3Fx"
    assert contract.records_path("t", 0) == "/topics/t/partitions/0/records"
