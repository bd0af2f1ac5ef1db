"""Kafka's transactions as an operator sees them: ``GET /v1/transactions`` (every transactional id, asking
the leader of each ``__transactions`` partition, or of one: ``coordinator_partition``; ``state`` keeps
those in one state) and ``GET /v1/transactions/{transactional_id}`` (its producer, its transaction's state,
partitions and groups, from its coordinator). Admin endpoints (the admin token, or with ACLs enforced a
user who may DESCRIBE the ids, as Kafka's APIs ask); what Kafka's DescribeTransactions and
ListTransactions answer, through the HTTP API."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from aiohttp import web

from api import access, state
from api.access import DESCRIBE, TRANSACTIONAL_ID, needs, transactional_id
from api.errors import BadRequest
from api.openapi import Operation, Param
from api.schemas import query_int, query_str
from partitions.errors import UnknownPartition
from partitions.names import TRANSACTIONS_TOPIC
from partitions.transactions.service import TransactionDescription, TransactionService
from raftlog_client.contract import TRANSACTIONS_PATH, transaction_path

STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")


LIST_NEEDS = "lists only the transactional ids the caller may DESCRIBE"  # Kafka's ListTransactions


async def list_transactions(request: web.Request) -> web.Response:
    transactions = state.node(request).cluster.transactions
    only = query_int(request.query, "coordinator_partition", None, 0, 2**31 - 1)
    wanted_state = query_str(request.query, "state")
    if wanted_state is not None and wanted_state not in STATES:
        raise BadRequest(f"state {wanted_state!r}: one of {', '.join(STATES)}")
    count = await transactions.call(TransactionService.coordinator_partitions)
    if only is not None and only >= count:
        raise UnknownPartition(TRANSACTIONS_TOPIC, only)
    wanted = range(count) if only is None else [only]
    listed = await asyncio.gather(
        *(transactions.call(TransactionService.list_transactions, p) for p in wanted)
    )
    summaries = sorted(
        (
            s
            for part in listed
            for s in part
            if (wanted_state is None or s.state == wanted_state)
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
)  # fmt: skip
