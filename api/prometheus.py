"""``/metrics`` in Prometheus's exposition format, through ``prometheus_client``: one catalogue of every
family a node exports (type, help, unit in the name), filled at scrape time from what the node counts.

The hot path stays the node's own: counters are plain integers where requests pass (``HttpMetrics``,
the data plane's ``counters``, the Raft transport's); a scrape turns ``NodeMetrics.metrics()`` (a flat map
``name`` or ``name{label="v",...}`` -> value) into typed families here. A name the catalogue does not know
is still exported, as an untyped family whose help says so (``tests/api/test_prometheus.py`` fails on
one, against a real node). Counters carry ``_total``; every label set is bounded (routes, topics and
partitions of the cluster, consumer groups; never a consumer instance's random id).
"""

from __future__ import annotations

import math
import platform
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    UnknownMetricFamily,
)

import raftlog
from raftlog.histogram import HistogramSnapshot

NAMESPACE = "raftlog_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNDOCUMENTED = "Not in the metrics catalogue (api/prometheus.py)."
_SERIES = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


@dataclass(frozen=True, slots=True)
class Family:
    kind: str  # "counter" | "gauge"
    help: str


# The node's metric names (without the namespace; a counter's exported name adds _total).
CATALOGUE: dict[str, Family] = {
    "produce_requests": Family("counter", "Produce requests this node applied as a partition leader."),
    "produced_records": Family(
        "counter", "Records this node appended as a partition leader (duplicates not counted)."
    ),
    "fetch_requests": Family("counter", "Fetch requests this node served as a partition leader."),
    "fetched_records": Family(
        "counter",
        "Offsets this node read for fetches as a partition leader (records and transaction markers).",
    ),
    "schema_checked_parts": Family(
        "counter",
        "Record keys and values this node decoded under their registered schema as a partition leader "
        "(topics with confluent.key/value.schema.validation).",
    ),
    "partition_replicas": Family("gauge", "Partition replicas this node holds."),
    "partition_replicas_failed": Family(
        "gauge", "Replicas on this node that cannot open or replay their log."
    ),
    "partition_logs_salvaged": Family(
        "counter", "Partition logs this node opened after setting a damaged segment aside (data/damaged/)."
    ),
    "partition_replicas_max": Family("gauge", "The most replicas this node takes (--replicas-max)."),
    "partitions_led": Family("gauge", "Partitions this node leads."),
    "partitions_moving": Family("gauge", "Partitions whose replicas are being moved, cluster-wide."),
    "client_quota_throttled_requests": Family(
        "counter",
        "Requests past a client quota, by quota: throttled (the Kafka door's throttle_time_ms and muting) "
        "or refused (the HTTP door's 429).",
    ),
    "client_quota_meters": Family("gauge", "The client quota meters this node keeps (users, client ids)."),
    "partitions_leaderless": Family("gauge", "Partitions with no known leader, as this node sees them."),
    "partitions_under_replicated": Family(
        "gauge", "Partitions with a replica down, failed or (led here) not in sync, as this node sees them."
    ),
    "nodes_down": Family("gauge", "Nodes gossip calls dead or left (decommissioned ones aside)."),
    "controller_term": Family("gauge", "The controller's Raft term (an election raises it)."),
    "log_bytes": Family("gauge", "Bytes of the partition logs this node holds."),
    "cleaner_dirty_bytes": Family(
        "gauge",
        "Bytes of compacted logs on this node written since their last compaction and cleanable now (the "
        "cleaner's lag; cleanup.policy compact).",
    ),
    "cleaner_passes": Family("counter", "Compaction passes this node ran over a log."),
    "cleaner_threads": Family(
        "gauge", "Compaction threads running on this node (log.cleaner.threads, changed while it runs)."
    ),
    "cleaner_passes_stopped": Family(
        "counter", "Compaction passes that stopped because retention or deleted records changed the log."
    ),
    "cleaner_failures": Family(
        "counter",
        "Compaction passes that failed (logged with the log's name), and looks of a compaction thread that "
        "failed (a bug, logged with its traceback; the thread goes on).",
    ),
    "cleaner_bytes_read": Family("counter", "Bytes compaction read from segments it rewrote."),
    "cleaner_bytes_reclaimed": Family("counter", "Bytes compaction removed from logs (read less written)."),
    "cleaner_records_removed": Family(
        "counter",
        "Records compaction removed: superseded by a later record of their key, expired tombstones.",
    ),
    "partition_high_watermark": Family("gauge", "Next offset to be written, per partition led here."),
    "partition_log_start_offset": Family("gauge", "First offset kept, per partition led here."),
    "partition_log_bytes": Family("gauge", "Bytes of the log, per partition led here."),
    "admin_move_steps": Family("counter", "Replica-move steps this node's operator took."),
    "admin_leadership_transfers": Family("counter", "Leadership transfers this node's operator made."),
    "removal_pending_paths": Family("gauge", "Deleted partition directories waiting to be removed."),
    "removal_pending_bytes": Family("gauge", "Bytes of deleted partition directories waiting to be removed."),
    "raft_elections_on_timeout": Family(
        "counter", "Elections this node's replicas stood for after an election timeout."
    ),
    "raft_pre_vote_rounds": Family("counter", "Pre-vote rounds this node's replicas asked for."),
    "raft_pre_votes_granted": Family("counter", "Pre-votes this node's replicas granted a peer."),
    "raft_pre_votes_refused_starting": Family(
        "counter",
        "Pre-votes this node's replicas refused in their first shortest election timeout, knowing no leader "
        "yet.",
    ),
    "leader_changes": Family(
        "counter",
        "Leaderships this node's replicas won, by cause: election, transfer, check_quorum, leader_gone "
        "(each leader change is counted once, by its new leader).",
    ),
    "raft_transport_queued_bytes": Family("gauge", "Raft bytes queued to peers, not yet sent."),
    "recovery_replicas": Family("gauge", "Replicas recovering committed records from their peers."),
    "recovery_bytes": Family("counter", "Bytes copied from peers by replica recoveries."),
    "recovery_offsets_missing": Family("gauge", "Offsets recovering replicas still miss."),
    "recovery_bytes_missing": Family("gauge", "Bytes recovering replicas still miss (estimated)."),
    "recovery_completed": Family("counter", "Replica recoveries completed."),
    "recovery_throttled_bytes": Family(
        "counter", "Bytes replica recoveries fetched from peers under a follower replication throttle."
    ),
    "recovery_throttled_seconds": Family(
        "counter", "Seconds replica recoveries waited for a follower replication throttle."
    ),
    "recovery_served_throttled_bytes": Family(
        "counter", "Bytes served to peers' replica recoveries under a leader replication throttle."
    ),
    "recovery_served_throttled_seconds": Family(
        "counter", "Seconds answers to peers' replica recoveries were held for a leader replication throttle."
    ),
    "recovery_served_throttled_refused": Family(
        "counter",
        "Answers to peers' replica recoveries sent without batches for a leader replication throttle.",
    ),
    "gossip_members": Family("gauge", "Cluster members by gossip state (alive, suspect, dead, left)."),
    "node_disk_free_bytes": Family(
        "gauge", "Free bytes on each node's data disk, as the node last gossiped."
    ),
    "node_disk_used_bytes": Family("gauge", "Bytes under each node's data directory, as it last gossiped."),
    "node_disk_full": Family(
        "gauge", "1 while a node refuses writes for want of room on its data disk, as it last gossiped."
    ),
    "disk_writes_refused": Family(
        "counter", "Writes to this node's data disk refused for want of room (ENOSPC, EDQUOT), retries too."
    ),
    "consumer_group_members": Family("gauge", "Members of a consumer group coordinated here."),
    "consumer_group_generation": Family("gauge", "Generation of a consumer group coordinated here."),
    "consumer_group_lag": Family(
        "gauge", "End offset minus committed offset, per partition of a group coordinated here."
    ),
    "transactions": Family(
        "gauge", "Transactional ids coordinated here, by the state of their transaction (Kafka's names)."
    ),
    "transaction_markers_written": Family(
        "counter", "Transaction markers this node's coordinator had written into a partition."
    ),
    "transaction_marker_retries": Family(
        "counter", "Transaction markers tried again because the partition's leader did not take them."
    ),
    "transaction_epoch_bumps": Family(
        "counter", "Transactions ended with their producer's epoch bumped (Kafka's transaction version 2)."
    ),
    "transactions_timed_out": Family(
        "counter", "Transactions this node's coordinator aborted past their timeout, fencing their producer."
    ),
    "login_failures": Family(
        "counter", "Failed logins on this node: HTTP (a password, user token or admin token) and Kafka SASL."
    ),
    "login_refusals": Family(
        "counter",
        "Logins refused unchecked (HTTP 429, SASL failed) past a failed-login bound (--login-failures-*).",
    ),
    "http_connections_open": Family("gauge", "HTTP connections open on this node (--http-connections-max)."),
    "http_connections_cut": Family(
        "counter",
        "HTTP connections this node cut or refused, by reason (header_timeout, idle_timeout, "
        "connections_max, over_share, connection_rate).",
    ),
    "kafka_connections_cut": Family(
        "counter",
        "Kafka connections this node refused or cut, by reason (refused_connections, refused_per_address, "
        "refused_connection_rate, refused_unauthenticated, cut_unauthenticated, cut_for_newcomer, "
        "refused_frames_before_auth, cut_login_timeout, cut_frame_timeout, cut_idle_timeout, "
        "cut_credential_gone, refused_per_user, refused_reserved, cut_for_login, cut_idle_at_cap, "
        "cut_over_share; --kafka-*).",
    ),
    "kafka_fetch_sessions": Family(
        "gauge", "Incremental fetch sessions (KIP-227) this node holds (at most 1000, Kafka's cache slots)."
    ),
    "kafka_fetches": Family(
        "counter",
        "Kafka Fetch requests this node answered, by kind: full (every partition asked, a session opened or "
        "not) or incremental (from a fetch session, only the partitions that changed).",
    ),
    "kafka_fetch_session_errors": Family(
        "counter",
        "Fetches naming a session this node does not hold or at another epoch (FETCH_SESSION_ID_NOT_FOUND, "
        "INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR): the client fetches in full again.",
    ),
    "kafka_fetch_session_evictions": Family(
        "counter", "Fetch sessions this node dropped for a newcomer at its bound, as Kafka's cache evicts."
    ),
    "request_bytes_held": Family(
        "gauge",
        "Bytes of requests being received or served, and of large answers being read or written out, on "
        "this node's listener, by door (http, kafka; --http-request-bytes-max, --kafka-request-bytes-max).",
    ),
    "request_bytes_waits": Family(
        "counter",
        "Requests that waited for room in their listener's budget of request bytes, by door: their socket "
        "was not read meanwhile.",
    ),
}
# Latency histograms (seconds) a node keeps (``MetadataView.histograms``)
HISTOGRAMS: dict[str, str] = {
    "produce_commit_seconds": "A produce on its partition's leader, from proposing its batch to its commit "
    "by a majority and apply here (acks=all).",
    "journal_sync_seconds": "One fsync (or fdatasync) of the Raft journal, whatever group it made durable.",
    "gc_pause_seconds": "One garbage collection of this node's process, any generation: every thread waits "
    "for it (the GIL).",
    "event_loop_lag_seconds": "How much later than due the node's event loop woke a 50 ms timer (a callback "
    "holding the loop, or the process waiting for a CPU).",
    "event_loop_held_cpu_seconds": "Of each such lateness, the CPU time this node's process spent (a "
    "callback computing, a garbage collection, a thread holding the GIL): what its own code held the loop "
    "for; waiting for a CPU on a loaded machine adds none.",
    "cleaner_pass_seconds": "One compaction pass over one log (mapping, rewriting, swapping; paced).",
    "kafka_request_seconds": "A Kafka request's handling on this node's Kafka listener, by API (Produce, "
    "Fetch, ...): from its frame read to its answer (a produce's wait for its commit, a fetch's long poll "
    "included), its encoding and sending not.",
    "raft_driver_round_seconds": "One round of a Raft driver thread (calls, receiving, ticking the due "
    "groups, flushing): a long one holds back every group it drives.",
}
# The Raft transport's counters (frames, dials, drops by cause, ...): every raft_transport_* but queued_bytes
TRANSPORT_PREFIX = "raft_transport_"


def family_of(name: str) -> Family | None:
    known = CATALOGUE.get(name)
    if known is None and name.startswith(TRANSPORT_PREFIX):
        return Family("counter", f"Raft transport: {name[len(TRANSPORT_PREFIX) :].replace('_', ' ')}.")
    return known


def _parse(series: str) -> tuple[str, dict[str, str]]:
    match = _SERIES.match(series)
    if match is None:
        return _INVALID.sub("_", series), {}
    pairs = _LABEL.findall(match.group(2) or "")
    labels = {key: value.replace('\\"', '"').replace("\\\\", "\\") for key, value in pairs}
    return match.group(1), labels


def node_families(values: Mapping[str, float]) -> Iterator[Metric]:
    """The node's flat metrics as typed families (one per name, its series by label set)."""
    grouped: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for series, value in values.items():
        name, labels = _parse(series.removeprefix(NAMESPACE))
        grouped[name].append((labels, value))
    for name, samples in sorted(grouped.items()):
        family = family_of(name)
        label_names = sorted({key for labels, _ in samples for key in labels})
        full = NAMESPACE + name
        metric: CounterMetricFamily | GaugeMetricFamily | UnknownMetricFamily
        if family is None:
            metric = UnknownMetricFamily(full, UNDOCUMENTED, labels=label_names)
        elif family.kind == "counter":
            metric = CounterMetricFamily(full, family.help, labels=label_names)
        else:
            metric = GaugeMetricFamily(full, family.help, labels=label_names)
        for labels, value in samples:
            metric.add_metric([labels.get(key, "") for key in label_names], value)
        yield metric


def histogram_families(snapshots: Mapping[str, HistogramSnapshot]) -> Iterator[Metric]:
    for name, snapshot in sorted(snapshots.items()):
        help_text = HISTOGRAMS.get(name, UNDOCUMENTED)
        family = histogram(name, help_text, [])
        family.add_metric([], cumulative_buckets(snapshot.bounds, snapshot.counts), snapshot.sum)
        yield family


def labelled_histogram(name: str, label: str, snapshots: Mapping[str, HistogramSnapshot]) -> Metric:
    """One histogram family (documented in ``HISTOGRAMS``) with a series per value of ``label``."""
    family = histogram(name, HISTOGRAMS.get(name, UNDOCUMENTED), [label])
    for value, snapshot in sorted(snapshots.items()):
        family.add_metric([value], cumulative_buckets(snapshot.bounds, snapshot.counts), snapshot.sum)
    return family


def cumulative_buckets(bounds: Iterable[float], counts: Iterable[int]) -> list[tuple[str, float]]:
    """Per-bucket counts (the last: above every bound) as Prometheus's cumulative ``le`` buckets."""
    buckets = []
    total = 0
    for bound, count in zip((*bounds, math.inf), counts, strict=True):
        total += count
        buckets.append(("+Inf" if math.isinf(bound) else repr(bound), float(total)))
    return buckets


class _Collector:
    """What one scrape exports: the node's families and histograms, the HTTP ones, build info."""

    def __init__(
        self,
        node_values: Mapping[str, float],
        histograms: Mapping[str, HistogramSnapshot],
        http: Iterable[Metric],
    ) -> None:
        self._node_values = node_values
        self._histograms = histograms
        self._http = list(http)

    def collect(self) -> Iterator[Metric]:
        yield from node_families(self._node_values)
        yield from histogram_families(self._histograms)
        yield from self._http
        info = GaugeMetricFamily(
            NAMESPACE + "build_info",
            "The raftlog version this node runs (value 1).",
            labels=["version", "python"],
        )
        info.add_metric([raftlog.version(), platform.python_version()], 1)
        yield info


def exposition(
    node_values: Mapping[str, float], histograms: Mapping[str, HistogramSnapshot], http: Iterable[Metric]
) -> bytes:
    """The text of one scrape, with the process's own metrics (CPU, memory, open files)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(node_values, histograms, http))
    ProcessCollector(registry=registry)
    return generate_latest(registry)


def histogram(name: str, help_text: str, labels: list[str]) -> HistogramMetricFamily:
    return HistogramMetricFamily(NAMESPACE + name, help_text, labels=labels)
