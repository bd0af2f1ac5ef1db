"""The transactional workload's pure parts: the records it writes and how it reads them back, its names,
the run's options, and the negative control's broken marker apply."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
import subprocess
import sys
import threading

import pytest
from confluent_kafka import Message, Producer

from jepsen import (
    cli,
    control,
    kafka_workload,
    marker_fault,
    run_config,
    runner,
    txn_client,
    txn_workload,
    workload,
)
from jepsen.recorder import Recorder


def consumed(
    value: bytes | None, headers: list[tuple[str, bytes | None]] | None, key: bytes = b'"p0.1"'
) -> Message:
    return Message(topic="tx", partition=0, offset=7, key=key, value=value, headers=headers)


def test_a_record_reads_back_as_its_number_only_when_value_and_header_agree() -> None:
    args = txn_client.record_args(17, "p3.2")
    assert args == {"key": b'"p3.2"', "value": b"17", "headers": [("v", b"17")]}
    assert txn_client.read_back(consumed(args["value"], args["headers"])) == 17
    for value, headers in [
        (b"17", [("v", b"18")]),  # another record's header
        (b"17", None),  # headers lost
        (b"17", [("v", b"17"), ("x", None)]),  # one too many
        (None, [("v", b"17")]),  # a tombstone
        (b"\xff", [("v", b"17")]),  # not text
    ]:
        read = txn_client.read_back(consumed(value, headers))
        assert isinstance(read, str), (value, headers)
        assert json.loads(read)["key"] == '"p0.1"'


def test_every_worker_has_its_own_transactional_id_and_group() -> None:
    ids = {txn_client.transactional_id("jr01ab23", p) for p in range(6)}
    groups = {txn_client.group_of(p) for p in range(6)}
    assert len(ids) == len(groups) == 6
    assert txn_client.transactional_id("jr01ab23", 4) == "jepsen-jr01ab23-4"


def test_delivery_timeout_is_below_the_transaction_timeout() -> None:
    assert txn_client.DELIVERY_TIMEOUT_S * 1000 < txn_client.TRANSACTION_TIMEOUT_MS  # librdkafka requires it


def test_the_txn_workload_has_its_topics_and_the_negative_control_reaches_the_node_shim() -> None:
    config = run_config.RunConfig(workload="txn", break_markers="flip-abort")
    assert config.topics == txn_workload.TOPICS
    assert config.topic_configs == txn_workload.TOPIC_CONFIGS
    assert config.shim_args == ["--break-markers=flip-abort"]
    assert run_config.RunConfig(workload="txn").shim_args == []
    assert run_config.MARKER_FAULTS == marker_fault.MODES
    with pytest.raises(ValueError, match="break-markers"):
        run_config.RunConfig(workload="txn", break_markers="drop-everything")


@dataclasses.dataclass(frozen=True)
class Marker:  # the fields of partitions.commands.TxnMarker that the fault reads
    producer_id: int
    commit: bool


def test_flip_abort_applies_every_abort_marker_as_a_commit() -> None:
    applied: list[Marker] = []

    def apply(self: object, marker: Marker, term: int) -> str:
        applied.append(marker)
        return "written"

    broken = marker_fault.flip_abort(apply)
    assert broken(None, Marker(7, commit=False), 3) == "written"
    assert broken(None, Marker(8, commit=True), 3) == "written"
    assert applied == [Marker(7, commit=True), Marker(8, commit=True)]


def test_an_unknown_marker_fault_is_refused_before_anything_is_patched() -> None:
    with pytest.raises(marker_fault.MarkerFaultError, match="unknown marker fault"):
        marker_fault.install("drop-everything")


def test_the_fault_finds_the_state_machines_marker_apply() -> None:
    """In a process of its own (as in a node: the patch must not reach this test process)."""
    done = subprocess.run(
        [sys.executable, "-c", "from jepsen import marker_fault; print(marker_fault.install('flip-abort'))"],
        capture_output=True, text=True, timeout=60, cwd=control.REPO_ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(f"{marker_fault.STATE_MACHINE_MODULE}.")
    assert done.stdout.strip().endswith(f".{marker_fault.MARKER_APPLY}: flip-abort")


def test_a_record_read_over_http_reads_back_as_its_number_only_when_value_and_header_agree() -> None:
    row = {
        "offset": 4,
        "key": "p0.1",
        "value": 17,
        "headers": [{"key": "v", "value": "17"}],
        "format": "json",
    }
    assert txn_client.read_back_row(row) == 17
    binary = {
        **row,
        "key": "InAwLjEi",
        "value": "MTc=",
        "headers": [{"key": "v", "value": "MTc="}],
        "format": "binary",
    }
    assert txn_client.read_back_row(binary) == 17
    for changed in ({"value": 18}, {"value": None}, {"value": "17"}, {"headers": []}, {"headers": None}):
        read = txn_client.read_back_row({**row, **changed})
        assert isinstance(read, str) and "p0.1" in read, changed
    assert isinstance(txn_client.read_back_row({**binary, "value": "not base64!"}), str)


def test_the_txn_workload_reads_through_kafka_unless_told_and_takes_the_doors_in_turn() -> None:
    parser = cli.build_parser()
    assert runner.config_from_args(parser.parse_args(["run", "--workload", "txn"])).clients == ("kafka",)
    assert runner.config_from_args(parser.parse_args(["run"])).clients == ("http",)
    told = parser.parse_args(["run", "--workload", "txn", "--clients", "http,kafka"])
    assert runner.config_from_args(told).clients == ("http", "kafka")


def test_a_call_that_does_not_return_in_time_is_left_behind_and_its_handles_replaced(
    tmp_path: pathlib.Path,
) -> None:
    """librdkafka does not always keep its own timeouts: the harness bounds every call itself."""

    async def go() -> None:
        logger = kafka_workload.client_logger(str(tmp_path / "clients.log"))
        recorder = Recorder(str(tmp_path / "history.jsonl"))
        client = txn_client.TxnClient(
            "127.0.0.1:9", recorder, process=0, logger=logger, transactional="jepsen-t-0"
        )
        try:
            consumers = client.consumers
            stuck = threading.Event()
            assert await client._blocking(stuck.wait, 0.2, "consumers") is None
            assert client.wedged == 1 and client.consumers is not consumers
            client.producer, client.ready = Producer({"bootstrap.servers": "127.0.0.1:9"}), True
            assert await client._blocking(stuck.wait, 0.2, "producer") is None
            assert (client.producer, client.ready, client.wedged) == (None, False, 2)
            stuck.set()  # the threads left behind end; nothing of theirs reaches the client
            assert await client._blocking(lambda: 5, 5.0, "consumers") == 5
            with pytest.raises(ZeroDivisionError):
                await client._blocking(lambda: 1 // 0, 5.0, "consumers")
        finally:
            await client.close()
            recorder.close()
            kafka_workload.close_client_logger(logger)

    asyncio.run(go())


def test_min_ends_waits_for_transactions_sending_offsets_too() -> None:
    """``--min-ends 30``: thirty transactions ended, three of them consume-transform-produce ones (a loaded
    run once ended thirty with a single one sending offsets, too few for the checker's test)."""
    stats = workload_stats(ends=30, ends_sending_offsets=2)
    assert not txn_workload.ended_enough(stats, 30)
    stats.add(txn_workload.ENDS_SENDING_OFFSETS, "ok")
    assert txn_workload.ended_enough(stats, 30)
    assert not txn_workload.ended_enough(workload_stats(ends=29, ends_sending_offsets=29), 30)
    assert txn_workload.ended_enough(workload_stats(ends=0, ends_sending_offsets=0), 0)


def workload_stats(ends: int, ends_sending_offsets: int) -> workload.Stats:
    stats = workload.Stats()
    for _ in range(ends):
        stats.add("end", "ok")
        stats.add("end", "info")  # an end of unknown outcome counts for nothing
    for _ in range(ends_sending_offsets):
        stats.add(txn_workload.ENDS_SENDING_OFFSETS, "ok")
    return stats
