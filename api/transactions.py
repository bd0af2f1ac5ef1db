"""Kafka's transactions as an operator sees them: ``GET /v1/transactions`` (every transactional id, asking the
leader of each ``__transactions`` partition, or of one: ``coordinator_partition``; ``state`` keeps those in
one state, ``pattern`` those whose whole id an RE2 regular expression matches, as Kafka's ListTransactions
filters them: ``TransactionFilter``) and ``GET /v1/transactions/{transactional_id}`` (its producer, its
transaction's state, partitions and groups, from its coordinator). Admin endpoints (the admin token, or
with ACLs enforced a user who may DESCRIBE the ids, as Kafka's APIs ask); what Kafka's DescribeTransactions
and ListTransactions answer, through the HTTP API. ``GET /v1/open-transactions`` (``topic`` keeps one)
lists, per partition, the producers with a transaction open there (Kafka's DescribeProducers, from each
partition's leader): producer id and epoch, the first offset of the open transaction and when it began, for
the topics the caller may READ; a hanging one (open, but held by no coordinator's transaction) is aborted
with ``kafka-transactions.sh abort`` (WriteTxnMarkers)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from aiohttp import web

from api import access, state
from api.access import DESCRIBE, READ, TOPIC, TRANSACTIONAL_ID, needs, transactional_id
from api.errors import BadRequest
from api.openapi import Operation, Param
from api.schemas import query_int, query_str
from partitions.data.service import DataService
from partitions.errors import UnknownPartition
from partitions.metadata.service import AdminService
from partitions.names import TRANSACTIONS_TOPIC, is_internal
from partitions.transactions.service import (
    STATES,
    TransactionDescription,
    TransactionFilter,
    TransactionService,
)
from raftlog.errors import RaftlogError
from raftlog_contract import OPEN_TRANSACTIONS_PATH, TRANSACTIONS_PATH, transaction_path

LIST_NEEDS = "lists only the transactional ids the caller may DESCRIBE"  # Kafka's ListTransactions


async def list_transactions(request: web.Request) -> web.Response:
    transactions = state.node(request).cluster.transactions
    only = query_int(request.query, "coordinator_partition", None, 0, 2**31 - 1)
    wanted_state = query_str(request.query, "state")
    if wanted_state is not None and wanted_state not in STATES:
        raise BadRequest(f"state {wanted_state!r}: one of {', '.join(STATES)}")
    kept = TransactionFilter.of(
        states=() if wanted_state is None else (wanted_state,),
        id_pattern=query_str(request.query, "pattern"),
    )
    count = await transactions.call(TransactionService.coordinator_partitions)
    if only is not None and only >= count:
        raise UnknownPartition(TRANSACTIONS_TOPIC, only)
    wanted = range(count) if only is None else [only]
    listed = await asyncio.gather(
        *(transactions.call(TransactionService.list_transactions, p) for p in wanted)
    )
    now_ms = state.state(request).clock_ms()
    summaries = sorted(
        (
            s
            for part in listed
            for s in part
            if kept.keeps(s, now_ms)
            and access.allowed(request, TRANSACTIONAL_ID, DESCRIBE, s.transactional_id)
        ),
        key=lambda s: s.transactional_id,
    )
    return web.json_response({"transactions": [asdict(s) for s in summaries]})  # a TransactionSummary each


def description_json(described: TransactionDescription) -> dict[str, Any]:
    return {
        **asdict(described.summary),
        "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in described.partitions],
        "offset_partitions": [
            {"topic": tp.topic, "partition": tp.partition} for tp in described.offset_partitions
        ],
        "groups": list(described.groups),
        "updated_ms": described.updated_ms,
        "coordinator_epoch": described.coordinator_epoch,
        "coordinator": described.coordinator,
    }


async def describe_transaction(request: web.Request) -> web.Response:
    """Served by the id's coordinator (404/40409 for an id no producer holds)."""
    transactions = state.node(request).cluster.transactions
    tid = request.match_info["transactional_id"]
    described = await transactions.call(TransactionService.describe_transaction, tid)
    return web.json_response(description_json(described))


OPEN_NEEDS = "lists only the topics the caller may READ"  # Kafka's DescribeProducers
PARTITION_CALLS = 16  # partitions asked at once


async def open_transactions(request: web.Request) -> web.Response:
    node = state.node(request)
    only = query_str(request.query, "topic")
    if only is not None:
        count = (await node.cluster.admin.call(AdminService.topic, only)).partitions
        topics = {only: count}
    else:
        view = node.metadata
        topics = {t: view.topic(t).partitions for t in view.topics() if not is_internal(t)}
    readable = [t for t in sorted(topics) if access.allowed(request, TOPIC, READ, t)]
    if only is not None and not readable:
        access.authorize(request, TOPIC, READ, only)
    now_ms = state.state(request).clock_ms()
    calls = asyncio.Semaphore(PARTITION_CALLS)

    async def one(topic: str, partition: int) -> dict[str, Any] | None:
        async with calls:
            try:
                producers = await node.cluster.data.call(DataService.producers, topic, partition)
            except RaftlogError as exc:
                return {"topic": topic, "partition": partition, "error": str(exc), "producers": []}
        opened = [p for p in producers if p.transaction_start_offset >= 0]
        if not opened:
            return None
        rows = [
            {
                "producer_id": p.producer_id,
                "producer_epoch": p.producer_epoch,
                "coordinator_epoch": p.coordinator_epoch,
                "first_offset": p.transaction_start_offset,
                "started_ms": p.transaction_start_ms,
                "age_ms": -1 if p.transaction_start_ms < 0 else max(0, now_ms - p.transaction_start_ms),
            }
            for p in sorted(opened, key=lambda p: p.transaction_start_offset)
        ]
        return {"topic": topic, "partition": partition, "producers": rows}

    found = await asyncio.gather(*(one(t, p) for t in readable for p in range(topics[t])))
    return web.json_response({"partitions": [f for f in found if f is not None]})


ROUTES: tuple[Operation, ...] = (
    Operation(
        "GET", TRANSACTIONS_PATH, list_transactions, "listTransactions",
        "Kafka transactional producers' ids, their producers and transactions' states", "admin",
        query=(
            Param(
                "coordinator_partition", "integer", "only the ids of this __transactions partition",
                minimum=0, maximum=2**31 - 1,
            ),
            Param("state", "string", f"only those in this state: {', '.join(STATES)}"),
            Param("pattern", "string", "only ids this regular expression (RE2, as Kafka's) matches whole"),
        ),
        ok_schema="Transactions", errors=(404,),
        access=needs(in_handler=LIST_NEEDS),
    ),
    Operation(
        "GET", transaction_path.template, describe_transaction, "describeTransaction",
        "A transactional id: its producer, its transaction's state, partitions and groups", "admin",
        ok_schema="Transaction", errors=(404,),
        access=needs(transactional_id(DESCRIBE)),
    ),
    Operation(
        "GET", OPEN_TRANSACTIONS_PATH, open_transactions, "listOpenTransactions",
        "The producers with a transaction open, per partition (a hanging one: abort it with Kafka's tool)",
        "admin",
        query=(Param("topic", "string", "only this topic's partitions"),),
        ok_schema="OpenTransactions", errors=(404,),
        access=needs(in_handler=OPEN_NEEDS),
    ),
)  # fmt: skip
