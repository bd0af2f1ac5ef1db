"""The load a rolling upgrade runs under, through both doors, each part a thread bounded by ``stop()``:
an idempotent and a transactional confluent-kafka producer, a consumer group of two members committing,
and an HTTP producer (JSON records with a producer id and sequence, retried as the same request, and binary
record batches). Every acknowledged record and committed offset is noted; ``check`` reads everything back
(the HTTP door, and Kafka's read_committed for the transactions) and says what was lost or duplicated.

A client error fails the test unless it is retriable, or it was answered by a node running the previous
release at that moment: every tolerated answer is attributed to the node that gave it and the code it ran
then. An HTTP answer says so itself (this release's nodes answer ``Server: raftlog``, release 0.1.0's
aiohttp's default); a Kafka error is attributed through the client's statistics (librdkafka's, every
200 ms: the group's coordinator, each partition's leader, by broker id, while its request lived) to the
nodes that could have answered it, and ``Releases`` says which code each ran (``switching``/``switched``,
called by the test around each restart: while it restarts, a node may run either)."""

from __future__ import annotations

import base64
import collections
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from raftlog.storage.batch import ProducerRecord, encode_batch

PARTITIONS = 3
IDEMPOTENT, TRANSACTIONAL, WEB = "idem", "txn", "web"
GROUP = "upgrade-group"
RECORDS_PER_TXN = 3
# errors a client meets while a node restarts and leaders move, which Kafka clients answer by retrying or,
# for a group's members, rejoining (the classic protocol's generation errors)
REJOIN = {KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS}
# the node being restarted refuses connections a moment: librdkafka says so through error_cb and connects
# to it again by itself (its error_cb's transport errors are informational, not the client's failure).
# It forgets a broker a Metadata answer left out (a node restarted a moment before, as Kafka leaves out a
# fenced broker) and reconnects only to brokers it needs: a client whose known brokers were that node and
# the one restarting now says all its brokers are down (a count, not a failure) and connects again.
RECONNECTED = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
# a group coordinator moving or loading (its partition's leader changed): Kafka's consumer retries a commit
# answered so (RetriableException), which librdkafka hands to the application; and librdkafka's own
# _WAIT_COORD, a commit it fails without sending while it knows no coordinator (the coordinator's node
# restarting: no node answered it, so none can be named), which Kafka's consumer retries as well
# (RetriableCommitFailedException, the coordinator unknown)
COORDINATOR_MOVING = {
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError._WAIT_COORD,
}
INFORMATIONAL = REJOIN | RECONNECTED | COORDINATOR_MOVING | {KafkaError._PARTITION_EOF}
HTTP_RETRIED = {503, 504}  # unavailable for now (no leader, a node catching up) or outcome unknown
PREVIOUS = "0.1.0"
THIS = "this"  # this checkout's code
SERVER = "raftlog"  # the Server header of this release's answers (0.1.0's: aiohttp's default)
STATS_INTERVAL_MS = 200
# the client statistics looked at before an error, for who led or coordinated while its request lived: the
# longest a request of these clients lives (librdkafka's socket.timeout.ms, 60 s by default; a produce's
# request.timeout.ms is 30 s)
ATTRIBUTION_WINDOW_S = 60.0


class Releases:
    """Which code each node runs, over time: ``switching(node)`` when the test starts restarting it on
    other code, ``switched(node, release)`` once it runs it; between the two it may run either."""

    def __init__(self, nodes: Sequence[str], release: str = PREVIOUS) -> None:
        self._lock = threading.Lock()
        self._spans: dict[str, list[tuple[float, str | None]]] = {n: [(0.0, release)] for n in nodes}
        # nodes the cluster's health names kept out: the HTTP clients leave them aside, as a load balancer
        # drains a node its health check fails (their Kafka clients follow the cluster's metadata)
        self.kept_out: set[str] = set()

    def switching(self, node: str) -> None:
        with self._lock:
            self._spans[node].append((time.monotonic(), None))

    def switched(self, node: str, release: str) -> None:
        with self._lock:
            self._spans[node].append((time.monotonic(), release))

    def ran(self, node: str, at: float) -> set[str]:
        """The code ``node`` may have run at ``at`` (monotonic seconds)."""
        with self._lock:
            spans = self._spans.get(node, [])
            index = max((i for i, (since, _) in enumerate(spans) if since <= at), default=None)
            if index is None:
                return set()
            release = spans[index][1]
            if release is not None:
                return {release}
            before = next((r for _, r in reversed(spans[:index]) if r is not None), None)
            after = next((r for _, r in spans[index + 1 :] if r is not None), None)
            return {r for r in (before, after) if r is not None} or {PREVIOUS, THIS}

    def previous(self, nodes: set[str], at: float) -> str | None:
        """One of ``nodes`` that may have run the previous release at ``at``, None when none did."""
        return next((n for n in sorted(nodes) if PREVIOUS in self.ran(n, at)), None)


class ClientStats:
    """What a Kafka client last told of the cluster (its statistics): the group's coordinator and each
    partition's leader, as nodes, over the last seconds."""

    def __init__(self, brokers: dict[str, str]) -> None:
        """``brokers``: Kafka address -> node."""
        self._brokers = brokers
        self._lock = threading.Lock()
        self._seen: collections.deque[tuple[float, str | None, dict[int, str]]] = collections.deque(
            maxlen=int(ATTRIBUTION_WINDOW_S * 1000 / STATS_INTERVAL_MS) + 8
        )

    def __call__(self, text: str) -> None:  # librdkafka's stats_cb
        stats = json.loads(text)
        coordinator = stats.get("brokers", {}).get("GroupCoordinator", {}).get("nodename")
        leaders = {
            int(p): f"n{v['leader']}"
            for topic in stats.get("topics", {}).values()
            for p, v in topic.get("partitions", {}).items()
            if int(p) >= 0 and v.get("leader", -1) >= 0
        }
        with self._lock:
            self._seen.append((time.monotonic(), self._brokers.get(coordinator or ""), leaders))

    def nodes(self, at: float, partition: int | None = None) -> set[str]:
        """The coordinator's nodes (a partition's leaders, with ``partition``) seen in the window before
        ``at`` and the snapshot after it."""
        with self._lock:
            seen = list(self._seen)
        window = [s for s in seen if at - ATTRIBUTION_WINDOW_S <= s[0] <= at]
        window += [s for s in seen if s[0] > at][:1]
        if partition is None:
            return {s[1] for s in window if s[1] is not None}
        return {s[2][partition] for s in window if partition in s[2]}


@dataclass
class Tally:
    acked: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    unsure: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))  # may be there
    committed_txns: set[int] = field(default_factory=set)
    aborted_txns: set[int] = field(default_factory=set)
    committed_offsets: dict[int, int] = field(default_factory=dict)  # partition -> highest acknowledged
    web_read: list[str] = field(default_factory=list)  # what the HTTP consumer group's member read
    web_commits: int = 0  # its commits answered
    errors: list[str] = field(default_factory=list)  # none may be here
    retried: collections.Counter[str] = field(default_factory=collections.Counter)  # retriable ones seen
    # answers of a node that ran the previous release then (attributed: see the module's docstring), by
    # kind; the records' checks still hold
    previous_release: collections.Counter[str] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values()) + len(self.committed_offsets)

    def progress(self) -> dict[str, int]:
        with self.lock:
            return {
                IDEMPOTENT: len(self.acked[IDEMPOTENT]),
                TRANSACTIONAL: len(self.committed_txns),
                WEB: len(self.acked[WEB]),
                "commits": sum(self.committed_offsets.values()),
                "http commits": self.web_commits,
            }


def _kafka_error(tally: Tally, where: str, error: KafkaError, by: str | None = None) -> None:
    """A Kafka client's error: retried, or (``by``: the node of the previous release that answered it)
    tallied apart, or a failure."""
    with tally.lock:
        if error.retriable() or error.code() in INFORMATIONAL:
            tally.retried[f"{where}: {error.name()}"] += 1
        elif by is not None:
            tally.previous_release[f"{where}: {error.name()} (by {by} on {PREVIOUS})"] += 1
        else:
            tally.errors.append(f"{where}: {error}")


class Load:
    def __init__(
        self,
        http: Sequence[str],
        kafka: Sequence[str],
        only_idempotent: bool = False,
        releases: Releases | None = None,
    ) -> None:
        """``http``, ``kafka``: node n1's, n2's... addresses; ``only_idempotent``: the idempotent producer
        alone (the other parts' topics need not exist); ``releases``: which code each node runs (None:
        this checkout's, always)."""
        self.http = list(http)
        self.nodes = {url: f"n{i}" for i, url in enumerate(http, 1)}
        self.brokers = {address: f"n{i}" for i, address in enumerate(kafka, 1)}
        self.bootstrap = ",".join(kafka)
        self.releases = releases if releases is not None else Releases(list(self.nodes.values()), THIS)
        self.tally = Tally()
        self._stop = threading.Event()
        parts = (
            (self._idempotent,)
            if only_idempotent
            else (
                self._idempotent,
                self._transactional,
                self._web,
                self._member,
                self._member,
                self._web_member,
            )
        )
        self._threads = [
            threading.Thread(target=self._guarded, args=(target,), name=target.__name__, daemon=True)
            for target in parts
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
            assert not thread.is_alive(), f"{thread.name} did not stop"

    def _guarded(self, target: Any) -> None:
        try:
            target()
        except Exception as exc:  # a thread's end: noted as an error, never lost
            with self.tally.lock:
                self.tally.errors.append(f"{target.__name__} ended: {exc!r}")

    # -- the Kafka door ----------------------------------------------------------------------------

    def _producer(self, stats: ClientStats, **extra: Any) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5,
                "enable.idempotence": True, "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": stats,
            }
            | extra
        )  # fmt: skip

    def _by_previous(self, error: KafkaError, stats: ClientStats, partition: int | None = None) -> str | None:
        """The node of the previous release that may have answered ``error``: the one its text names, or
        the coordinator (a partition's leader, with ``partition``) the client saw then; None: none."""
        now = time.monotonic()
        named = {node for address, node in self.brokers.items() if address in str(error)}
        return self.releases.previous(named or stats.nodes(now, partition), now)

    def _error_cb(self, where: str, stats: ClientStats) -> Any:
        return lambda e: _kafka_error(self.tally, where, e, self._by_previous(e, stats))

    def _idempotent(self) -> None:
        tally, stats = self.tally, ClientStats(self.brokers)
        producer = self._producer(stats, error_cb=self._error_cb("idempotent producer", stats))
        n = 0

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                by = self._by_previous(error, stats, message.partition())
                _kafka_error(tally, "idempotent delivery", error, by)
                with tally.lock:
                    tally.unsure[IDEMPOTENT].add(message.value().decode())
            else:
                with tally.lock:
                    tally.acked[IDEMPOTENT].add(message.value().decode())

        while not self._stop.is_set():
            for _ in range(5):
                producer.produce(
                    IDEMPOTENT, value=f"i{n}".encode(), key=str(n % 7).encode(), on_delivery=delivered
                )
                n += 1
            producer.poll(0.1)
            time.sleep(0.1)  # about 40 records a second: a bounded load, read back whole at the end
        assert producer.flush(60) == 0, "idempotent records still in flight after 60 s"

    def _transactional(self) -> None:
        tally, stats = self.tally, ClientStats(self.brokers)
        producer = self._producer(
            stats, **{"transactional.id": "upgrade-txn", "error_cb": self._error_cb("txn producer", stats)}
        )
        producer.init_transactions(60)
        txn = 0
        while not self._stop.is_set():
            txn += 1
            try:
                producer.begin_transaction()
                for j in range(RECORDS_PER_TXN):
                    producer.produce(
                        TRANSACTIONAL, value=f"t{txn}-{j}".encode(), partition=(txn + j) % PARTITIONS
                    )
                self._commit(producer, txn)
            except KafkaException as exc:
                error = exc.args[0]
                if error.txn_requires_abort():
                    _kafka_error(tally, "transaction (aborted)", error, self._by_previous(error, stats))
                    producer.abort_transaction(60)
                    with tally.lock:
                        tally.aborted_txns.add(txn)
                else:
                    with tally.lock:
                        tally.errors.append(f"transaction {txn}: {error}")
                    return
            time.sleep(0.05)

    def _commit(self, producer: Producer, txn: int) -> None:
        for _ in range(10):  # a retriable commit is asked again, as Kafka's documentation says
            try:
                producer.commit_transaction(60)
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                _kafka_error(self.tally, "commit_transaction", exc.args[0])  # retriable: never attributed
                continue
            with self.tally.lock:
                self.tally.committed_txns.add(txn)
            return
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit_transaction retried 10 times"))

    def _member(self) -> None:
        tally, stats = self.tally, ClientStats(self.brokers)
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
            "error_cb": self._error_cb("consumer", stats), "statistics.interval.ms": STATS_INTERVAL_MS,
            "stats_cb": stats,
        })  # fmt: skip
        consumer.subscribe([IDEMPOTENT])
        try:
            while not self._stop.is_set():
                messages = consumer.consume(50, 0.5)
                for message in messages:
                    if message.error() is not None:
                        error = message.error()
                        _kafka_error(
                            tally, "consume", error, self._by_previous(error, stats, message.partition())
                        )
                if not messages:
                    continue
                try:
                    done = consumer.commit(asynchronous=False)
                except KafkaException as exc:  # answered by the group's coordinator
                    _kafka_error(tally, "offset commit", exc.args[0], self._by_previous(exc.args[0], stats))
                    continue
                with tally.lock:
                    for tp in done or []:
                        if tp.error is None and tp.offset >= 0:
                            previous = tally.committed_offsets.get(tp.partition, -1)
                            tally.committed_offsets[tp.partition] = max(previous, tp.offset)
        finally:
            consumer.close()

    # -- the HTTP door -----------------------------------------------------------------------------

    def _urls(self) -> list[str]:
        """The nodes an HTTP client asks, in order: every one but those the health names kept out."""
        kept_out = set(self.releases.kept_out)
        return [url for url in self.http if self.nodes[url] not in kept_out]

    def _post(self, path: str, body: bytes, content_type: str) -> int:
        """The status of a POST to some node (the next one after a refusal); 0: no node answered."""
        for url in self._urls():
            request = urllib.request.Request(
                url + path, data=body, headers={"Content-Type": content_type}, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    answer.read()
                    return int(answer.status)
            except urllib.error.HTTPError as refused:
                detail = refused.read().decode(errors="replace")[:300]
                if self._previous_answered(url, "POST", refused):
                    continue  # the next node, as a client does
                if refused.code not in HTTP_RETRIED:
                    with self.tally.lock:
                        self.tally.errors.append(f"POST {path}: {refused.code} {detail}")
                    return -refused.code
                with self.tally.lock:
                    self.tally.retried[f"http {refused.code}"] += 1
            except OSError as down:  # a node restarting: the next one
                with self.tally.lock:
                    self.tally.retried[f"http {type(down).__name__}"] += 1
        return 0

    def _previous_answered(self, url: str, method: str, refused: urllib.error.HTTPError) -> bool:
        """Whether a refusal came from a node running the previous release (its Server header is not this
        release's); tallied apart if so."""
        server = refused.headers.get("Server", "")
        if server == SERVER:
            return False
        node = self.nodes.get(url, url)
        ran = self.releases.ran(node, time.monotonic())
        if PREVIOUS not in ran:  # the answer says 0.1.0, the test says otherwise: the test is wrong
            with self.tally.lock:
                self.tally.errors.append(
                    f"{method} answered by {node} as {server!r}, which ran {sorted(ran)}"
                )
            return True
        with self.tally.lock:
            self.tally.previous_release[f"http {method} {refused.code} (by {node} on {PREVIOUS})"] += 1
        return True

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """One HTTP call to some node (the next one while a node is down or answers 503): the status and
        the JSON answer; (0, None) when no node answered."""
        data = None if body is None else json.dumps(body).encode()
        for url in self._urls():
            request = urllib.request.Request(
                url + path,
                data=data,
                method=method,
                headers={"Content-Type": "application/vnd.kafka.v2+json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    text = answer.read()
                    return int(answer.status), json.loads(text) if text else None
            except urllib.error.HTTPError as refused:
                if self._previous_answered(url, method, refused):
                    continue  # the next node, as a client does
                if refused.code not in HTTP_RETRIED:
                    return refused.code, refused.read().decode(errors="replace")[:300]
            except OSError:
                pass
            with self.tally.lock:
                self.tally.retried["http consumer: a node down or unavailable"] += 1
        return 0, None

    def _web_member(self) -> None:
        """A member of an HTTP consumer group reading ``web`` and committing what it read; made again when
        its instance is gone (its coordinator restarted: 404), as a REST Proxy client does."""
        tally, base, joined = self.tally, f"/consumers/{GROUP}-http", False
        while not self._stop.is_set():
            if not joined:
                status, _ = self._call(
                    "POST", base, {"name": "h1", "format": "binary", "auto.offset.reset": "earliest"}
                )
                if status in (200, 409):  # made, or still there
                    status, _ = self._call("POST", f"{base}/instances/h1/subscription", {"topics": [WEB]})
                joined = status in (200, 204)
                if not joined:
                    time.sleep(0.2)
                continue
            status, records = self._call("GET", f"{base}/instances/h1/records?timeout=500&max_bytes=1048576")
            if status == 200:
                read = [base64.b64decode(r["value"]).decode() for r in records]
                status, _ = self._call("POST", f"{base}/instances/h1/offsets")
                with tally.lock:
                    tally.web_read += [json.loads(v) if v.startswith('"') else v for v in read]
                    tally.web_commits += status in (200, 204)
            if status == 404:
                joined = False
                with tally.lock:
                    tally.retried["http consumer: instance gone, made again"] += 1
            elif status not in (200, 204, 0, 409):
                with tally.lock:
                    tally.errors.append(f"http consumer: {status} {records if status != 200 else ''}")
                return
            time.sleep(0.1)

    def _web(self) -> None:
        """JSON records with a producer id and sequence (the same request again until it is answered: no
        duplicate), then a binary batch (not retried: once refused, its records may or may not be there)."""
        tally, sequence, n = self.tally, 0, 0
        while not self._stop.is_set():
            partition = n % PARTITIONS
            values = [f"w{n}-{j}" for j in range(3)]
            body = json.dumps({
                "records": [{"value": v} for v in values], "producer_id": 4242 + partition,
                "sequence": sequence // PARTITIONS,
            }).encode()  # fmt: skip
            while not self._stop.is_set():
                status = self._post(
                    f"/topics/{WEB}/partitions/{partition}", body, "application/vnd.kafka.json.v2+json"
                )
                if status == 200:
                    with tally.lock:
                        tally.acked[WEB].update(values)
                    break
                if status < 0:
                    return
                time.sleep(0.2)
            else:
                with tally.lock:
                    tally.unsure[WEB].update(values)
            sequence += 1
            n += 1
            binary = f"b{n}"
            batch = encode_batch(0, [ProducerRecord(binary.encode())], 0, int(time.time() * 1000))
            status = self._post(
                f"/topics/{WEB}/partitions/{partition}", batch, "application/vnd.raftlog.batch.v2"
            )
            with tally.lock:
                (tally.acked if status == 200 else tally.unsure)[WEB].add(binary)
            if status < 0:
                return
            time.sleep(0.05)


# -- reading back -----------------------------------------------------------------------------------


def read_http(url: str, topic: str) -> list[str]:
    """Every record's value in ``topic``, through the HTTP door."""
    values: list[str] = []
    for partition in range(PARTITIONS):
        offset = 0
        while True:
            with urllib.request.urlopen(
                f"{url}/topics/{topic}/partitions/{partition}/records?offset={offset}", timeout=60
            ) as answer:
                records = json.loads(answer.read())
            if not records:
                break
            values += [
                r["value"] if r["format"] == "json" else base64.b64decode(r["value"]).decode()
                for r in records
            ]
            offset = records[-1]["offset"] + 1
    return values


def read_committed(bootstrap: str, topic: str) -> list[str]:
    """Every committed record's value in ``topic``, through Kafka's read_committed."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "upgrade-reader", "isolation.level": "read_committed",
        "enable.auto.commit": False, "enable.partition.eof": True,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        ended: set[int] = set()
        values: list[str] = []
        deadline = time.monotonic() + 120
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        ended.add(message.partition())
                        continue
                    raise KafkaException(message.error())
                values.append(message.value().decode())
        assert len(ended) == PARTITIONS, f"read_committed of {topic} did not reach every partition's end"
        return values
    finally:
        consumer.close()


def committed_offsets(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(IDEMPOTENT, p) for p in range(PARTITIONS)], timeout=60)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def exactly_once(name: str, read: list[str], acked: set[str], unsure: set[str]) -> list[str]:
    """What is wrong with ``read``: an acknowledged record missing, a record read twice, or one never sent."""
    counts = collections.Counter(read)
    problems = [f"{name}: {v} read {c} times" for v, c in counts.items() if c > 1]
    problems += [f"{name}: acknowledged {v} lost" for v in sorted(acked - counts.keys())]
    problems += [f"{name}: {v} was never sent" for v in sorted(counts.keys() - acked - unsure)]
    return problems


def check(load: Load, http: str) -> dict[str, int]:
    """Reads everything back; raises AssertionError listing each problem; the numbers checked."""
    tally = load.tally
    problems = list(tally.errors)
    idempotent = read_http(http, IDEMPOTENT)
    problems += exactly_once(IDEMPOTENT, idempotent, tally.acked[IDEMPOTENT], tally.unsure[IDEMPOTENT])
    web = read_http(http, WEB)
    problems += exactly_once(WEB, web, tally.acked[WEB], tally.unsure[WEB])
    transactional = read_committed(load.bootstrap, TRANSACTIONAL)
    expected = {f"t{t}-{j}" for t in tally.committed_txns for j in range(RECORDS_PER_TXN)}
    maybe = {
        f"t{t}-{j}"
        for t in range(1, max([0, *tally.committed_txns, *tally.aborted_txns]) + 2)
        if t not in tally.committed_txns and t not in tally.aborted_txns
        for j in range(RECORDS_PER_TXN)
    }  # the last one, interrupted by the stop
    problems += exactly_once(TRANSACTIONAL, transactional, expected, maybe)
    aborted = {f"t{t}-{j}" for t in tally.aborted_txns for j in range(RECORDS_PER_TXN)}
    problems += [f"{TRANSACTIONAL}: aborted {v} read" for v in sorted(aborted & set(transactional))]
    final = committed_offsets(load.bootstrap)
    problems += [
        f"group offset of {IDEMPOTENT}/{p}: {final.get(p)} after {offset} was acknowledged"
        for p, offset in sorted(tally.committed_offsets.items())
        if final.get(p, -1) < offset
    ]
    problems += [f"http consumer read {v}, never sent" for v in set(tally.web_read) - set(web)]
    assert not problems, "\n".join(problems[:40])
    return {
        "idempotent acknowledged": len(tally.acked[IDEMPOTENT]),
        "idempotent read": len(idempotent),
        "http acknowledged": len(tally.acked[WEB]),
        "http read": len(web),
        "http consumer group read": len(tally.web_read),
        "http consumer group commits": tally.web_commits,
        "transactions committed": len(tally.committed_txns),
        "transactions aborted": len(tally.aborted_txns),
        "transactional records read": len(transactional),
        "group partitions committed": len(tally.committed_offsets),
        "group offsets committed (sum)": sum(tally.committed_offsets.values()),
    }
