"""Client quotas measured (``python -m raftlog_bench.quotas``): a producer under a ``producer_byte_rate``
quota set with Kafka's own ``kafka-configs`` produces as fast as it can for ``--seconds`` (25); the rate it
averages is printed beside the quota. Then another tenant's produce latency (one 1 KiB record every 20 ms,
acks=all): alone, beside a noisy neighbour producing as fast as it can without a quota, and beside the same
neighbour under the quota. A 3-node cluster of this checkout on loopback, clients through the Kafka door
(confluent-kafka); no assertion on speed (docs/performance.md holds the numbers)."""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from raftlog_bench.kafka_peer import kafka_libs
from raftlog_bench.stats import percentile_ms
from raftlog_client.local_cluster import LocalCluster

MiB = 1024 * 1024
RECORD_BYTES = 10 * 1024
PROBE_EVERY_S = 0.02


def _configs(cluster: LocalCluster, *args: str) -> None:
    done = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{kafka_libs()}/*", "org.apache.kafka.tools.ConfigCommand",
         "--bootstrap-server", cluster.bootstrap_servers, *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"kafka-configs {' '.join(args)} failed: {done.stdout}{done.stderr}")


def _quota(cluster: LocalCluster, client_id: str, rate: int | None) -> None:
    change = (
        ["--add-config", f"producer_byte_rate={rate}"] if rate else ["--delete-config", "producer_byte_rate"]
    )
    _configs(cluster, "--alter", "--entity-type", "clients", "--entity-name", client_id, *change)


def flood(cluster: LocalCluster, topic: str, client_id: str, seconds: float, stop: threading.Event) -> float:
    """Produce as fast as the producer is let for ``seconds`` (or until ``stop``): bytes per second
    acknowledged."""
    acknowledged = [0]

    def delivered(error: object, message: object) -> None:
        if error is None:
            acknowledged[0] += RECORD_BYTES

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "client.id": client_id, "linger.ms": 5,
         "queue.buffering.max.kbytes": 4096}
    )  # fmt: skip
    payload = b"n" * RECORD_BYTES
    started = time.monotonic()
    deadline = started + seconds
    while time.monotonic() < deadline and not stop.is_set():
        try:
            producer.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    elapsed = time.monotonic() - started
    producer.purge()
    producer.flush(5)
    return acknowledged[0] / elapsed


def probe(cluster: LocalCluster, topic: str, seconds: float) -> list[float]:
    """One 1 KiB record every 20 ms for ``seconds``: each one's latency to its acknowledgement (s)."""
    latencies: list[float] = []
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "client.id": "quiet-tenant", "linger.ms": 0}
    )

    def acknowledged(sent: float) -> Callable[[object, object], None]:
        return lambda error, message: latencies.append(time.monotonic() - sent)

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(topic, b"q" * 1024, on_delivery=acknowledged(time.monotonic()))
        producer.poll(PROBE_EVERY_S)
    producer.flush(10)
    return latencies


def beside(cluster: LocalCluster, seconds: float, noisy: bool) -> list[float]:
    stop = threading.Event()
    neighbour = threading.Thread(target=flood, args=(cluster, "noisy", "noisy-tenant", seconds + 5, stop))
    if noisy:
        neighbour.start()
        time.sleep(2)  # the neighbour at full speed before the probe starts
    try:
        return probe(cluster, "quiet", seconds)
    finally:
        stop.set()
        if noisy:
            neighbour.join()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=25.0, help="how long the limited producer runs")
    parser.add_argument("--probe-seconds", type=float, default=10.0, help="each latency phase")
    parser.add_argument("--quota", type=int, default=MiB, help="producer_byte_rate (bytes/s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory, LocalCluster(directory, nodes=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics(
            [NewTopic(t, 1, 3) for t in ("limited", "noisy", "quiet")]
        ).values():
            future.result(30)
        _quota(cluster, "limited-tenant", args.quota)
        rate = flood(cluster, "limited", "limited-tenant", args.seconds, threading.Event())
        print(f"quota {args.quota / MiB:.2f} MiB/s: a producer at full speed averaged {rate / MiB:.2f} MiB/s "
              f"over {args.seconds:.0f} s")  # fmt: skip
        rows = [("alone", beside(cluster, args.probe_seconds, noisy=False))]
        rows.append(("beside a neighbour without a quota", beside(cluster, args.probe_seconds, noisy=True)))
        _quota(cluster, "noisy-tenant", args.quota)
        rows.append(
            (f"beside it under {args.quota / MiB:.0f} MiB/s", beside(cluster, args.probe_seconds, True))
        )
        print(f"{'another tenant (1 KiB every 20 ms, acks=all)':<46} {'p50 ms':>8} {'p99 ms':>8} {'n':>6}")
        for label, latencies in rows:
            print(
                f"{label:<46} {percentile_ms(latencies, 50):>8.1f} {percentile_ms(latencies, 99):>8.1f} "
                f"{len(latencies):>6}"
            )


if __name__ == "__main__":
    main()
