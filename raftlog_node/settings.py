"""What ``raftlog serve``'s options make: the node's config, its listeners' addresses and bounds, its
security settings, checked together (``serve_settings``). The options are declared in ``options.py``."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import socket
from dataclasses import dataclass, replace

from api.http_limits import HttpLimits
from kafka_api.auto_topics import TopicDefaults
from kafka_api.limits import Limits as KafkaLimits
from partitions.broker.node_config import NodeConfig, PeerConfig
from partitions.errors import InvalidName
from partitions.names import check_user_name
from partitions.security.login_failures import LoginLimits
from raftlog_node.options import (
    HTTP_LIMITS,
    KAFKA_LIMITS,
    LOGIN_LIMITS,
    SECRET_ENV,
    TOKEN_ENV,
    MiB,
    ServeConfigError,
    check_bounds,
    limit_fields,
)
from raftlog_node.tls import TlsConfigError, TlsFiles, peer_context, tls_files

log = logging.getLogger("raftlog.serve")
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def http_limits(args: argparse.Namespace) -> HttpLimits:
    """The HTTP listener's bounds from the ``--http-*`` limit options, checked."""
    try:
        return replace(HttpLimits(), **limit_fields(args, HTTP_LIMITS))
    except ValueError as exc:  # bounds that contradict each other (a reserve past its budget)
        raise ServeConfigError(str(exc)) from None


def login_limits(args: argparse.Namespace) -> LoginLimits:
    """The bounds on failed logins from the ``--login-*`` options, checked."""
    return replace(
        LoginLimits(), loopback_bounded=args.login_bounds_on_loopback, **limit_fields(args, LOGIN_LIMITS)
    )


def kafka_limits(args: argparse.Namespace) -> KafkaLimits:
    """The Kafka listener's bounds from the ``--kafka-*`` limit options, checked."""
    try:
        return replace(KafkaLimits(), **limit_fields(args, KAFKA_LIMITS))
    except ValueError as exc:  # bounds that contradict each other (a reserve past its budget)
        raise ServeConfigError(str(exc)) from None


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
    exposed = [f"--http {http}"] if not is_loopback(http.host) else []
    if kafka is not None and not is_loopback(kafka[0].host):
        exposed.append(f"--kafka {kafka[0]}")
    if exposed and not args.require_auth and not args.allow_unauthenticated:
        raise ServeConfigError(
            f"refusing to serve {' and '.join(exposed)} beyond loopback without authentication: add "
            "--require-auth (users on the HTTP API, SASL on Kafka), or --allow-unauthenticated on a "
            "closed test network"
        )
    if not is_loopback(http.host) and token is None:
        raise ServeConfigError(
            f"refusing to serve the admin API on non-loopback {http} without an admin token "
            f"(--admin-token-file FILE or ${TOKEN_ENV})"
        )
    gossip = HostPort.parse(args.gossip, "--gossip") if args.gossip else HostPort(http.host, http.port + 200)
    _refuse_wildcard("--gossip", gossip, "" if args.gossip else " (default: the --http host, port + 200)")
    _check_plaintext_auth(args, [http, raft, gossip, *(kafka[:1] if kafka else ()), *peer_addresses], tls)
    seeds = tuple(str(HostPort.parse(seed, "--seed")) for seed in args.seed)
    check_bounds(args)
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
        controlled_shutdown_ms=args.controlled_shutdown_ms,
        cleaner_bytes_per_s=args.cleaner_rate_mib * MiB,
        cleaner_interval_ms=args.cleaner_interval_ms,
        inflated_batch_bytes_max=args.inflated_batch_max_mib * MiB,
        transaction_timeout_ms_max=args.transaction_max_timeout_ms,
        consumer_session_timeout_ms=args.group_consumer_session_timeout_ms,
        consumer_regex_budget_ms=args.group_consumer_regex_budget_ms,
        consumer_migration_policy=args.group_consumer_migration_policy,
        share_lock_ms=args.group_share_record_lock_duration_ms,
        share_groups_max=args.group_share_max_groups,
        classic_initial_delay_ms=args.group_initial_rebalance_delay_ms,
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
    exposed = [str(address) for address in addresses if not is_loopback(address.host)]
    if args.require_auth and tls is None and exposed and not args.allow_plaintext_auth:
        raise ServeConfigError(
            f"refusing --require-auth without TLS beyond loopback ({', '.join(exposed[:3])}): passwords, "
            "tokens and the node-to-node credential would cross the network in clear; add --tls-cert FILE "
            "--tls-key FILE, or --allow-plaintext-auth on a closed network that accepts the risk"
        )


def topic_defaults(args: argparse.Namespace) -> TopicDefaults:
    """The node's topic settings from ``--auto-create-topics``, ``--num-partitions`` and
    ``--default-replication-factor``, checked."""
    check_bounds(args)
    return TopicDefaults(args.auto_create_topics, args.num_partitions, args.default_replication_factor)


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Everything a node process runs with, made from its options and checked (``serve_settings``)."""

    node: NodeConfig
    http: HostPort
    admin_token: str | None
    kafka: HostPort | None
    tls: TlsFiles | None
    require_auth: bool
    enforce_acls: bool
    super_users: frozenset[str]
    kafka_limits: KafkaLimits
    http_limits: HttpLimits
    login_limits: LoginLimits
    metrics_token: str | None
    public_metrics: bool
    topics: TopicDefaults
    gc_gen0: int
    api_token_lifetime_ms: int
    delegation_token_max_lifetime_ms: int
    delegation_token_expiry_time_ms: int


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The node's settings from its options: ServeConfigError naming the first that cannot be used."""
    config, http, token = node_config(args)
    kafka = kafka_listener(args)
    return ServeSettings(
        config,
        http,
        token,
        kafka[0] if kafka else None,
        tls_of(args),
        args.require_auth,
        args.enforce_acls,
        super_users(args),
        kafka_limits(args),
        http_limits(args),
        login_limits(args),
        metrics_token(args),
        args.public_metrics,
        topic_defaults(args),
        args.gc_gen0,
        args.api_token_lifetime_ms,
        args.delegation_token_max_lifetime_ms,
        args.delegation_token_expiry_time_ms,
    )
