"""``raftlog transactions list|describe|open``: Kafka's transactional producers as an operator sees them
(Kafka's kafka-transactions.sh): every transactional id with its producer and its transaction's state, one
id's transaction: its partitions, groups, when it began and its timeout; and per partition the producers
with a transaction open there (their first offset and age: a hanging one, held by no coordinator's
transaction, is aborted with ``kafka-transactions.sh abort --topic T --partition P --start-offset N``)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from raftlog_cli.admin import WithClient, command_group, output_options, printing, runner
from raftlog_cli.table import Column, table

STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")


def _open_for(started_ms: int) -> str:
    """How long the transaction has been open, by this machine's clock ("-": none open)."""
    if started_ms < 0:
        return "-"
    return f"{max(0, int(time.time() * 1000) - started_ms) / 1000:.1f}s"


TRANSACTIONS = (
    Column("TRANSACTIONAL ID", "<40"), Column("STATE", "<16"), Column("PRODUCER ID", ">21"),
    Column("EPOCH", ">7"), Column("OPEN FOR", ">11"),
)  # fmt: skip
PARTITIONS = (Column("TOPIC", "<32"), Column("PARTITION", ">10"), Column("HOLDS", gap="  "))
OPEN = (
    Column("TOPIC", "<32"), Column("PARTITION", ">10"), Column("PRODUCER ID", ">21"), Column("EPOCH", ">7"),
    Column("FIRST OFFSET", ">14"), Column("OPEN FOR", ">11"),
)  # fmt: skip


def open_summary(partitions: list[dict[str, Any]]) -> str:
    cells = [
        (part["topic"], part["partition"], p["producer_id"], p["producer_epoch"], p["first_offset"],
         "-" if p["age_ms"] < 0 else f"{p['age_ms'] / 1000:.1f}s")
        for part in partitions
        for p in part["producers"]
    ]  # fmt: skip
    lines = table(OPEN, cells)
    lines += [f"{p['topic']}-{p['partition']}: not asked ({p['error']})" for p in partitions if "error" in p]
    return "\n".join(lines)


def list_summary(rows: list[dict[str, Any]]) -> str:
    cells = [
        (r["transactional_id"], r["state"], r["producer_id"], r["producer_epoch"], _open_for(r["started_ms"]))
        for r in rows
    ]
    return "\n".join(table(TRANSACTIONS, cells))


def describe_summary(body: dict[str, Any]) -> str:
    lines = [
        f"transactional id {body['transactional_id']}: {body['state']}, producer {body['producer_id']} "
        f"epoch {body['producer_epoch']}, timeout {body['timeout_ms']} ms, open for "
        f"{_open_for(body['started_ms'])}",
        f"  coordinator {body['coordinator']} (partition {body['coordinator_partition']} of __transactions, "
        f"epoch {body['coordinator_epoch']})",
    ]
    if body["groups"]:
        lines.append(f"  offsets of group(s) {', '.join(body['groups'])}")
    rows = [(p, "records") for p in body["partitions"]] + [(p, "offsets") for p in body["offset_partitions"]]
    if rows:
        lines += table(PARTITIONS, [(p["topic"], p["partition"], holds) for p, holds in rows])
    return "\n".join(lines)


def add_commands(commands: Any, server: argparse.ArgumentParser, with_client: WithClient) -> None:
    common = [server, output_options()]
    run = runner(with_client)
    sub = command_group(
        commands, "transactions", "Kafka transactional producers: list them, describe one's transaction"
    )
    listed = sub.add_parser("list", parents=common, help="every transactional id and its transaction's state")
    listed.add_argument("--state", choices=STATES, help="only those in this state")
    listed.set_defaults(run=run(printing(lambda client, args: client.transactions(args.state), list_summary)))
    opened = sub.add_parser(
        "open",
        parents=common,
        help="per partition, the producers with a transaction open (find a hanging one)",
    )
    opened.add_argument("--topic", help="only this topic's partitions")
    opened.set_defaults(
        run=run(printing(lambda client, args: client.open_transactions(args.topic), open_summary))
    )
    described = sub.add_parser("describe", parents=common, help="one transactional id's transaction")
    described.add_argument("transactional_id")
    described.set_defaults(
        run=run(printing(lambda client, args: client.transaction(args.transactional_id), describe_summary))
    )
