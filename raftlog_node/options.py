"""Every option of ``raftlog serve``, declared once: its name, type, default, bounds, what ``raftlog dev``
gives every node, and what it does. From this table come the command line (``add_arguments``), the
bounds checks (``check_bounds``), what ``raftlog dev`` adds to each node's options (``dev_arguments``) and
the option table of ``docs/serve-options.md`` (``python -m raftlog_node.options > docs/serve-options.md``;
a test compares).
A default is declared once, in a leaf: its room's defaults (``partitions/groups/defaults.py``,
``raftlog/storage/defaults.py``...) or a module that only declares settings (``api/http_settings.py``,
``kafka_api/limits.py``); the modules that use it import it from there. The table imports only leaves, so
building a command line (``raftlog dev``, the fault harness) loads nothing of the server
(``tests/test_architecture.py``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Literal

from api.http_settings import HttpLimits
from kafka_api.limits import Limits as KafkaLimits
from partitions.controller.defaults import (
    NUM_PARTITIONS_DEFAULT,
    PARTITIONS_MAX,
    REPLICAS_MAX_DEFAULT,
    REPLICATION_FACTOR_DEFAULT,
)
from partitions.groups.defaults import CONSUMER_SESSION_TIMEOUT_MS_DEFAULT as CONSUMER_SESSION_MS_DEFAULT
from partitions.groups.defaults import (
    INITIAL_DELAY_MS_DEFAULT,
    MIGRATION_POLICIES,
    MIGRATION_POLICY_DEFAULT,
    SHARE_GROUPS_MAX_DEFAULT,
    SHARE_LOCK_MS_DEFAULT,
)
from partitions.groups.defaults import REGEX_RESOLVE_BUDGET_MS_DEFAULT as REGEX_BUDGET_MS_DEFAULT
from partitions.replicas.defaults import CONTROLLED_SHUTDOWN_MS_DEFAULT
from partitions.replicas.defaults import RECOVERY_RATE_BYTES_PER_S_DEFAULT as RATE_BYTES_PER_S_DEFAULT
from partitions.security.defaults import (
    DELEGATION_TOKEN_EXPIRY_TIME_MS_DEFAULT,
    DELEGATION_TOKEN_MAX_LIFETIME_MS_DEFAULT,
    DELEGATION_TOKEN_MS_MAX,
    DELEGATION_TOKEN_MS_MIN,
)
from partitions.security.login_failures import LoginLimits
from partitions.security.tokens import TOKEN_LIFETIME_MS_DEFAULT, TOKEN_LIFETIME_MS_MAX
from partitions.transactions.defaults import TRANSACTION_TIMEOUT_MS_MAX_DEFAULT
from raftlog.consensus.defaults import (
    COMPACTION_MIN_BYTES_DEFAULT,
    JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT,
    JOURNAL_SYNC_THREADS_DEFAULT,
)
from raftlog.storage.defaults import (
    CLEANER_INTERVAL_MS_DEFAULT,
    CLEANER_RATE_BYTES_PER_S_DEFAULT,
    INFLATED_BYTES_MAX_DEFAULT,
    RETENTION_CHECK_MS_DEFAULT,
)
from raftlog_node.logs import LOG_FILE_MAX_MIB_DEFAULT, LOG_FILES_KEPT_DEFAULT
from raftlog_node.process import GC_GEN0_DEFAULT, MALLOC_KEEP_MIB_DEFAULT
from raftlog_node.tls import CLIENT_AUTH

SECRET_ENV = "RAFTLOG_CLUSTER_SECRET"
TOKEN_ENV = "RAFTLOG_ADMIN_TOKEN"
MiB = 1024 * 1024
RECOVERY_RATE_MIB_DEFAULT = RATE_BYTES_PER_S_DEFAULT // MiB
JOURNAL_COMPACTION_MIN_MIB_DEFAULT = COMPACTION_MIN_BYTES_DEFAULT // MiB
INFLATED_BATCH_MAX_MIB_DEFAULT = INFLATED_BYTES_MAX_DEFAULT // MiB
INFLATED_BATCH_MAX_MIB_LIMIT = 2047  # a stored batch is read up to 2 GiB inflated (batch.py)
GROUP_INITIAL_DELAY_MS_MAX = 300_000  # five minutes, a Kafka consumer's default rebalance timeout

Kind = Literal["int", "text", "switch", "repeated", "choice", "refused"]


class ServeConfigError(ValueError):
    """A command-line setting that cannot be used; the node refuses to start."""


@dataclass(frozen=True, slots=True)
class Option:
    flag: str  # --retention-check-ms
    help: str
    kind: Kind = "int"  # a whole number; text; a switch; text repeatable; one of choices; taken to refuse
    default: Any = None
    low: int | None = None  # the bounds of a whole number, inclusive
    high: int | None = None
    note: str = ""  # said after the bounds when a value is refused
    dev: Any = None  # what ``raftlog dev`` gives every node, when not the default
    required: bool = False
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    field: str | None = None  # the listener limits' field it fills (an ``-ms`` option fills its seconds)

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def check(self, value: int) -> int:
        """``value`` when within the bounds, else ServeConfigError naming the option, the value and them."""
        if (self.low is None or value >= self.low) and (self.high is None or value <= self.high):
            return value
        bounds = f">= {self.low}" if self.high is None else f"in [{self.low}, {self.high}]"
        note = f" ({self.note})" if self.note else ""
        raise ServeConfigError(f"{self.flag} {value}: must be {bounds}{note}")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.kind == "refused":  # never in argv, which every local user reads (ps): taken to refuse it
            parser.add_argument(self.flag, help=argparse.SUPPRESS)
        elif self.kind == "switch":
            parser.add_argument(self.flag, action="store_true", help=self.help)
        elif self.kind == "repeated":
            parser.add_argument(self.flag, action="append", default=[], metavar=self.metavar, help=self.help)
        elif self.kind == "choice":
            parser.add_argument(self.flag, choices=self.choices, default=self.default, help=self.help)
        elif self.kind == "text":
            parser.add_argument(self.flag, required=self.required, metavar=self.metavar, help=self.help)
        else:
            help = f"{self.help} (default {self.default})"
            parser.add_argument(self.flag, type=int, default=self.default, metavar=self.metavar, help=help)


def _ms_limit(flag: str, field: str, default_s: float, help: str) -> Option:
    return Option(flag, help, default=int(default_s * 1000), low=1, field=field)


def _limit(flag: str, field: str, default: int, help: str) -> Option:
    return Option(flag, help, default=default, low=1, field=field)


ADDRESSES = (
    Option("--node-id", "this node's id, e.g. n1", "text", required=True),
    Option("--data-dir", "where this node keeps its logs and Raft journals", "text", required=True),
    Option("--http", "HOST:PORT for the HTTP API", "text", required=True),
    Option("--raft", "HOST:PORT for Raft traffic between nodes", "text", required=True),
    Option("--peer", "another node of the cluster (repeat for each)", "repeated",
           metavar="ID,HTTP_HOST:PORT,RAFT_HOST:PORT"),
    Option("--kafka", "serve the Kafka wire protocol here (Kafka clients and tools: kafka_api/README.md)",
           "text", metavar="HOST:PORT"),
    Option("--kafka-advertised",
           "the Kafka address clients are told to reach this node at, when it differs from --kafka "
           "(required when --kafka listens on a wildcard address)", "text", metavar="HOST:PORT"),
    Option("--gossip", "HOST:PORT for SWIM gossip (UDP and TCP; default: HTTP port + 200)", "text"),
    Option("--seed", "gossip address of a node to join through (repeat for several)", "repeated",
           metavar="HOST:PORT"),
    Option("--join", "join a running cluster through --seed: hold replicas but no controller replica",
           "switch"),
    Option("--event-loop", "uvloop (default: less CPU per HTTP request) or the standard library's asyncio "
           "loop", "choice", default="uvloop", choices=("uvloop", "asyncio")),
)  # fmt: skip

SECURITY = (
    Option("--secret-file", f"file holding the cluster secret (else ${SECRET_ENV})", "text", metavar="FILE"),
    Option("--admin-token-file",
           f"file holding the bearer token required on /v1 (else ${TOKEN_ENV} if set); make it readable by "
           "its owner only", "text", metavar="FILE"),
    Option("--admin-token", "refused: the token would show in every local user's ps", "refused"),
    Option("--super-user",
           "a user who may manage SCRAM credentials over Kafka (AlterUserScramCredentials) and bypasses "
           "ACLs, as Kafka's super.users (repeatable)", "repeated", metavar="NAME"),
    Option("--tls-cert", "PEM certificate (chain) of the HTTP and Kafka listeners: TLS on both", "text",
           metavar="FILE"),
    Option("--tls-key", "PEM private key of --tls-cert", "text", metavar="FILE"),
    Option("--tls-ca",
           "PEM CA certificates trusted for client certificates and for the other nodes (default: the "
           "system's roots)", "text", metavar="FILE"),
    Option("--tls-client-auth",
           "client certificates: none (default), optional (checked when sent) or required", "choice",
           default="none", choices=tuple(sorted(CLIENT_AUTH))),
    Option("--metrics-token-file",
           "with --require-auth, /metrics (which names every topic, group and offset) takes the token in "
           "FILE (or the admin token) as 'Authorization: Bearer <token>', Prometheus's authorization "
           "credentials_file; make it readable by its owner only", "text", metavar="FILE"),
    Option("--require-auth",
           "every data and consumer endpoint needs HTTP Basic with a user of /v1/users (or the admin token "
           "as a bearer token), and the Kafka listener SASL (PLAIN, SCRAM-SHA-256/512) as one; needs an "
           f"admin token (--admin-token-file or ${TOKEN_ENV}), and TLS beyond loopback", "switch"),
    Option("--enforce-acls",
           "check every client request against the ACLs (/v1/acls, raftlog acl, Kafka's CreateAcls): "
           "nothing is allowed without one, but to super users and the admin token; needs --require-auth",
           "switch"),
    Option("--allow-unauthenticated",
           "serve HTTP or Kafka beyond loopback without --require-auth (a closed test network only)",
           "switch"),
    Option("--allow-plaintext-auth",
           "--require-auth beyond loopback without TLS (a closed network only): passwords, tokens and the "
           "node-to-node credential then cross the network in clear, and whoever reads one can replay it",
           "switch"),
    Option("--public-metrics", "with --require-auth, serve /metrics to anyone (a closed network only)",
           "switch"),
    Option("--api-token-lifetime-ms",
           "a user's API token made without an expiry (lifetime_ms or expires_ms) expires after this (7 "
           "days: Kafka's delegation.token.max.lifetime.ms)", default=TOKEN_LIFETIME_MS_DEFAULT, low=60_000,
           high=TOKEN_LIFETIME_MS_MAX),
    Option("--delegation-token-max-lifetime-ms",
           "a Kafka delegation token is never renewed past this after it was made (Kafka's "
           "delegation.token.max.lifetime.ms; CreateDelegationToken may ask for less)",
           default=DELEGATION_TOKEN_MAX_LIFETIME_MS_DEFAULT, low=DELEGATION_TOKEN_MS_MIN,
           high=DELEGATION_TOKEN_MS_MAX),
    Option("--delegation-token-expiry-time-ms",
           "a Kafka delegation token expires this long after it was made or last renewed, never past its max "
           "lifetime (Kafka's delegation.token.expiry.time.ms; RenewDelegationToken may ask for less)",
           default=DELEGATION_TOKEN_EXPIRY_TIME_MS_DEFAULT, low=DELEGATION_TOKEN_MS_MIN,
           high=DELEGATION_TOKEN_MS_MAX),
    Option("--login-bounds-on-loopback",
           "apply --login-failures-per-address-max to loopback clients too (by default they are exempt: "
           "every local tool shares the address; the per-user bound still applies)", "switch"),
)  # fmt: skip

TUNING = (
    Option("--retention-check-ms", "how often retention deletes old segments",
           default=RETENTION_CHECK_MS_DEFAULT, low=1),
    Option("--cleaner-interval-ms",
           "how often compaction looks at the node's compacted logs (cleanup.policy compact; Kafka's "
           "log.cleaner.backoff.ms)", default=CLEANER_INTERVAL_MS_DEFAULT, low=10, high=3_600_000),
    Option("--cleaner-rate-mib", "MiB per second that compaction reads and writes, all logs of this node "
           "together", default=CLEANER_RATE_BYTES_PER_S_DEFAULT // MiB, low=1, high=1 << 20),
    Option("--gc-gen0",
           "allocations between young-generation garbage collections once serving; startup objects are "
           "frozen (0 keeps Python's defaults)", default=GC_GEN0_DEFAULT, low=0,
           note="0 keeps Python's defaults"),
    Option("--malloc-keep-mib",
           "buffers up to 32 MiB come from the heap and up to this much freed heap is kept for reuse "
           "instead of being returned to the OS and faulted in again (glibc; 0 keeps glibc's defaults)",
           default=MALLOC_KEEP_MIB_DEFAULT, low=0, note="0 keeps glibc's defaults"),
    Option("--journal-sync-threads",
           "threads writing and fsyncing large Raft journal appends, and every append while the disk's "
           "small syncs are slow (2 ms or more on average), so the Raft thread goes on meanwhile "
           "(0: the Raft thread does every sync)", default=JOURNAL_SYNC_THREADS_DEFAULT, low=0, high=64),
    Option("--journal-sync-thread-min-kib",
           "smallest journal append handed to a sync thread; smaller ones are synced by the Raft thread, "
           "which costs less CPU than the hand-off (0: all)", default=JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT,
           low=0, high=1 << 20),
    Option("--replicas-max",
           "partition replicas this node may hold; a topic or move beyond it is refused up front (see "
           "docs/performance.md, 'Partitions per cluster'; the controller leader's setting applies, so "
           "give every node the same)", default=REPLICAS_MAX_DEFAULT, low=1),
    Option("--recovery-rate-mib",
           "MiB per second that all replicas of this node recovering records from their peers copy "
           "together (a replica whose log is behind the snapshot it installed)",
           default=RECOVERY_RATE_MIB_DEFAULT, low=1, high=1 << 20),
    Option("--controlled-shutdown-ms",
           "a stop (SIGTERM) first closes the Kafka listener once the produces it read are answered, then "
           "hands the leadership of every partition and of the controller this node leads to another "
           "replica, each step for at most this long, so they move without an election timeout "
           "(Kafka's controlled.shutdown.enable; 0: none, the others elect as after a crash)",
           default=CONTROLLED_SHUTDOWN_MS_DEFAULT, low=0, high=600_000),
    Option("--journal-compaction-min-mib",
           "a Raft group's journal is compacted behind a snapshot once it holds more than this; a replica "
           "missing what was compacted installs the snapshot and recovers the records from its peers",
           default=JOURNAL_COMPACTION_MIN_MIB_DEFAULT, low=1, high=1 << 20),
    Option("--inflated-batch-max-mib",
           "the most a producer's compressed batch's records may inflate to (or its topic's "
           "max.message.bytes when larger): past it the batch is refused as too large, inflating stopped "
           "there, so a decompression bomb cannot fill the node's memory",
           default=INFLATED_BATCH_MAX_MIB_DEFAULT, low=1, high=INFLATED_BATCH_MAX_MIB_LIMIT),
    Option("--auto-create-topics",
           "a Kafka Metadata request naming topics that do not exist creates them, with --num-partitions "
           "and --default-replication-factor, when the client allows it (librdkafka's producers do; "
           "Kafka's auto.create.topics.enable); with --enforce-acls only for a user allowed CREATE on the "
           "cluster or the topic. Give every node the same. Off by default; raftlog dev runs it, as Kafka's "
           "default",
           "switch", dev=True),
    Option("--num-partitions",
           "partitions of a topic created by --auto-create-topics, or by a Kafka CreateTopics that leaves "
           "them to the broker (Kafka's num.partitions)", default=NUM_PARTITIONS_DEFAULT, low=1,
           high=PARTITIONS_MAX),
    Option("--default-replication-factor",
           "replicas of such a topic (Kafka's default.replication.factor; a creation it cannot place is "
           "refused INVALID_REPLICATION_FACTOR); 0: three, or one on every live node when fewer are alive",
           default=REPLICATION_FACTOR_DEFAULT, low=0,
           note="0: three, or every live node when fewer"),
    Option("--transaction-max-timeout-ms",
           "the longest transaction a transactional producer may ask for (its transaction.timeout.ms): a "
           "longer one is refused INVALID_TRANSACTION_TIMEOUT at InitProducerId (Kafka's "
           "transaction.max.timeout.ms); the coordinator aborts a transaction open past its own timeout",
           default=TRANSACTION_TIMEOUT_MS_MAX_DEFAULT, low=1, high=2**31 - 1),
    Option("--group-initial-rebalance-delay-ms",
           "a Kafka consumer group's first rebalance (from Empty) waits this long for more members, and as "
           "long again while new ones keep joining, within the rebalance timeout: consumers starting "
           "together share the first assignment (Kafka's group.initial.rebalance.delay.ms; raftlog dev "
           "runs 0, as Kafka's own development configuration)", default=INITIAL_DELAY_MS_DEFAULT, low=0,
           high=GROUP_INITIAL_DELAY_MS_MAX, dev=0),
    Option("--group-consumer-session-timeout-ms",
           "a consumer group protocol member (KIP-848, group.protocol=consumer) not heard from this long "
           "is fenced and its partitions assigned to the others (Kafka's group.consumer.session.timeout.ms); "
           "a group's own consumer.session.timeout.ms (kafka-configs --entity-type groups) overrides it",
           default=CONSUMER_SESSION_MS_DEFAULT, low=1_000, high=300_000),
    Option("--group-consumer-regex-budget-ms",
           "the time one consumer group regex subscription (KIP-848's SubscribedTopicRegex) may take to be "
           "matched against every topic, on a thread of its own (RE2, linear time): a new regex past it is "
           "refused INVALID_REGULAR_EXPRESSION, a kept one keeps the topics it matched; the heartbeat "
           "waits for it, so it stays under a client's request timeout",
           default=REGEX_BUDGET_MS_DEFAULT, low=10, high=30_000),
    Option("--group-consumer-migration-policy",
           "which of Kafka's online migrations a group may make (Kafka's group.consumer.migration.policy): "
           "upgrade or bidirectional let a consumer protocol member (group.protocol=consumer) joining a "
           "classic group with members convert it, otherwise refused GROUP_ID_NOT_FOUND; disabled refuses "
           "a classic member joining a consumer protocol group with members INCONSISTENT_GROUP_PROTOCOL; "
           "downgrade or bidirectional turn a consumer protocol group whose last member of that protocol "
           "left back into a classic group of its classic members, otherwise they stay in it", "choice",
           default=MIGRATION_POLICY_DEFAULT, choices=MIGRATION_POLICIES),
    Option("--group-share-record-lock-duration-ms",
           "how long a share group member holds a record it acquired before it is delivered to another "
           "(KIP-932, Kafka's group.share.record.lock.duration.ms), unless acknowledged first",
           default=SHARE_LOCK_MS_DEFAULT, low=1_000, high=3_600_000),
    Option("--group-share-max-groups",
           "share groups (KIP-932) each partition of __consumer_groups may coordinate (4 partitions by "
           "default: the cluster holds at most 4 times this), each holding state in every partition it "
           "reads: a member joining a group that would be one more is refused (GROUP_MAX_SIZE_REACHED, "
           "409/40933) until one is deleted. Named after Kafka 4.0's group.share.max.groups, which Kafka "
           "never enforced; the leader of the group's partition applies its own, so give every node the "
           "same", default=SHARE_GROUPS_MAX_DEFAULT, low=1, high=100_000),
)  # fmt: skip

_KAFKA = KafkaLimits()
# the Kafka listener's bounds (kafka_api/limits.py)
KAFKA_LIMITS = (
    _limit("--kafka-connections-max", "connections_max", _KAFKA.connections_max,
           "Kafka connections open at once on this node; past it, without --require-auth, a newcomer from "
           "an address holding fewer takes the oldest connection of the address holding most, else it is "
           "refused"),
    _limit("--kafka-connections-per-address-max", "connections_per_address_max",
           _KAFKA.connections_per_address_max,
           "Kafka connections open at once from one client address (Kafka's max.connections.per.ip, which "
           "Kafka leaves unbounded: by default as many as the node-wide default)"),
    _limit("--kafka-unauthenticated-connections-max", "unauthenticated_connections_max",
           _KAFKA.unauthenticated_connections_max,
           "Kafka connections not yet authenticated at once, with --require-auth: the rest of "
           "--kafka-connections-max stays for authenticated clients"),
    _ms_limit("--kafka-login-timeout-ms", "login_timeout_s", _KAFKA.login_timeout_s,
              "a Kafka connection not authenticated within it is closed, with --require-auth"),
    _ms_limit("--kafka-idle-timeout-ms", "idle_timeout_s", _KAFKA.idle_timeout_s,
              "a Kafka connection sending no request within it is closed (Kafka's connections.max.idle.ms)"),
    _ms_limit("--kafka-frame-timeout-ms", "frame_timeout_s", _KAFKA.frame_timeout_s,
              "a Kafka request's bytes must start coming within it once its first byte came (and its room "
              "was taken), then keep coming at --kafka-frame-rate-min-bytes-per-s; else its connection is "
              "closed, so a frame whose bytes stop loses its room this long after"),
    _limit("--kafka-frame-rate-min-bytes-per-s", "frame_rate_min_bytes_per_s",
           _KAFKA.frame_rate_min_bytes_per_s,
           "after --kafka-frame-timeout-ms, the pace a Kafka request's bytes must keep (1 MiB/s: 8 Mbit/s, "
           "a slow link's; a 100 MiB request in 110 s)"),
    _ms_limit("--kafka-tls-handshake-timeout-ms", "tls_handshake_timeout_s", _KAFKA.tls_handshake_timeout_s,
              "a TLS handshake on the Kafka listener must end within it"),
    _limit("--kafka-connections-per-user-max", "connections_per_user_max", _KAFKA.connections_per_user_max,
           "Kafka connections one logged-in user (not a super user) holds at once; a login past it is "
           "refused"),
    _limit("--kafka-super-user-reserve", "super_user_reserve", _KAFKA.super_user_reserve,
           "of --kafka-connections-max, the connections only super users' logins take (so an admin can "
           "always log in; at --kafka-connections-max or more only super users may log in); when the rest "
           "is full, each logged-in user has a fair share of it (the rest / their number): a login of a "
           "user below its share takes the least recently active connection, busy or not, of the user "
           "holding most above its share, else it is refused"),
    _ms_limit("--kafka-idle-at-cap-timeout-ms", "idle_at_cap_timeout_s", _KAFKA.idle_at_cap_timeout_s,
              "a logged-in user at --kafka-connections-per-user-max has its connections idle this long "
              "closed"),
    _limit("--kafka-request-bytes-super-user-reserve", "request_bytes_super_user_reserve",
           _KAFKA.request_bytes_super_user_reserve,
           "of --kafka-request-bytes-max, the bytes only super users' requests take (ordinary users share "
           "the rest but the login reserve): an admin's requests never wait for what users hold"),
    _limit("--kafka-request-bytes-before-login-reserve", "request_bytes_before_login_reserve",
           _KAFKA.request_bytes_before_login_reserve,
           "of --kafka-request-bytes-max, the bytes frames before login (SASL, ApiVersions; each at most "
           "512 KiB) take, and all they take, with --require-auth: logins never wait for what users hold"),
    _limit("--kafka-request-bytes-max", "request_bytes_max", _KAFKA.request_bytes_max,
           "bytes of Kafka requests being received or queued on this listener (Kafka's "
           "queued.max.request.bytes); past it the listener stops reading until requests are answered"),
    _limit("--kafka-request-bytes-per-user-max", "request_bytes_per_user_max",
           _KAFKA.request_bytes_per_user_max,
           "of --kafka-request-bytes-max, what one logged-in user (an anonymous connection: its address) "
           "holds"),
    _limit("--kafka-share-sessions-per-connection-max", "share_sessions_per_connection_max",
           _KAFKA.share_sessions_per_connection_max,
           "share sessions (KIP-932) one Kafka connection holds on this node (a share consumer holds one "
           "per connection); one more is refused SHARE_SESSION_LIMIT_REACHED until one ends"),
    _limit("--kafka-share-sessions-per-user-max", "share_sessions_per_user_max",
           _KAFKA.share_sessions_per_user_max,
           "share sessions one logged-in user holds on this node, of the 2,000 it holds (Kafka's "
           "group.share.max.share.sessions); one more is refused SHARE_SESSION_LIMIT_REACHED until one "
           "ends"),
)  # fmt: skip

_HTTP = HttpLimits()
# the HTTP listener's bounds (api/http_limits.py)
HTTP_LIMITS = (
    _ms_limit("--http-header-timeout-ms", "header_timeout_s", _HTTP.header_timeout_s,
              "an HTTP request's head (request line and headers) must arrive within it, else 408 and the "
              "connection closed"),
    _ms_limit("--http-body-timeout-ms", "body_timeout_s", _HTTP.body_timeout_s,
              "an HTTP request's body must arrive whole within it, else 408 and the connection closed"),
    _ms_limit("--http-body-grace-ms", "body_grace_s", _HTTP.body_grace_s,
              "an HTTP request body's bytes must start coming within it once its room was taken, then keep "
              "coming at --http-body-rate-min-bytes-per-s, else 408 and the connection closed: a body "
              "announced and not sent loses its room this long after"),
    _limit("--http-body-rate-min-bytes-per-s", "body_rate_min_bytes_per_s", _HTTP.body_rate_min_bytes_per_s,
           "after --http-body-grace-ms, the pace an HTTP body's bytes must keep (512 KiB/s: 16 MiB in 32 s, "
           "the pace --http-body-timeout-ms asks of the largest body)"),
    _ms_limit("--http-idle-timeout-ms", "idle_timeout_s", _HTTP.idle_timeout_s,
              "a kept-alive HTTP connection sending no next request within it is closed"),
    _limit("--http-connections-max", "connections_max", _HTTP.connections_max,
           "HTTP connections open at once on this node; more are answered 503 and closed"),
    _limit("--http-connections-per-address-max", "connections_per_address_max",
           _HTTP.connections_per_address_max,
           "HTTP connections open at once from one client address; more are answered 503 and closed"),
    _limit("--http-request-bytes-max", "request_bytes_max", _HTTP.request_bytes_max,
           "bytes of HTTP request bodies being read or served on this node; a body waits for room (its "
           "socket not read), answered 503 when none came within --http-body-timeout-ms"),
    _limit("--http-request-bytes-per-user-max", "request_bytes_per_user_max",
           _HTTP.request_bytes_per_user_max,
           "of --http-request-bytes-max, what one caller (a user, else a client address) holds"),
    _limit("--http-request-bytes-super-user-reserve", "request_bytes_super_user_reserve",
           _HTTP.request_bytes_super_user_reserve,
           "of --http-request-bytes-max, the bytes only super users' and the admin token's bodies take: "
           "their writes never wait for what other callers hold"),
)  # fmt: skip

_LOGIN = LoginLimits()
# the bounds on failed logins, on both doors (partitions/security/login_failures.py)
LOGIN_LIMITS = (
    _limit("--login-failures-per-address-max", "per_address_max", _LOGIN.per_address_max,
           "failed logins (HTTP Basic, tokens, SASL) from one client address within "
           "--login-failure-window-ms, after which its attempts are refused unchecked (HTTP 429 with "
           "Retry-After) until the window ends"),
    _limit("--login-failures-per-user-max", "per_user_max", _LOGIN.per_user_max,
           "failed logins for one user name within --login-failure-window-ms, from any address, after "
           "which its attempts are refused unchecked until the window ends"),
    _ms_limit("--login-failure-window-ms", "window_s", _LOGIN.window_s,
              "the window failed logins are counted in"),
)  # fmt: skip

LOGS = (
    Option("--log-file",
           "write the node's log here instead of stderr (its stdout and stderr too), rotated by size; "
           "raftlog dev gives each node DATA/ID/node.log", "text", metavar="FILE"),
    Option("--log-file-max-mib", "with --log-file: a file's size before it is rotated (FILE.1, FILE.2, ...)",
           default=LOG_FILE_MAX_MIB_DEFAULT, low=1, high=1 << 20),
    Option("--log-files-kept", "with --log-file: rotated files kept besides the current one (the oldest "
           "removed)", default=LOG_FILES_KEPT_DEFAULT, low=1, high=1000),
)  # fmt: skip

SECTIONS = (
    ("Addresses and the cluster", ADDRESSES),
    ("Security", SECURITY),
    ("Tuning", TUNING),
    ("The node's log", LOGS),
    ("The Kafka listener's bounds", KAFKA_LIMITS),
    ("The HTTP listener's bounds", HTTP_LIMITS),
    ("Failed logins", LOGIN_LIMITS),
)
OPTIONS = tuple(option for _, options in SECTIONS for option in options)
BY_FLAG = {option.flag: option for option in OPTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for option in OPTIONS:
        option.add_to(parser)


def check_bounds(args: argparse.Namespace) -> None:
    """Every whole-number option within its bounds, else ServeConfigError naming the first that is not."""
    for option in OPTIONS:
        if option.kind == "int":
            option.check(getattr(args, option.dest))


def limit_fields(args: argparse.Namespace, options: tuple[Option, ...]) -> dict[str, Any]:
    """The listener limits' fields the options fill, checked (an ``-ms`` option fills its seconds)."""
    fields: dict[str, Any] = {}
    for option in options:
        value = option.check(getattr(args, option.dest))
        fields[str(option.field)] = value / 1000 if option.flag.endswith("-ms") else value
    return fields


def dev_arguments(auto_create_topics: bool = True) -> list[str]:
    """What ``raftlog dev`` adds to every node's options: each option with a ``dev`` value
    (``auto_create_topics`` False leaves ``--auto-create-topics`` out: ``raftlog dev
    --no-auto-create-topics``)."""
    argv: list[str] = []
    for option in OPTIONS:
        if option.dev is None or (option.flag == "--auto-create-topics" and not auto_create_topics):
            continue
        argv += [option.flag] if option.kind == "switch" else [option.flag, str(option.dev)]
    return argv


def refusal_of(argv: list[str]) -> str | None:
    """Why ``raftlog serve`` would refuse ``argv`` as extra options (an option it does not have, a value
    not of its type or past its bounds), or None: ``raftlog dev --serve-arg`` asks before any node starts."""
    parser = argparse.ArgumentParser(prog="raftlog serve", exit_on_error=False, add_help=False)
    add_arguments(parser)
    base = ["--node-id", "n1", "--data-dir", "d", "--http", "h:1", "--raft", "h:2"]
    try:
        args, unknown = parser.parse_known_args([*base, *argv])
        check_bounds(args)
    except (argparse.ArgumentError, ServeConfigError) as exc:
        return str(exc)
    return f"no such option: {' '.join(unknown)}" if unknown else None


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The option table of ``docs/serve-options.md``."""
    lines = [
        "# `raftlog serve` options",
        "",
        "Made from the declaration of the options (`raftlog_node/options.py`): "
        "`python -m raftlog_node.options > docs/serve-options.md`.",
        "`raftlog dev` gives every node the value of its column where one is given.",
    ]
    for title, options in SECTIONS:
        lines += [
            "",
            f"## {title}",
            "",
            "| option | default | bounds | `raftlog dev` | what |",
            "|---|---|---|---|---|",
        ]
        for option in options:
            if option.kind == "refused":
                continue
            if option.kind == "switch":
                default = "off"
            elif option.required:
                default = "required"
            elif option.kind == "repeated":
                default = "none (repeatable)"
            else:
                default = "" if option.default is None else f"{option.default}"
            if option.kind == "choice":
                bounds = ", ".join(option.choices)
            elif option.kind == "int":
                bounds = f">= {option.low}" if option.high is None else f"{option.low} to {option.high}"
            else:
                bounds = ""
            dev = "" if option.dev is None else ("on" if option.dev is True else str(option.dev))
            flag = f"`{option.flag}`" + (f" {option.metavar}" if option.metavar else "")
            lines.append(f"| {flag} | {default} | {bounds} | {dev} | {_cell(option.help)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
