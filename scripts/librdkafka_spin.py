"""Whether librdkafka's producer burns CPU while its requests wait for a slow server: a confluent-kafka
producer (acks=all, ``linger.ms`` and the other settings as given) sends single records at ``--rate`` to
a 3-node raftlog dev cluster started in a temporary directory; every few seconds all three nodes are paused
(SIGSTOP) for ``--pause-ms``, and the CPU of each of this process's threads is printed for the running and
the paused windows.

    .venv/bin/python scripts/librdkafka_spin.py                                 # idempotent, linger 0
    .venv/bin/python scripts/librdkafka_spin.py --set enable.idempotence=false  # the same, not idempotent

An idempotent producer keeps at most five requests in flight per partition; with five out and records
waiting, its broker threads loop without sleeping until an answer comes (librdkafka 2.16: the partition's
next wake-up is set to the records' expired linger time before the in-flight limit says no request may
go). Found while following the single-record tail of ``raftlog bench perf --client kafka``, where the load
generator shares two cores with the servers (docs/performance.md). Prints numbers; bounded in time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from raftlog_bench.cpu import own_threads_cpu_s
from raftlog_client.local_cluster import LocalCluster

TOPIC = "spin"


def busiest(before: dict[int, tuple[str, float]], seconds: float, count: int = 4) -> str:
    after = own_threads_cpu_s()
    used = sorted(
        ((cpu - before.get(tid, (name, 0.0))[1]) / seconds * 100, name) for tid, (name, cpu) in after.items()
    )
    return ", ".join(f"{name} {pct:.0f}%" for pct, name in reversed(used[-count:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="records/s offered (1000)")
    parser.add_argument("--pause-ms", type=int, default=500, help="how long the nodes are paused (500)")
    parser.add_argument("--pauses", type=int, default=3, help="pauses, each after a running window (3)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a producer setting over the defaults (repeatable)")  # fmt: skip
    args = parser.parse_args()
    settings: dict[str, object] = {"enable.idempotence": True, "acks": "all", "linger.ms": 0}
    settings.update(item.split("=", 1) for item in args.set)
    window_s = args.pause_ms / 1000
    with tempfile.TemporaryDirectory(prefix="spin-") as directory, LocalCluster(directory) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(60)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, **settings})
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                producer.poll(0.05)

        def send() -> None:
            start, sent = time.perf_counter(), 0
            while not stop.is_set():
                wait = start + sent / args.rate - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                with contextlib.suppress(BufferError):  # librdkafka's queue fills while the nodes are paused
                    producer.produce(TOPIC, b"x" * 100, partition=sent % 3)
                sent += 1

        for partition in range(3):  # the leaders are known and the producer id is given before timing
            producer.produce(TOPIC, b"x", partition=partition)
        if producer.flush(30) > 0:
            print("the cluster did not take the first records within 30 s", file=sys.stderr)
            return 1
        for work in (poll, send):
            threading.Thread(target=work, daemon=True).start()
        print(f"producer settings: {settings}; {args.rate:g} records/s over 3 partitions")
        pids = list(cluster.pids.values())
        for _ in range(args.pauses):
            before = own_threads_cpu_s()
            time.sleep(window_s)
            print(f"running: {busiest(before, window_s)}")
            before = own_threads_cpu_s()
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(window_s)
            finally:
                for pid in pids:
                    os.kill(pid, signal.SIGCONT)
            print(f"paused:  {busiest(before, window_s)}")
            time.sleep(2)
        stop.set()
        producer.flush(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
