"""One run's workload phase on a started cluster (``jepsen.runner`` starts and stops it): the topics,
then the workload's workers under the fault schedule for ``--time-limit`` seconds, the heal (every fault
stopped, every node that is down restarted, every partition led again), the workload's final read and
the cluster's health after it.

Each workload has its drive: ``_drive_queue`` (the queue and compaction workloads), ``_drive_txn`` (with
``_until_ends`` for ``--min-ends``), ``_drive_group`` and ``_drive_share``; ``WorkloadPhase`` does what
they share.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from jepsen import compact_workload, control, fault_shapes, nemesis, pause_probe, workload
from jepsen.recorder import Recorder
from jepsen.run_config import LOG_APPEND_TIME_TOPICS, RunConfig
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError

if TYPE_CHECKING:  # confluent-kafka is imported only when a run asks for Kafka clients
    from jepsen.group_workload import GroupRun
    from jepsen.kafka_workload import KafkaOperations

HEAL_READY_TIMEOUT_S = 45.0
ENDS_MAX_S = 180.0  # --min-ends: the bound on going on after the heal


async def _drive_queue(faults: WorkloadPhase, rng: random.Random, keys: list[str]) -> dict[str, Any]:
    """The queue and compaction workloads: sends and polls through the workers' doors (``--clients``);
    after the heal, a final read of every key (the compaction workload: another once the cleaners caught
    up)."""
    config, cluster, notes = faults.config, faults.cluster, faults.notes
    recorder, http = faults.recorder, faults.http
    base_ms = int(time.time() * 1000)
    compact = config.workload == "compact"
    model = compact_workload.MODEL if compact else workload.QUEUE
    operations = workload.Operations(http, recorder, base_ms, LOG_APPEND_TIME_TOPICS, model)
    clients = _Clients(config, cluster, operations, recorder, base_ms,
                       os.path.join(faults.run_dir, "logs", "kafka-clients.log"), model)  # fmt: skip
    probe = faults.chaos.probe = pause_probe.PauseProbe(
        {n.node_id: n.http for n in cluster.nodes}, keys, cluster.admin_token,
        lambda to: workload.Operations(to, recorder, base_ms, LOG_APPEND_TIME_TOPICS, model),
        first_process=config.concurrency + 2 * len(keys), rng=random.Random(0),  # (one URL each)
    )  # fmt: skip
    stats = workload.Stats()
    cleaner: dict[str, Any] = {}  # the compaction workload's cleaner metrics, per node
    try:
        await faults.during(
            lambda deadline: workload.run_workers(
                clients.make(range(config.concurrency)), keys, rate=config.rate, deadline=deadline, rng=rng,
                stats=stats, step=compact_workload.step if compact else workload.queue_step,
                doors=len(config.clients),
            )
        )  # fmt: skip
        await probe.wait()  # the polls sent to paused leaders, answered once they ran again
        readers = clients.make(range(config.concurrency, config.concurrency + len(keys)))
        final = await workload.final_read(readers, keys, first_process=config.concurrency, stats=stats)
        incomplete = [k for k, v in final.items() if not v["complete"]]
        if compact:  # a second final read once every node's cleaner has caught up
            cleaner["after_heal"] = await compact_workload.cleaned(http, cluster.urls)
            if not cleaner["after_heal"]["cleaned"]:
                waited = compact_workload.CLEANED_TIMEOUT_S
                notes.append(f"the cleaners had not caught up within {waited:.0f} s of the first final read; "
                             "the second read went ahead")  # fmt: skip
            first = config.concurrency + len(keys)
            readers = clients.make(range(first, first + len(keys)))
            again = await workload.final_read(readers, keys, first_process=first, stats=stats)
            incomplete += [k for k, v in again.items() if not v["complete"]]
            cleaner["final_read_after_cleaning"] = again
            cleaner["after_read"] = await compact_workload.cleaner_metrics(http, cluster.urls)
            failed = compact_workload.failures(cleaner["after_read"])
            if failed:
                notes.append(f"compaction passes failed (see the node logs): {failed}")
        if incomplete:
            notes.append(f"final read incomplete for {sorted(set(incomplete))}")
    finally:
        await probe.wait()
        await clients.close()
        await faults.close()
    read = {"final_read": final, **({"cleaner": cleaner} if cleaner else {})}
    return await faults.summary(keys, stats, read)


async def _drive_txn(faults: WorkloadPhase, rng: random.Random, keys: list[str]) -> dict[str, Any]:
    """The transactional workload: transactions through Kafka clients (the HTTP API has no transactional
    producer), polls through the workers' doors in turn (``--clients``); after the heal,
    ``TxnRun.finish``: new producers, offsets, final reads."""
    from jepsen import kafka_workload, txn_workload

    config, cluster, notes = faults.config, faults.cluster, faults.notes
    logger = kafka_workload.client_logger(os.path.join(faults.run_dir, "logs", "kafka-clients.log"))
    run = txn_workload.TxnRun(
        cluster.bootstrap_servers, faults.recorder, keys, concurrency=config.concurrency,
        run_id=cluster.prefix, rng=random.Random(rng.getrandbits(64)), logger=logger, doors=config.clients,
        http=faults.http,
    )  # fmt: skip
    stats = workload.Stats()
    try:
        await faults.during(lambda until: run.run_workers(rate=config.rate, deadline=until, stats=stats))
        await _until_ends(run, config, stats, notes)
        final = await run.finish(stats)
        incomplete = [k for k, v in final["final_read"].items() if not v["read_committed"]["complete"]]
        if incomplete:
            notes.append(f"final read incomplete for {sorted(incomplete)}")
        unfinished = sorted(t for t, kind in final["init"].items() if kind != "ok")
        if unfinished:
            notes.append(f"no new producer could end the open transactions of {unfinished}")
    finally:
        await run.close()
        kafka_workload.close_client_logger(logger)
        await faults.close()
    return await faults.summary(keys, stats, final)


async def _until_ends(run: Any, config: RunConfig, stats: workload.Stats, notes: list[str]) -> None:
    """``--min-ends``: the healed cluster's workers go on, in 5 s rounds, until that many transactions
    ended in all, enough of them sending offsets (``txn_workload.ended_enough``; at most ENDS_MAX_S
    more); the note says how long."""
    from jepsen import txn_workload

    loop = asyncio.get_running_loop()
    began = loop.time()
    last = began + ENDS_MAX_S
    while not txn_workload.ended_enough(stats, config.min_ends) and loop.time() < last:
        await run.run_workers(rate=config.rate, deadline=min(loop.time() + 5.0, last), stats=stats)
    if loop.time() - began >= 1.0:
        ended = stats.ops.get("end", {}).get("ok", 0)
        spent = loop.time() - began
        notes.append(f"--min-ends {config.min_ends}: after the heal, {spent:.0f} s more; {ended} ended")


async def _drive_group(faults: WorkloadPhase, rng: random.Random, keys: list[str]) -> dict[str, Any]:
    """The consumer-group workload: producers, the group's members and the monitor, all Kafka clients;
    after the heal, ``GroupRun.finish``: the members drain the topic, then the committed offsets."""
    from jepsen import group_workload, kafka_workload

    config, notes = faults.config, faults.notes
    logger = kafka_workload.client_logger(os.path.join(faults.run_dir, "logs", "kafka-clients.log"))
    run = faults.group_run = group_workload.GroupRun(
        faults.cluster.bootstrap_servers, faults.recorder, concurrency=config.concurrency,
        run_id=faults.cluster.prefix, rng=random.Random(rng.getrandbits(64)), logger=logger,
        protocol=config.group_protocol,
    )  # fmt: skip
    stats = workload.Stats()
    try:
        await faults.during(lambda until: run.run_workers(rate=config.rate, deadline=until, stats=stats))
        final = await run.finish(stats)
        if not final["drained"]:
            notes.append(f"the group did not commit up to every high watermark: {final['final_committed']} "
                         f"of {final['high_watermarks']}")  # fmt: skip
        if final["wedged_members"]:
            notes.append(
                f"members left behind on a call librdkafka did not return: {final['wedged_members']}"
            )
    finally:
        await run.close()
        kafka_workload.close_client_logger(logger)
        await faults.close()
    return await faults.summary(keys, stats, {"group": final})


async def _drive_share(faults: WorkloadPhase, rng: random.Random, keys: list[str]) -> dict[str, Any]:
    """The share group workload: producers and HTTP members of one share group; after the heal,
    ``ShareRun.finish``: the members accept everything until an acquire finds nothing."""
    from jepsen import share_workload

    base_ms = int(time.time() * 1000)
    operations = workload.Operations(faults.http, faults.recorder, base_ms, LOG_APPEND_TIME_TOPICS)
    run = share_workload.ShareRun(
        faults.http, operations, faults.recorder, concurrency=faults.config.concurrency,
        run_id=faults.cluster.prefix, rng=random.Random(rng.getrandbits(64)),
    )  # fmt: skip
    stats = workload.Stats()
    try:
        await faults.during(
            lambda until: run.run_workers(rate=faults.config.rate, deadline=until, stats=stats)
        )
        final = await run.finish(stats)
        if not final["drained"]:
            faults.notes.append("the share group's members did not drain the topic within the budget")
    finally:
        await faults.close()
    return await faults.summary(keys, stats, {"share": final})


def _coordinator_finder(faults: WorkloadPhase) -> Callable[[], Awaitable[str | None]]:
    """The node coordinating the group workload's consumer group, as its members' clients found it
    (FindCoordinator; their statistics name it), for kill-coordinator."""
    nodes = {n.kafka: n.node_id for n in faults.cluster.nodes}

    async def find() -> str | None:
        run = faults.group_run
        address = run.coordinator() if run is not None else None
        return nodes.get(address) if address is not None else None

    return find


class WorkloadPhase:
    """One run's workload phase: the topics, then what both workloads drive the same way (the history,
    the fault schedule and the nemesis that follows it while the workers run, the HTTP client, the heal,
    and the summary with the cluster's health once the final read is done) around the workload's own
    workers and final read (``_drive_queue``, ``_drive_txn``)."""

    recorder: Recorder
    windows: list[nemesis.Window]
    chaos: nemesis.Nemesis
    http: workload.Http

    def __init__(
        self,
        config: RunConfig,
        cluster: control.Cluster,
        network: control.Network | None,
        rng: random.Random,
        run_dir: str,
        notes: list[str],
    ) -> None:
        self.config, self.cluster, self.network, self.rng = config, cluster, network, rng
        self.run_dir, self.notes = run_dir, notes
        self.began = self.heal_began = 0.0  # time.monotonic() as the workers start, and the heal
        self.group_run: GroupRun | None = None  # the group workload's, once its clients exist

    async def drive(self) -> dict[str, Any]:
        config, cluster, rng = self.config, self.cluster, self.rng
        await _create_topics(cluster, config)
        keys = [workload.key_of(t, p) for t, count in sorted(config.topics.items()) for p in range(count)]
        await _wait_partitions(cluster, keys)
        self.recorder = Recorder(os.path.join(self.run_dir, "history.jsonl"))
        self.windows = nemesis.schedule(
            config.faults, config.time_limit_s, random.Random(rng.getrandbits(64))
        )
        self.chaos = nemesis.Nemesis(
            cluster,
            self.network,
            self.recorder,
            random.Random(rng.getrandbits(64)),
            config.topics,
            self.notes,
            coordinator=_coordinator_finder(self) if config.workload == "group" else None,
            planned_writes_per_s=config.planned_writes_per_s,
        )
        self.http = workload.Http(cluster.urls, random.Random(rng.getrandbits(64)))
        drive = {"txn": _drive_txn, "group": _drive_group, "share": _drive_share}.get(
            config.workload, _drive_queue
        )
        return await drive(self, rng, keys)

    async def during(self, workers: Callable[[workload.Deadline], Awaitable[object]]) -> None:
        """Run ``workers(deadline)`` (--time-limit away, moved later by as much as the nemesis' windows
        waited for the cluster's recoveries) under the fault schedule, then stop the nemesis and heal
        everything."""
        self.began = time.monotonic()
        started = asyncio.get_running_loop().time()
        stop = asyncio.Event()
        deadline = workload.Deadline(started + self.config.time_limit_s)
        nemesis_task = asyncio.create_task(self.chaos.run(self.windows, started, stop, deadline))
        try:
            await workers(deadline)
        finally:
            stop.set()
            await nemesis_task
        self.heal_began = time.monotonic()
        topics = sorted(self.config.topics.items())
        keys = [workload.key_of(topic, p) for topic, count in topics for p in range(count)]
        await _heal(self.cluster, self.chaos, self.notes, keys)

    async def summary(self, keys: list[str], stats: workload.Stats, final: dict[str, Any]) -> dict[str, Any]:
        """The run's summary, ``final`` (the final read's) among it, with the cluster's health now."""
        health = await _health(self.cluster)
        return {
            "keys": keys,
            "schedule": [dataclasses.asdict(w) for w in self.windows],
            "faults_started": self.chaos.counts,
            "restart_failures": self.chaos.restart_failures,
            "windows_later_s": round(self.chaos.shift_s, 1),  # the windows waited for recoveries this long
            "planned_writes_per_s": round(self.config.planned_writes_per_s, 3),
            "operations": stats.ops,
            "events": self.recorder.count,
            **final,
            "health_after": health,
            "durations_s": {"workload": round(self.heal_began - self.began, 1),
                            "heal_and_final_read": round(time.monotonic() - self.heal_began, 1)},
        }  # fmt: skip

    async def close(self) -> None:
        await self.http.close()
        self.recorder.close()


class _Clients:
    """The workload's clients: process ``i`` gets ``config.clients[i % n]``; HTTP workers share one
    ``Operations``, each Kafka worker has its own producer and consumer (its group is ``g<i>``)."""

    def __init__(
        self,
        config: RunConfig,
        cluster: control.Cluster,
        http: workload.Operations,
        recorder: Recorder,
        base_ms: int,
        kafka_log: str,
        model: workload.RecordModel = workload.QUEUE,
    ) -> None:
        self.config, self.cluster, self.http = config, cluster, http
        self.recorder, self.base_ms, self.kafka_log = recorder, base_ms, kafka_log
        self.model = model
        self.made: list[KafkaOperations] = []  # each has a producer and a consumer to close
        self.logger: logging.Logger | None = None  # librdkafka's lines, once a Kafka client is made

    def make(self, processes: range) -> list[workload.ClientOperations]:
        made: list[workload.ClientOperations] = []
        for process in processes:
            if self.config.clients[process % len(self.config.clients)] == "http":
                made.append(self.http)
                continue
            from jepsen import kafka_workload  # confluent-kafka only when a Kafka client is asked for

            self.logger = self.logger or kafka_workload.client_logger(self.kafka_log)
            kafka = kafka_workload.KafkaOperations(
                self.cluster.bootstrap_servers, self.recorder, self.base_ms, process=process,
                idempotent=workload.idempotent_worker(process, len(self.config.clients)), logger=self.logger,
                log_append_time_topics=LOG_APPEND_TIME_TOPICS, model=self.model,
            )  # fmt: skip
            self.made.append(kafka)
            made.append(kafka)
        return made

    async def close(self) -> None:
        await asyncio.gather(*(client.close() for client in self.made))
        if self.logger is not None:
            from jepsen import kafka_workload

            kafka_workload.close_client_logger(self.logger)


async def _create_topics(cluster: control.Cluster, config: RunConfig) -> None:
    replication = min(3, config.nodes)
    async with RaftlogClient(
        cluster.urls, admin_token=cluster.admin_token, retries=20, timeout_s=10
    ) as client:
        for topic, partitions in sorted(config.topics.items()):
            try:
                await client.create_topic(
                    topic,
                    partitions=partitions,
                    replication_factor=replication,
                    configs=config.topic_configs.get(topic, {}),
                )
            except ClientError as exc:
                raise control.ControlError(f"creating topic {topic}: {exc}") from exc


async def _wait_partitions(cluster: control.Cluster, keys: Sequence[str], timeout_s: float = 60.0) -> None:
    """Every partition answers an offsets query (it has a leader)."""
    deadline = time.monotonic() + timeout_s
    async with RaftlogClient(cluster.urls, retries=0, timeout_s=3) as client:
        for key in keys:
            topic, partition = workload.split_key(key)
            while True:
                try:
                    await client.offsets(topic, partition)
                    break
                except ClientError as exc:
                    if time.monotonic() > deadline:
                        raise control.ControlError(
                            f"{key} has no leader after {timeout_s:.0f} s: {exc}"
                        ) from exc
                    await asyncio.sleep(0.3)


async def _heal(
    cluster: control.Cluster, chaos: nemesis.Nemesis, notes: list[str], keys: Sequence[str]
) -> None:
    """All faults stopped (the nemesis did that), every node running and ready, and every partition
    led again (the final read then starts on a settled cluster)."""
    await chaos.heal()
    for spec in cluster.nodes:
        if not cluster.running(spec.node_id):
            fault_shapes.write_baseline(cluster.trace_file(spec.node_id), cluster.data_dir(spec.node_id))
            cluster.start(spec.node_id)
    not_ready = await asyncio.to_thread(
        cluster.wait_ready, [n.node_id for n in cluster.nodes], HEAL_READY_TIMEOUT_S
    )
    down = [n for n in not_ready if not cluster.running(n)]
    if down:
        notes.append(f"after healing, nodes exited and stay down: {down} (see logs/)")
    if not_ready:
        notes.append(f"after healing, not ready within {HEAL_READY_TIMEOUT_S:.0f} s: {not_ready}")
    try:
        await _wait_partitions(cluster, keys, HEAL_READY_TIMEOUT_S)
    except control.ControlError as exc:  # the final read retries and says what it could not read
        notes.append(f"after healing, {exc}")


async def _health(cluster: control.Cluster) -> dict[str, Any]:
    """GET /v1/cluster/health from every node after the final read (under-replicated partitions show
    replicas that never came back, e.g. after corruption)."""
    health: dict[str, Any] = {}
    for spec in cluster.nodes:
        async with RaftlogClient(
            [spec.http], admin_token=cluster.admin_token, retries=1, timeout_s=3
        ) as client:
            try:
                health[spec.node_id] = await client.cluster.health()
            except ClientError as exc:
                health[spec.node_id] = {"error": str(exc)}
    return health
