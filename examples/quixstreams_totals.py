"""A stateful stream processor on quixstreams, unchanged from PyPI: a running total per key, kept in its
RocksDB state store, whose changelog topic quixstreams creates itself (``cleanup.policy=compact``).

    .venv/quixstreams/bin/python examples/quixstreams_totals.py --broker 127.0.0.1:9092 \\
        --source readings --sink totals --state-dir /tmp/totals-state

Each record of ``--source`` is keyed and its value is JSON ``{"seq": N, "amount": X}``, the N-th reading
of its key (N counts 1, 2, 3, ... per key). The state of a key is ``{"seq", "sum", "processed"}``: the
highest ``seq`` applied, the sum of the amounts of readings 1..seq, and how many records were handed to
the function. For every record read, the key's state is written to ``--sink`` (same key, JSON).

quixstreams' default guarantee is at-least-once: after a crash, records read since the last commit are
read again. A reading whose ``seq`` is not above the state's is therefore skipped (it was applied
before), which keeps ``sum`` exact; ``processed`` counts every hand-over, so it may exceed the number of
readings by what was read twice, never fall short of it. A reading above ``seq + 1`` would mean one was
lost: it is applied nonetheless and marked ``"gap": true`` in its output, for a checker to catch.

With ``--processing-guarantee exactly-once`` the outputs, the store's changelog and the consumed offsets
of each checkpoint are one Kafka transaction: read with ``isolation.level=read_committed``, each key's
outputs are its readings 1, 2, ... once each, with ``processed`` equal to ``seq``. quixstreams gives each
start a new ``transactional.id``, so the transaction a crashed processor left open ends when the
coordinator aborts it at ``--transaction-timeout-ms`` (librdkafka's default: 60 s), and readers at
read_committed wait for it until then.

quixstreams needs confluent-kafka < 2.13, so it runs in a virtualenv of its own (``scripts/bootstrap.sh``
makes ``.venv/quixstreams`` from ``examples/quixstreams-requirements.txt``); raftlog's own tests use a
newer confluent-kafka.
"""

from __future__ import annotations

import argparse
from typing import Any

from quixstreams import Application, State


def apply_reading(reading: dict[str, Any], state: State) -> dict[str, Any]:
    total = state.get("total") or {"seq": 0, "sum": 0, "processed": 0}
    total["processed"] += 1
    gap = reading["seq"] > total["seq"] + 1
    if reading["seq"] > total["seq"]:
        total["seq"] = reading["seq"]
        total["sum"] += reading["amount"]
    state.set("total", total)
    return {**total, "gap": gap}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True, help="bootstrap servers, HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--source", required=True, help="the topic of readings")
    parser.add_argument("--sink", required=True, help="the topic each key's running total is written to")
    parser.add_argument("--state-dir", required=True, help="where the RocksDB state store lives")
    parser.add_argument("--group", default="totals", help="consumer group (and changelog topic's prefix)")
    parser.add_argument("--commit-every", type=int, default=100, help="records between checkpoints")
    parser.add_argument(
        "--session-timeout-ms", type=int, default=45000,
        help="how long the group waits for a member that stopped without leaving (one killed) before it "
        "hands that member's partitions to another, a restarted one among them",
    )  # fmt: skip
    parser.add_argument(
        "--processing-guarantee", choices=("at-least-once", "exactly-once"), default="at-least-once"
    )
    parser.add_argument(
        "--transaction-timeout-ms", type=int, default=60000,
        help="exactly-once: how long a transaction may stay open before the coordinator aborts it",
    )  # fmt: skip
    args = parser.parse_args()

    app = Application(
        broker_address=args.broker,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        commit_every=args.commit_every,
        commit_interval=1.0,
        consumer_extra_config={"session.timeout.ms": args.session_timeout_ms},
        processing_guarantee=args.processing_guarantee,
        producer_extra_config=(
            {"transaction.timeout.ms": args.transaction_timeout_ms}
            if args.processing_guarantee == "exactly-once"
            else {}
        ),
    )
    source = app.topic(args.source, value_deserializer="json")
    sink = app.topic(args.sink, value_serializer="json")
    app.dataframe(source).apply(apply_reading, stateful=True).to_topic(sink)
    app.run()


if __name__ == "__main__":
    main()
