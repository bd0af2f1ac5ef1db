"""Every typed error maps to exactly the HTTP status and code of the API contract."""

from __future__ import annotations

import importlib
import pathlib
import pkgutil
import re

import pytest

import api
import membership
import partitions
import raftlog
from api import errors
from membership.errors import WireError
from partitions.errors import (
    InvalidName,
    OffsetsUnavailable,
    ReplicaRecovering,
    ReservedName,
    TooFewLiveNodes,
)
from raftlog.errors import RaftlogError
from raftlog.storage.errors import OffsetOutOfRange, RecordTooLarge


def _all_error_classes() -> set[type[RaftlogError]]:
    for package in (raftlog, membership, partitions, api):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".bench" not in module.name:
                importlib.import_module(module.name)
    found: set[type[RaftlogError]] = set()
    pending = [RaftlogError]
    while pending:
        kind = pending.pop()
        for sub in kind.__subclasses__():
            if sub not in found:
                found.add(sub)
                pending.append(sub)
    return found


# Node-to-node transport errors never travel on a client request: they close a peer connection (Raft)
# or drop a datagram (gossip, counted in its stats); a peer failing a recovery fetch is skipped for the next.
NODE_INTERNAL_MODULES = {
    "raftlog.consensus.hub_config",
    "raftlog.consensus.wire_errors",
    "partitions.replicas.recovery",
}
NODE_INTERNAL_BASES = (WireError,)


def test_every_concrete_error_is_in_the_table() -> None:
    bases = {errors.ApiError}
    unmapped = [
        k.__module__ + "." + k.__name__
        for k in _all_error_classes()
        if k not in bases
        and k.__module__ not in NODE_INTERNAL_MODULES
        and not issubclass(k, NODE_INTERNAL_BASES)
        and not k.__subclasses__()
        and errors.lookup(k.__new__(k)) is errors.INTERNAL
    ]
    assert not unmapped, f"errors without an HTTP mapping in api/errors.py: {sorted(unmapped)}"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (errors.BadRequest("x"), 400, 40001),
        (OffsetOutOfRange(9, 2, 5), 416, 41601),
        (RecordTooLarge(10, 5), 413, 41301),
        (errors.UnsupportedMediaType("text/plain"), 415, 41501),
        (InvalidName("group", "g\n", "a control character"), 400, 40001),
        (ReservedName("name", "__x", "reserved"), 400, 40003),
        (ReplicaRecovering("t-0.1", 10, 20), 503, 50309),
        (OffsetsUnavailable("g", "t", 0, "no leader"), 503, 50310),
        (TooFewLiveNodes(3, 1, 2), 503, 50301),
    ],
)
def test_contract_codes(error: Exception, status: int, code: int) -> None:
    mapped = errors.lookup(error)
    assert (mapped.status, mapped.error_code) == (status, code)
    assert errors.body(error)["error_code"] == code


def test_offset_out_of_range_tells_the_client_where_the_log_is() -> None:
    assert errors.body(OffsetOutOfRange(9, 2, 5)) | {"message": ""} == {
        "error_code": 41601,
        "message": "",
        "log_start_offset": 2,
        "end_offset": 5,
    }


def test_an_unmapped_error_is_an_internal_error() -> None:
    assert errors.lookup(ValueError("bug")) is errors.INTERNAL


def test_every_status_and_code_has_its_row_in_the_api_readme() -> None:
    readme = (pathlib.Path(api.__file__).parent / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| (\d{3}) \| (\d{5}) \| \S", readme, re.MULTILINE))
    mapped = {(str(spec.status), str(spec.error_code)) for _, spec in errors.TABLE}
    assert mapped - rows == set(), "codes without a row in api/README.md's error table"
    assert rows - mapped == set(), "rows in api/README.md's error table no error answers"
