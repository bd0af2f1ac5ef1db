"""``raftlog serve``: run one node (its Raft groups, storage and HTTP API) in this process."""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import ipaddress
import logging
import os
import signal
import socket
import sys
from dataclasses import asdict, dataclass, replace
from typing import Any

from aiohttp import web

from api.http_limits import HttpLimits
from kafka_api.auto_topics import TOPIC_DEFAULTS, TopicDefaults
from kafka_api.limits import Limits as KafkaLimits
from partitions import features
from partitions.broker.node import (
    JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT,
    JOURNAL_SYNC_THREADS_DEFAULT,
    Node,
    NodeConfig,
    PeerConfig,
)
from partitions.controller.placement import REPLICAS_MAX_DEFAULT
from partitions.controller.state import PARTITIONS_MAX
from partitions.errors import InvalidName
from partitions.groups.classic import INITIAL_DELAY_MS_DEFAULT
from partitions.groups.consumer_coordinator import SESSION_TIMEOUT_MS_DEFAULT as CONSUMER_SESSION_MS_DEFAULT
from partitions.names import check_user_name
from partitions.replicas.recovery import RATE_BYTES_PER_S_DEFAULT
from partitions.security.login_failures import LoginFailures, LoginLimits
from partitions.transactions.coordinator import TIMEOUT_MS_MAX_DEFAULT as TRANSACTION_TIMEOUT_MS_MAX_DEFAULT
from raftlog.consensus.config import CoreConfig
from raftlog.storage import cleaner
from raftlog.storage.batch import INFLATED_BYTES_MAX_DEFAULT
from raftlog.storage.errors import DirectoryLocked, LegacyLogFormat
from raftlog_node.process import (
    GC_GEN0_DEFAULT,
    MALLOC_KEEP_MIB_DEFAULT,
    raise_open_files_limit,
    tune_gc,
    tune_malloc,
    watch_stalls,
)
from raftlog_node.tls import CLIENT_AUTH, TlsConfigError, TlsFiles, peer_context, server_context, tls_files

log = logging.getLogger("raftlog.serve")
SECRET_ENV = "RAFTLOG_CLUSTER_SECRET"
TOKEN_ENV = "RAFTLOG_ADMIN_TOKEN"
UMASK = 0o077  # what a node writes (SCRAM verifiers, token hashes, records) is its owner's alone
DATA_DIR_MODE = 0o700
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")
RETENTION_CHECK_MS_DEFAULT = 60_000
MiB = 1024 * 1024
RECOVERY_RATE_MIB_DEFAULT = RATE_BYTES_PER_S_DEFAULT // MiB
JOURNAL_COMPACTION_MIN_MIB_DEFAULT = CoreConfig().compaction_min_bytes // MiB
INFLATED_BATCH_MAX_MIB_DEFAULT = INFLATED_BYTES_MAX_DEFAULT // MiB
GROUP_INITIAL_DELAY_MS_MAX = 300_000  # five minutes, a Kafka consumer's default rebalance timeout
CONSUMER_SESSION_MS_RANGE = (1_000, 300_000)
INFLATED_BATCH_MAX_MIB_LIMIT = 2047  # a stored batch is read up to 2 GiB inflated (batch.py)


class ServeConfigError(ValueError):
    """A command-line setting that cannot be used; the node refuses to start."""


@dataclass(frozen=True, slots=True)
class HostPort:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str, what: str) -> HostPort:
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ServeConfigError(f"{what} {text!r}: expected HOST:PORT")
        return cls(host, int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class FeatureLevelUnsupported(Exception):
    """The cluster's finalized feature level is above what this node's code supports: it stops rather than
    read or write formats it does not know (``partitions.features.unsupported``)."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node-id", required=True, help="this node's id, e.g. n1")
    parser.add_argument("--data-dir", required=True, help="where this node keeps its logs and Raft journals")
    parser.add_argument("--http", required=True, help="HOST:PORT for the HTTP API")
    parser.add_argument("--raft", required=True, help="HOST:PORT for Raft traffic between nodes")
    parser.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="ID,HTTP_HOST:PORT,RAFT_HOST:PORT",
        help="another node of the cluster (repeat for each)",
    )
    parser.add_argument(
        "--kafka",
        metavar="HOST:PORT",
        help="serve the Kafka wire protocol here (Kafka clients and tools: kafka_api/README.md)",
    )
    parser.add_argument(
        "--kafka-advertised",
        metavar="HOST:PORT",
        help="the Kafka address clients are told to reach this node at, when it differs from --kafka "
        "(required when --kafka listens on a wildcard address)",
    )
    parser.add_argument("--gossip", help="HOST:PORT for SWIM gossip (UDP and TCP; default: HTTP port + 200)")
    parser.add_argument(
        "--seed",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="gossip address of a node to join through (repeat for several)",
    )
    parser.add_argument(
        "--secret-file", metavar="FILE", help=f"file holding the cluster secret (else ${SECRET_ENV})"
    )
    parser.add_argument(
        "--admin-token-file", metavar="FILE",
        help=f"file holding the bearer token required on /v1 (else ${TOKEN_ENV} if set); make it readable "
        "by its owner only",
    )  # fmt: skip
    # never in argv, which every local user reads (ps): taken only to refuse it, naming the ways that work
    parser.add_argument("--admin-token", help=argparse.SUPPRESS)
    parser.add_argument(
        "--super-user", action="append", default=[], metavar="NAME",
        help="a user who may manage SCRAM credentials over Kafka (AlterUserScramCredentials) and bypasses "
        "ACLs, as Kafka's super.users (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="PEM certificate (chain) of the HTTP and Kafka listeners: TLS on both",
    )
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--tls-ca", metavar="FILE",
        help="PEM CA certificates trusted for client certificates and for the other nodes (default: the "
        "system's roots)",
    )  # fmt: skip
    parser.add_argument(
        "--tls-client-auth", choices=sorted(CLIENT_AUTH), default="none",
        help="client certificates: none (default), optional (checked when sent) or required",
    )  # fmt: skip
    parser.add_argument(
        "--metrics-token-file", metavar="FILE",
        help="with --require-auth, /metrics (which names every topic, group and offset) takes the token in "
        "FILE (or the admin token) as 'Authorization: Bearer <token>', Prometheus's authorization "
        "credentials_file; make it readable by its owner only",
    )  # fmt: skip
    for option, what in FLAGS:
        parser.add_argument(option, action="store_true", help=what)
    for option, default, what in TUNING_OPTIONS:
        parser.add_argument(option, type=int, default=default, help=f"{what} (default {default})")
    for option, _, default, what in (*HTTP_LIMIT_OPTIONS, *LOGIN_LIMIT_OPTIONS, *KAFKA_LIMIT_OPTIONS):
        parser.add_argument(option, type=int, default=default, help=f"{what} (default {default})")
    parser.add_argument(
        "--event-loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="uvloop (default: less CPU per HTTP request) or the standard library's asyncio loop",
    )


# (option, help) of the switches a node takes
FLAGS = (
    ("--join", "join a running cluster through --seed: hold replicas but no controller replica"),
    ("--require-auth",
     "every data and consumer endpoint needs HTTP Basic with a user of /v1/users (or the admin token as a "
     "bearer token), and the Kafka listener SASL (PLAIN, SCRAM-SHA-256/512) as one; needs an admin token "
     f"(--admin-token-file or ${TOKEN_ENV}), and TLS beyond loopback"),
    ("--enforce-acls",
     "check every client request against the ACLs (/v1/acls, raftlog acl, Kafka's CreateAcls): nothing is "
     "allowed without one, but to super users and the admin token; needs --require-auth"),
    ("--allow-unauthenticated",
     "serve HTTP or Kafka beyond loopback without --require-auth (a closed test network only)"),
    ("--allow-plaintext-auth",
     "--require-auth beyond loopback without TLS (a closed network only): passwords, tokens and the "
     "node-to-node credential then cross the network in clear, and whoever reads one can replay it"),
    ("--public-metrics", "with --require-auth, serve /metrics to anyone (a closed network only)"),
    ("--auto-create-topics",
     "a Kafka Metadata request naming topics that do not exist creates them, with --num-partitions and "
     "--default-replication-factor, when the client allows it (librdkafka's producers do; Kafka's "
     "auto.create.topics.enable); with --enforce-acls only for a user allowed CREATE on the cluster or the "
     "topic. Give every node the same. Off by default; raftlog dev runs it, as Kafka's default"),
    ("--login-bounds-on-loopback",
     "apply --login-failures-per-address-max to loopback clients too (by default they are exempt: every "
     "local tool shares the address; the per-user bound still applies)"),
)  # fmt: skip

# (option, default, help) of the node's tuning: whole numbers, each read as itself by serve
TUNING_OPTIONS = (
    ("--retention-check-ms", RETENTION_CHECK_MS_DEFAULT, "how often retention deletes old segments"),
    ("--cleaner-interval-ms", cleaner.INTERVAL_MS_DEFAULT,
     "how often compaction looks at the node's compacted logs (cleanup.policy compact; Kafka's "
     "log.cleaner.backoff.ms)"),
    ("--cleaner-rate-mib", cleaner.RATE_BYTES_PER_S_DEFAULT // MiB,
     "MiB per second that compaction reads and writes, all logs of this node together"),
    ("--gc-gen0", GC_GEN0_DEFAULT,
     "allocations between young-generation garbage collections once serving; startup objects are frozen "
     "(0 keeps Python's defaults)"),
    ("--malloc-keep-mib", MALLOC_KEEP_MIB_DEFAULT,
     "buffers up to 32 MiB come from the heap and up to this much freed heap is kept for reuse instead of "
     "being returned to the OS and faulted in again (glibc; 0 keeps glibc's defaults)"),
    ("--journal-sync-threads", JOURNAL_SYNC_THREADS_DEFAULT,
     "threads writing and fsyncing large Raft journal appends, so the Raft thread goes on meanwhile (0: the "
     "Raft thread does every sync)"),
    ("--journal-sync-thread-min-kib", JOURNAL_SYNC_THREAD_MIN_KIB_DEFAULT,
     "smallest journal append handed to a sync thread; smaller ones are synced by the Raft thread, which "
     "costs less CPU than the hand-off (0: all)"),
    ("--replicas-max", REPLICAS_MAX_DEFAULT,
     "partition replicas this node may hold; a topic or move beyond it is refused up front (see "
     "docs/performance.md, 'Partitions per cluster'; the controller leader's setting applies, so give every "
     "node the same)"),
    ("--recovery-rate-mib", RECOVERY_RATE_MIB_DEFAULT,
     "MiB per second that all replicas of this node recovering records from their peers copy together (a "
     "replica whose log is behind the snapshot it installed)"),
    ("--journal-compaction-min-mib", JOURNAL_COMPACTION_MIN_MIB_DEFAULT,
     "a Raft group's journal is compacted behind a snapshot once it holds more than this; a replica missing "
     "what was compacted installs the snapshot and recovers the records from its peers"),
    ("--inflated-batch-max-mib", INFLATED_BATCH_MAX_MIB_DEFAULT,
     "the most a producer's compressed batch's records may inflate to (or its topic's max.message.bytes "
     "when larger): past it the batch is refused as too large, inflating stopped there, so a decompression "
     "bomb cannot fill the node's memory"),
    ("--num-partitions", TOPIC_DEFAULTS.partitions,
     "partitions of a topic created by --auto-create-topics, or by a Kafka CreateTopics that leaves them to "
     "the broker (Kafka's num.partitions)"),
    ("--default-replication-factor", TOPIC_DEFAULTS.replication_factor,
     "replicas of such a topic (Kafka's default.replication.factor; a creation it cannot place is refused "
     "INVALID_REPLICATION_FACTOR); 0: three, or one on every live node when fewer are alive"),
    ("--transaction-max-timeout-ms", TRANSACTION_TIMEOUT_MS_MAX_DEFAULT,
     "the longest transaction a transactional producer may ask for (its transaction.timeout.ms): a longer "
     "one is refused INVALID_TRANSACTION_TIMEOUT at InitProducerId (Kafka's transaction.max.timeout.ms); "
     "the coordinator aborts a transaction open past its own timeout"),
    ("--group-initial-rebalance-delay-ms", INITIAL_DELAY_MS_DEFAULT,
     "a Kafka consumer group's first rebalance (from Empty) waits this long for more members, and as long "
     "again while new ones keep joining, within the rebalance timeout: consumers starting together share "
     "the first assignment (Kafka's group.initial.rebalance.delay.ms; raftlog dev runs 0, as Kafka's own "
     "development configuration)"),
    ("--group-consumer-session-timeout-ms", CONSUMER_SESSION_MS_DEFAULT,
     "a consumer group protocol member (KIP-848, group.protocol=consumer) not heard from this long is "
     "fenced and its partitions assigned to the others (Kafka's group.consumer.session.timeout.ms)"),
)  # fmt: skip


_KAFKA = KafkaLimits()
# (option, the Limits field (a _ms option fills the field's seconds), default, help) of the Kafka listener's
# bounds (kafka_api/limits.py)
KAFKA_LIMIT_OPTIONS = (
    ("--kafka-connections-max", "connections_max", _KAFKA.connections_max,
     "Kafka connections open at once on this node; past it, without --require-auth, a newcomer from an "
     "address holding fewer takes the oldest connection of the address holding most, else it is refused"),
    ("--kafka-connections-per-address-max", "connections_per_address_max", _KAFKA.connections_per_address_max,
     "Kafka connections open at once from one client address (Kafka's max.connections.per.ip, which Kafka "
     "leaves unbounded: by default as many as the node-wide default)"),
    ("--kafka-unauthenticated-connections-max", "unauthenticated_connections_max",
     _KAFKA.unauthenticated_connections_max,
     "Kafka connections not yet authenticated at once, with --require-auth: the rest of "
     "--kafka-connections-max stays for authenticated clients"),
    ("--kafka-login-timeout-ms", "login_timeout_s", int(_KAFKA.login_timeout_s * 1000),
     "a Kafka connection not authenticated within it is closed, with --require-auth"),
    ("--kafka-idle-timeout-ms", "idle_timeout_s", int(_KAFKA.idle_timeout_s * 1000),
     "a Kafka connection sending no request within it is closed (Kafka's connections.max.idle.ms)"),
    ("--kafka-frame-timeout-ms", "frame_timeout_s", int(_KAFKA.frame_timeout_s * 1000),
     "a Kafka request must arrive whole within it (plus a second per MiB) once its first byte came"),
    ("--kafka-tls-handshake-timeout-ms", "tls_handshake_timeout_s",
     int(_KAFKA.tls_handshake_timeout_s * 1000), "a TLS handshake on the Kafka listener must end within it"),
    ("--kafka-connections-per-user-max", "connections_per_user_max", _KAFKA.connections_per_user_max,
     "Kafka connections one logged-in user (not a super user) holds at once; a login past it is refused"),
    ("--kafka-super-user-reserve", "super_user_reserve", _KAFKA.super_user_reserve,
     "of --kafka-connections-max, the connections only super users' logins take (so an admin can always "
     "log in; at --kafka-connections-max or more only super users may log in); when the rest is full, a "
     "login takes the least recently active idle connection of the user holding most, else it is refused"),
    ("--kafka-idle-at-cap-timeout-ms", "idle_at_cap_timeout_s", int(_KAFKA.idle_at_cap_timeout_s * 1000),
     "a logged-in user at --kafka-connections-per-user-max has its connections idle this long closed"),
    ("--kafka-request-bytes-max", "request_bytes_max", _KAFKA.request_bytes_max,
     "bytes of Kafka requests being received or queued on this listener (Kafka's "
     "queued.max.request.bytes); past it the listener stops reading until requests are answered"),
    ("--kafka-request-bytes-per-user-max", "request_bytes_per_user_max", _KAFKA.request_bytes_per_user_max,
     "of --kafka-request-bytes-max, what one logged-in user (an anonymous connection: its address) holds"),
)  # fmt: skip


_HTTP = HttpLimits()
# (option, the HttpLimits field (a _ms option fills the field's seconds), default, help) of the HTTP
# listener's bounds (api/http_limits.py)
HTTP_LIMIT_OPTIONS = (
    ("--http-header-timeout-ms", "header_timeout_s", int(_HTTP.header_timeout_s * 1000),
     "an HTTP request's head (request line and headers) must arrive within it, else 408 and the "
     "connection closed"),
    ("--http-body-timeout-ms", "body_timeout_s", int(_HTTP.body_timeout_s * 1000),
     "an HTTP request's body must arrive whole within it, else 408 and the connection closed"),
    ("--http-idle-timeout-ms", "idle_timeout_s", int(_HTTP.idle_timeout_s * 1000),
     "a kept-alive HTTP connection sending no next request within it is closed"),
    ("--http-connections-max", "connections_max", _HTTP.connections_max,
     "HTTP connections open at once on this node; more are answered 503 and closed"),
    ("--http-connections-per-address-max", "connections_per_address_max", _HTTP.connections_per_address_max,
     "HTTP connections open at once from one client address; more are answered 503 and closed"),
    ("--http-request-bytes-max", "request_bytes_max", _HTTP.request_bytes_max,
     "bytes of HTTP request bodies being read or served on this node; a body waits for room (its socket "
     "not read), answered 503 when none came within --http-body-timeout-ms"),
    ("--http-request-bytes-per-user-max", "request_bytes_per_user_max", _HTTP.request_bytes_per_user_max,
     "of --http-request-bytes-max, what one caller (a user, else a client address) holds"),
)  # fmt: skip


_LOGIN = LoginLimits()
# the bounds on failed logins, on both doors (partitions/security/login_failures.py)
LOGIN_LIMIT_OPTIONS = (
    ("--login-failures-per-address-max", "per_address_max", _LOGIN.per_address_max,
     "failed logins (HTTP Basic, tokens, SASL) from one client address within --login-failure-window-ms, "
     "after which its attempts are refused unchecked (HTTP 429 with Retry-After) until the window ends"),
    ("--login-failures-per-user-max", "per_user_max", _LOGIN.per_user_max,
     "failed logins for one user name within --login-failure-window-ms, from any address, after which its "
     "attempts are refused unchecked until the window ends"),
    ("--login-failure-window-ms", "window_s", int(_LOGIN.window_s * 1000),
     "the window failed logins are counted in"),
)  # fmt: skip


def _limit_fields(args: argparse.Namespace, options: tuple[tuple[str, str, int, str], ...]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for option, field, _, _ in options:
        value = getattr(args, option.removeprefix("--").replace("-", "_"))
        if value < 1:
            raise ServeConfigError(f"{option} {value}: must be >= 1")
        fields[field] = value / 1000 if option.endswith("-ms") else value
    return fields


def http_limits(args: argparse.Namespace) -> HttpLimits:
    """The HTTP listener's bounds from the ``--http-*`` limit options, checked."""
    return replace(_HTTP, **_limit_fields(args, HTTP_LIMIT_OPTIONS))


def login_limits(args: argparse.Namespace) -> LoginLimits:
    """The bounds on failed logins from the ``--login-*`` options, checked."""
    fields = _limit_fields(args, LOGIN_LIMIT_OPTIONS)
    return replace(_LOGIN, loopback_bounded=args.login_bounds_on_loopback, **fields)


def kafka_limits(args: argparse.Namespace) -> KafkaLimits:
    """The Kafka listener's bounds from the ``--kafka-*`` limit options, checked."""
    return replace(_KAFKA, **_limit_fields(args, KAFKA_LIMIT_OPTIONS))


def kafka_listener(args: argparse.Namespace) -> tuple[HostPort, str] | None:
    """(where the Kafka listener binds, the address clients are told) or None without ``--kafka``."""
    if not args.kafka:
        if args.kafka_advertised:
            raise ServeConfigError("--kafka-advertised needs --kafka")
        return None
    listen = HostPort.parse(args.kafka, "--kafka")
    if args.kafka_advertised:
        advertised = HostPort.parse(args.kafka_advertised, "--kafka-advertised")
    elif listen.host in ("0.0.0.0", "::", ""):
        raise ServeConfigError(f"--kafka {listen} listens on every address: say which one clients reach "
                               "with --kafka-advertised HOST:PORT")  # fmt: skip
    else:
        advertised = listen
    return listen, str(advertised)


def super_users(args: argparse.Namespace) -> frozenset[str]:
    """The user names of ``--super-user``, checked."""
    names = set()
    for name in args.super_user:
        if name.startswith("User:"):
            raise ServeConfigError(f"--super-user {name!r}: a user name ({name[5:]}), not a principal")
        try:
            names.add(check_user_name(name, "--super-user"))
        except InvalidName as exc:
            raise ServeConfigError(str(exc)) from None
    return frozenset(names)


def unknown_salt_key(secret: bytes) -> bytes:
    """The key of the salts SASL/SCRAM shows for unknown users (``kafka_api.sasl``): from the cluster
    secret, so that every node shows the same salt for the same name."""
    return hashlib.sha256(b"raftlog scram unknown user salt\0" + secret).digest()


def kafka_cluster_id(secret: bytes) -> str:
    """The cluster id Kafka clients see: the same on every node (derived from the cluster secret, which
    it does not reveal), 22 characters as Kafka's are."""
    digest = hashlib.sha256(b"raftlog kafka cluster id\0" + secret).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def tls_of(args: argparse.Namespace) -> TlsFiles | None:
    try:
        return tls_files(args.tls_cert, args.tls_key, args.tls_ca, args.tls_client_auth)
    except TlsConfigError as exc:
        raise ServeConfigError(str(exc)) from None


def _warn_if_shared(option: str, path: str) -> None:
    """A secret's file others than its owner may read is as exposed as the secret on the command line."""
    if os.stat(path).st_mode & 0o077:
        log.warning("%s %s is readable by others than its owner: chmod 600 it", option, path)


def admin_token(args: argparse.Namespace) -> str | None:
    """The admin token, from ``--admin-token-file`` or the environment; never from the command line."""
    if args.admin_token is not None:
        raise ServeConfigError(
            f"--admin-token would show the token to every local user (ps, /proc/PID/cmdline): put it in a "
            f"file readable by you only and give --admin-token-file FILE, or set ${TOKEN_ENV}"
        )
    if args.admin_token_file:
        with open(args.admin_token_file, encoding="utf-8") as f:
            token = f.read().strip()
        if not token:
            raise ServeConfigError(f"--admin-token-file {args.admin_token_file}: the file is empty")
        _warn_if_shared("--admin-token-file", args.admin_token_file)
        return token
    return os.environ.get(TOKEN_ENV) or None


def metrics_token(args: argparse.Namespace) -> str | None:
    """The token ``/metrics`` takes besides the admin token, from ``--metrics-token-file``."""
    if args.metrics_token_file is None:
        return None
    if args.public_metrics:
        raise ServeConfigError("--metrics-token-file and --public-metrics: give one or the other")
    with open(args.metrics_token_file, encoding="utf-8") as f:
        token = f.read().strip()
    if not token:
        raise ServeConfigError(f"--metrics-token-file {args.metrics_token_file}: the file is empty")
    return token


def _refuse_wildcard(option: str, address: HostPort, why: str = "") -> None:
    if address.host in WILDCARD_HOSTS:
        raise ServeConfigError(
            f"{option} {address}{why} is a wildcard address, but the other nodes dial the address given "
            f"here: give one of this host's addresses they reach"
        )


def check_listen(option: str, address: HostPort, udp: bool = False) -> None:
    """Whether this process could listen on ``address`` now: a port in use, an address not of this host
    or a name that does not resolve is refused in one line naming the option, before the node starts."""
    host = address.host.removeprefix("[").removesuffix("]")
    for kind, protocol in ((socket.SOCK_STREAM, "TCP"), (socket.SOCK_DGRAM, "UDP"))[: 2 if udp else 1]:
        try:
            family, _, proto, _, sockaddr = socket.getaddrinfo(host, address.port, type=kind)[0]
        except socket.gaierror as exc:
            why = f"{option} {address}: {host!r} does not resolve ({exc.strerror})"
            raise ServeConfigError(why) from None
        with socket.socket(family, kind, proto) as probe:
            if kind == socket.SOCK_STREAM:  # as the listeners bind: a connection in TIME_WAIT is no obstacle
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                why = f"{option} {address}: cannot listen there ({protocol}: {exc.strerror})"
                raise ServeConfigError(why) from None


def node_config(args: argparse.Namespace) -> tuple[NodeConfig, HostPort, str | None]:
    http = HostPort.parse(args.http, "--http")
    kafka = kafka_listener(args)
    raft = HostPort.parse(args.raft, "--raft")
    _refuse_wildcard("--raft", raft)
    tls = tls_of(args)
    scheme = "http" if tls is None else "https"  # every node of a cluster serves the same way
    peers = [PeerConfig(args.node_id, f"{scheme}://{http}", str(raft))]
    peer_addresses: list[HostPort] = []
    for text in args.peer:
        parts = text.split(",")
        if len(parts) != 3 or not parts[0]:
            raise ServeConfigError(f"--peer {text!r}: expected ID,HTTP_HOST:PORT,RAFT_HOST:PORT")
        peer_http = HostPort.parse(parts[1], "--peer http address")
        peer_raft = HostPort.parse(parts[2], "--peer raft address")
        peer_addresses += [peer_http, peer_raft]
        peers.append(PeerConfig(parts[0], f"{scheme}://{peer_http}", str(peer_raft)))
    if len({p.node_id for p in peers}) != len(peers):
        raise ServeConfigError(f"node ids repeat among --node-id and --peer: {[p.node_id for p in peers]}")
    if args.secret_file:
        with open(args.secret_file, "rb") as f:
            secret = f.read().strip()
        _warn_if_shared("--secret-file", args.secret_file)
    else:
        secret = os.environ.get(SECRET_ENV, "").encode()
    if len(secret) < 16:
        raise ServeConfigError(
            f"a cluster secret of at least 16 bytes is required (--secret-file or ${SECRET_ENV})"
        )
    token = admin_token(args)
    if args.require_auth and token is None:
        raise ServeConfigError(
            f"--require-auth needs an admin token (--admin-token-file FILE or ${TOKEN_ENV}): users are made "
            "through /v1/users"
        )
    if args.enforce_acls and not args.require_auth:
        raise ServeConfigError("--enforce-acls needs --require-auth: ACLs name authenticated users")
    if args.require_auth and args.allow_unauthenticated:
        raise ServeConfigError("--require-auth and --allow-unauthenticated contradict each other: choose one")
    exposed = [f"--http {http}"] if not _is_loopback(http.host) else []
    if kafka is not None and not _is_loopback(kafka[0].host):
        exposed.append(f"--kafka {kafka[0]}")
    if exposed and not args.require_auth and not args.allow_unauthenticated:
        raise ServeConfigError(
            f"refusing to serve {' and '.join(exposed)} beyond loopback without authentication: add "
            "--require-auth (users on the HTTP API, SASL on Kafka), or --allow-unauthenticated on a "
            "closed test network"
        )
    if not _is_loopback(http.host) and token is None:
        raise ServeConfigError(
            f"refusing to serve the admin API on non-loopback {http} without an admin token "
            f"(--admin-token-file FILE or ${TOKEN_ENV})"
        )
    gossip = HostPort.parse(args.gossip, "--gossip") if args.gossip else HostPort(http.host, http.port + 200)
    _refuse_wildcard("--gossip", gossip, "" if args.gossip else " (default: the --http host, port + 200)")
    _check_plaintext_auth(args, [http, raft, gossip, *(kafka[:1] if kafka else ()), *peer_addresses], tls)
    seeds = tuple(str(HostPort.parse(seed, "--seed")) for seed in args.seed)
    if args.retention_check_ms < 1:
        raise ServeConfigError(f"--retention-check-ms {args.retention_check_ms}: must be >= 1")
    if not 10 <= args.cleaner_interval_ms <= 3_600_000:
        raise ServeConfigError(f"--cleaner-interval-ms {args.cleaner_interval_ms}: must be in [10, 3600000]")
    if not 1 <= args.cleaner_rate_mib <= 1 << 20:
        raise ServeConfigError(f"--cleaner-rate-mib {args.cleaner_rate_mib}: must be in [1, 1048576]")
    if args.gc_gen0 < 0:
        raise ServeConfigError(f"--gc-gen0 {args.gc_gen0}: must be >= 0 (0 keeps Python's defaults)")
    if args.malloc_keep_mib < 0:
        raise ServeConfigError(
            f"--malloc-keep-mib {args.malloc_keep_mib}: must be >= 0 (0 keeps glibc's defaults)"
        )
    if not 0 <= args.journal_sync_threads <= 64:
        raise ServeConfigError(f"--journal-sync-threads {args.journal_sync_threads}: must be in [0, 64]")
    if not 0 <= args.journal_sync_thread_min_kib <= 1 << 20:
        raise ServeConfigError(
            f"--journal-sync-thread-min-kib {args.journal_sync_thread_min_kib}: must be in [0, 1048576]"
        )
    if args.replicas_max < 1:
        raise ServeConfigError(f"--replicas-max {args.replicas_max}: must be >= 1")
    if not 1 <= args.recovery_rate_mib <= 1 << 20:
        raise ServeConfigError(f"--recovery-rate-mib {args.recovery_rate_mib}: must be in [1, 1048576]")
    if not 1 <= args.journal_compaction_min_mib <= 1 << 20:
        raise ServeConfigError(
            f"--journal-compaction-min-mib {args.journal_compaction_min_mib}: must be in [1, 1048576]"
        )
    if not 1 <= args.inflated_batch_max_mib <= INFLATED_BATCH_MAX_MIB_LIMIT:
        raise ServeConfigError(
            f"--inflated-batch-max-mib {args.inflated_batch_max_mib}: must be in [1, "
            f"{INFLATED_BATCH_MAX_MIB_LIMIT}]"
        )
    if not 1 <= args.transaction_max_timeout_ms <= 2**31 - 1:
        raise ServeConfigError(
            f"--transaction-max-timeout-ms {args.transaction_max_timeout_ms}: must be in [1, 2147483647]"
        )
    kafka_limits(args)
    if args.join and not seeds:
        raise ServeConfigError("--join needs at least one --seed: a node of the cluster to join through")
    config = NodeConfig(
        args.node_id,
        os.path.abspath(args.data_dir),
        str(raft),
        tuple(peers),
        secret,
        gossip_address=str(gossip),
        seeds=seeds,
        retention_check_interval_ms=args.retention_check_ms,
        replicas_max=args.replicas_max,
        journal_sync_threads=args.journal_sync_threads,
        journal_sync_thread_min_bytes=args.journal_sync_thread_min_kib * 1024,
        join=args.join,
        recovery_bytes_per_s=args.recovery_rate_mib * MiB,
        cleaner_bytes_per_s=args.cleaner_rate_mib * MiB,
        cleaner_interval_ms=args.cleaner_interval_ms,
        inflated_batch_bytes_max=args.inflated_batch_max_mib * MiB,
        transaction_timeout_ms_max=args.transaction_max_timeout_ms,
        kafka_address=kafka[1] if kafka is not None else None,
        peer_ssl=None if tls is None else peer_context(tls),
        enforce_acls=args.enforce_acls,
        super_users=super_users(args),
    )
    core = replace(config.core, compaction_min_bytes=args.journal_compaction_min_mib * MiB)
    config = replace(config, core=core)
    return config, http, token


def _check_plaintext_auth(args: argparse.Namespace, addresses: list[HostPort], tls: TlsFiles | None) -> None:
    """Without TLS, passwords, tokens and the node-to-node credential (a bearer credential derived from
    the cluster secret, the same on every call) cross the network in clear, and replaying the last one
    controls the cluster: ``--require-auth`` beyond loopback needs TLS, or ``--allow-plaintext-auth``
    saying the network is closed."""
    if args.allow_plaintext_auth and (not args.require_auth or tls is not None):
        raise ServeConfigError("--allow-plaintext-auth goes with --require-auth without TLS only")
    exposed = [str(address) for address in addresses if not _is_loopback(address.host)]
    if args.require_auth and tls is None and exposed and not args.allow_plaintext_auth:
        raise ServeConfigError(
            f"refusing --require-auth without TLS beyond loopback ({', '.join(exposed[:3])}): passwords, "
            "tokens and the node-to-node credential would cross the network in clear; add --tls-cert FILE "
            "--tls-key FILE, or --allow-plaintext-auth on a closed network that accepts the risk"
        )


async def serve(
    config: NodeConfig,
    http: HostPort,
    admin_token: str | None,
    gc_gen0: int = 0,
    kafka: HostPort | None = None,
    tls: TlsFiles | None = None,
    require_auth: bool = False,
    super_user_names: frozenset[str] = frozenset(),
    enforce_acls: bool = False,
    kafka_limits: KafkaLimits = _KAFKA,
    http_limits: HttpLimits = _HTTP,
    login_limits: LoginLimits = _LOGIN,
    metrics_token: str | None = None,
    public_metrics: bool = False,
    group_initial_delay_ms: int = INITIAL_DELAY_MS_DEFAULT,
    topics: TopicDefaults = TOPIC_DEFAULTS,
    consumer_session_timeout_ms: int = CONSUMER_SESSION_MS_DEFAULT,
) -> None:
    from api.app import (
        KAFKA_CONNECTION_COUNTS,
        KAFKA_LISTENING,
        KAFKA_REQUEST_BYTES,
        KAFKA_REQUEST_SECONDS,
        build_app,
    )
    from api.cluster_metrics import PEER_SSL
    from api.http_limits import GUARD, listen
    from kafka_api.door import Door
    from kafka_api.security import Security
    from kafka_api.server import KafkaServer
    from partitions.groups.classic import ClassicGroups

    node = Node(config)
    node.groups.consumer.session_timeout_ms = consumer_session_timeout_ms
    await node.start()
    login_failures = LoginFailures(
        login_limits
    )  # the node's, both doors' (partitions/security/login_failures.py)
    app = build_app(
        node,
        admin_token=admin_token,
        require_auth=require_auth,
        enforce_acls=enforce_acls,
        super_users=super_user_names,
        http_limits=http_limits,
        login_failures=login_failures,
        metrics_token=metrics_token,
        public_metrics=public_metrics,
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    listener_ssl = None if tls is None else server_context(tls)
    listener: asyncio.Server | None = None
    security = Security(
        require_auth,
        super_user_names,
        unknown_salt_key(config.cluster_secret),
        enforce_acls=enforce_acls,
        login_failures=login_failures,
    )
    kafka_server = KafkaServer(
        Door(
            node,
            kafka_cluster_id(config.cluster_secret),
            node.groups,
            ClassicGroups(initial_delay_ms=group_initial_delay_ms),
            security=security,
            topic_defaults=topics,
        ),
        kafka_limits,
    )
    app[KAFKA_CONNECTION_COUNTS] = lambda: asdict(kafka_server.stats)  # for /metrics
    app[KAFKA_REQUEST_BYTES] = kafka_server.request_bytes
    app[KAFKA_REQUEST_SECONDS] = kafka_server.request_latencies  # for /metrics
    if tls is not None:  # /v1/cluster/metrics asks the other nodes' /metrics as a peer would
        app[PEER_SSL] = peer_context(tls)
    app[KAFKA_LISTENING] = lambda: kafka is None or kafka_server.listening  # for /status/ready
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    kafka_opening: asyncio.Task[None] | None = None

    async def open_kafka(kafka: HostPort) -> None:
        # as a Kafka broker opens its listeners only once its metadata caught up with the controller's
        # (partitions/metadata/catch_up.py): no client is told of topics from an old view
        await node.frontend.wait_caught_up()
        await kafka_server.start(kafka.host, kafka.port, listener_ssl)
        if not _is_loopback(kafka.host) and not require_auth:
            log.warning(
                "the Kafka listener on %s requires no authentication (--allow-unauthenticated): anyone "
                "who reaches it may produce, fetch and administer topics", kafka,
            )  # fmt: skip
        log.info(
            "node %s serving Kafka on %s (advertised %s%s%s)", config.node_id, kafka,
            config.kafka_address, ", SASL required" if require_auth else "",
            ", ACLs enforced" if enforce_acls else "",
        )  # fmt: skip
        if topics.auto_create:
            log.info(
                "node %s creates topics named in Kafka Metadata requests (%d partitions, replication "
                "factor %s)", config.node_id, topics.partitions,
                topics.replication_factor or "min(3, live nodes)",
            )  # fmt: skip

    refused: list[FeatureLevelUnsupported] = []

    async def check_features() -> None:
        # a node whose code cannot speak the cluster's finalized feature levels stops, once it knows them
        await node.frontend.wait_caught_up()
        why = features.unsupported(node.frontend.metadata().features)
        if why is not None:
            log.error("node %s refuses to run: %s", config.node_id, why)
            refused.append(FeatureLevelUnsupported(why))
            stop.set()

    features_check = asyncio.ensure_future(check_features())
    try:
        listener = await listen(runner, http.host, http.port, listener_ssl, app[GUARD])
        if kafka is not None:
            kafka_opening = asyncio.ensure_future(open_kafka(kafka))
            kafka_opening.add_done_callback(  # a listener that could not open (its port taken) stops the node
                lambda opening: None if opening.cancelled() or opening.exception() is None else stop.set()
            )
        tune_gc(gc_gen0)
        stall_watch = watch_stalls()
        scheme = "http" if tls is None else f"https (client certificates: {tls.client_auth})"
        log.info("node %s serving HTTP on %s %s (raft %s)", config.node_id, scheme, http, config.raft_address)
        await stop.wait()
        stall_watch.cancel()
        log.info("node %s stopping", config.node_id)
    finally:
        failed: BaseException | None = refused[0] if refused else None
        features_check.cancel()
        if kafka_opening is not None:
            kafka_opening.cancel()
            (opening,) = await asyncio.gather(kafka_opening, return_exceptions=True)
            failed = failed or opening
        await kafka_server.close()
        if listener is not None:
            listener.close()  # no new connection; runner.cleanup closes the open ones
        await runner.cleanup()
        await node.close()
        if isinstance(
            failed, Exception
        ):  # refused features, or the Kafka listener could not open (port taken)
            raise failed


def topic_defaults(args: argparse.Namespace) -> TopicDefaults:
    """The node's topic settings from ``--auto-create-topics``, ``--num-partitions`` and
    ``--default-replication-factor``, checked."""
    if not 1 <= args.num_partitions <= PARTITIONS_MAX:
        raise ServeConfigError(f"--num-partitions {args.num_partitions}: must be in [1, {PARTITIONS_MAX}]")
    if args.default_replication_factor < 0:
        raise ServeConfigError(
            f"--default-replication-factor {args.default_replication_factor}: must be >= 0 (0: three, or "
            "every live node when fewer)"
        )
    return TopicDefaults(args.auto_create_topics, args.num_partitions, args.default_replication_factor)


def group_initial_delay_ms(args: argparse.Namespace) -> int:
    delay_ms: int = args.group_initial_rebalance_delay_ms
    if not 0 <= delay_ms <= GROUP_INITIAL_DELAY_MS_MAX:
        raise ServeConfigError(
            f"--group-initial-rebalance-delay-ms {delay_ms}: must be in [0, {GROUP_INITIAL_DELAY_MS_MAX}]"
        )
    return delay_ms


def consumer_session_timeout_ms(args: argparse.Namespace) -> int:
    timeout_ms: int = args.group_consumer_session_timeout_ms
    low, high = CONSUMER_SESSION_MS_RANGE
    if not low <= timeout_ms <= high:
        raise ServeConfigError(
            f"--group-consumer-session-timeout-ms {timeout_ms}: must be in [{low}, {high}]"
        )
    return timeout_ms


def main(args: argparse.Namespace) -> int:
    try:
        config, http, token = node_config(args)
        kafka = kafka_listener(args)
        tls = tls_of(args)
        supers = super_users(args)
        limits = kafka_limits(args)
        http_bounds = http_limits(args)
        login_bounds = login_limits(args)
        scrape_token = metrics_token(args)
        group_delay_ms = group_initial_delay_ms(args)
        consumer_session_ms = consumer_session_timeout_ms(args)
        topics = topic_defaults(args)
        check_listen("--http", http)
        check_listen("--raft", HostPort.parse(config.raft_address, "--raft"))
        check_listen("--gossip", HostPort.parse(config.gossip_address, "--gossip"), udp=True)
        if kafka is not None:
            check_listen("--kafka", kafka[0])
    except (ServeConfigError, OSError) as exc:
        print(f"raftlog serve: {exc}", file=sys.stderr, flush=True)
        return 2
    if args.allow_plaintext_auth:
        log.warning(
            "--allow-plaintext-auth: passwords, tokens and the node-to-node credential cross the network in "
            "clear; anyone who reads one can replay it, and the node-to-node one controls the cluster"
        )
    os.umask(UMASK)
    os.makedirs(config.data_dir, mode=DATA_DIR_MODE, exist_ok=True)
    os.chmod(config.data_dir, DATA_DIR_MODE)  # made by an older version, or by hand: the owner's alone
    tune_malloc(args.malloc_keep_mib)
    open_files = raise_open_files_limit()
    log.info("open files limit %d", open_files)
    node = serve(
        config,
        http,
        token,
        args.gc_gen0,
        kafka[0] if kafka else None,
        tls,
        args.require_auth,
        supers,
        args.enforce_acls,
        limits,
        http_bounds,
        login_bounds,
        scrape_token,
        args.public_metrics,
        group_delay_ms,
        topics,
        consumer_session_ms,
    )
    try:
        if args.event_loop == "uvloop":
            import uvloop

            uvloop.run(node)
        else:
            asyncio.run(node)
    except (DirectoryLocked, LegacyLogFormat, FeatureLevelUnsupported) as exc:  # before it changed its data
        print(f"raftlog serve: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0
