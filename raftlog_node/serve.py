"""``raftlog serve``: run one node in this process: the node (``partitions.broker.node.Node``: its Raft groups
and storage) and both front doors, the HTTP API and the Kafka listener, composed and run until a signal. Its
options are declared in ``options.py`` and made into its settings in ``settings.py``."""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import logging
import os
import signal
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from aiohttp import web

from partitions import features
from partitions.broker.node import Node
from partitions.security.delegation_tokens import TokenSecrets, hmac_key
from partitions.security.login_failures import LoginFailures
from raftlog.storage.errors import DirectoryLocked, LegacyLogFormat
from raftlog_node import logs
from raftlog_node.options import MiB, ServeConfigError
from raftlog_node.process import (
    give_memory_back,
    raise_open_files_limit,
    tune_gc,
    tune_malloc,
    watch_stalls,
)
from raftlog_node.settings import HostPort, ServeSettings, check_listen, is_loopback, serve_settings
from raftlog_node.tls import peer_context, server_context

if TYPE_CHECKING:
    from kafka_api.server import KafkaServer

log = logging.getLogger("raftlog.serve")
UMASK = 0o077  # what a node writes (SCRAM verifiers, token hashes, records) is its owner's alone
DATA_DIR_MODE = 0o700


class FeatureLevelUnsupported(Exception):
    """The cluster's finalized feature level is above what this node's code supports: it stops rather than
    read or write formats it does not know (``partitions.features.unsupported``)."""


def unknown_salt_key(secret: bytes) -> bytes:
    """The key of the salts SASL/SCRAM shows for unknown users (``kafka_api.sasl``): from the cluster
    secret, so that every node shows the same salt for the same name."""
    return hashlib.sha256(b"raftlog scram unknown user salt\0" + secret).digest()


def kafka_cluster_id(secret: bytes) -> str:
    """The cluster id Kafka clients see: the same on every node (derived from the cluster secret, which
    it does not reveal), 22 characters as Kafka's are."""
    digest = hashlib.sha256(b"raftlog kafka cluster id\0" + secret).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def _doors(node: Node, settings: ServeSettings) -> tuple[web.Application, KafkaServer]:
    """Both front doors over ``node``: the HTTP application and the Kafka server, sharing one record of
    failed logins (``partitions/security/login_failures.py``), the Kafka server's counts on /metrics."""
    from api.app import (
        KAFKA_CONNECTION_COUNTS,
        KAFKA_FETCH_SESSIONS,
        KAFKA_LISTENING,
        KAFKA_REQUEST_BYTES,
        KAFKA_REQUEST_SECONDS,
        build_app,
    )
    from api.cluster_metrics import PEER_SSL
    from kafka_api.door import Door
    from kafka_api.security import Security
    from kafka_api.server import KafkaServer

    config, tls = settings.node, settings.tls
    # the delegation tokens' HMACs and SCRAM credentials: from the secret every node holds, so any node
    # answers a token made on another (never argv, never a log line); both doors take the tokens
    token_secrets = TokenSecrets(hmac_key(config.cluster_secret))
    login_failures = LoginFailures(settings.login_limits)
    app = build_app(
        node,
        admin_token=settings.admin_token,
        require_auth=settings.require_auth,
        enforce_acls=settings.enforce_acls,
        super_users=settings.super_users,
        http_limits=settings.http_limits,
        login_failures=login_failures,
        metrics_token=settings.metrics_token,
        public_metrics=settings.public_metrics,
        token_lifetime_ms=settings.api_token_lifetime_ms,
        token_secrets=token_secrets,
    )
    security = Security(
        settings.require_auth,
        settings.super_users,
        unknown_salt_key(config.cluster_secret),
        enforce_acls=settings.enforce_acls,
        login_failures=login_failures,
        token_secrets=token_secrets,
        delegation_token_max_lifetime_ms=settings.delegation_token_max_lifetime_ms,
        delegation_token_expiry_time_ms=settings.delegation_token_expiry_time_ms,
    )
    door = Door(
        node, kafka_cluster_id(config.cluster_secret), node.groups, security=security,
        topic_defaults=settings.topics,
    )  # fmt: skip
    kafka_server = KafkaServer(door, settings.kafka_limits)
    app[KAFKA_CONNECTION_COUNTS] = lambda: asdict(kafka_server.stats)  # for /metrics
    app[KAFKA_REQUEST_BYTES] = kafka_server.request_bytes
    app[KAFKA_FETCH_SESSIONS] = kafka_server.door.fetch_sessions.counts  # for /metrics
    app[KAFKA_REQUEST_SECONDS] = kafka_server.request_latencies  # for /metrics
    if tls is not None:  # /v1/cluster/metrics asks the other nodes' /metrics as a peer would
        app[PEER_SSL] = peer_context(tls)
    app[KAFKA_LISTENING] = lambda: settings.kafka is None or kafka_server.listening  # for /status/ready
    return app, kafka_server


async def _open_kafka(
    node: Node, kafka_server: KafkaServer, settings: ServeSettings, ssl: Any, kafka: HostPort
) -> None:
    """Open the Kafka listener once the node's metadata caught up with the controller's, as a Kafka broker
    opens its listeners (``partitions/metadata/catch_up.py``): no client is told of topics from an old
    view."""
    from kafka_api import controller_files

    config, topics, require_auth = settings.node, settings.topics, settings.require_auth
    await node.frontend.wait_caught_up()
    await kafka_server.start(kafka.host, kafka.port, ssl)
    advertised = config.kafka_address or f"{kafka.host}:{kafka.port}"
    controller_files.write(config.data_dir, config.node_id, kafka_server.door.cluster_id, advertised)
    if not is_loopback(kafka.host) and not require_auth:
        log.warning(
            "the Kafka listener on %s requires no authentication (--allow-unauthenticated): anyone "
            "who reaches it may produce, fetch and administer topics", kafka,
        )  # fmt: skip
    log.info(
        "node %s serving Kafka on %s (advertised %s%s%s)", config.node_id, kafka,
        config.kafka_address, ", SASL required" if require_auth else "",
        ", ACLs enforced" if settings.enforce_acls else "",
    )  # fmt: skip
    if topics.auto_create:
        log.info(
            "node %s creates topics named in Kafka Metadata requests (%d partitions, replication "
            "factor %s)", config.node_id, topics.partitions,
            topics.replication_factor or "min(3, live nodes)",
        )  # fmt: skip


async def _check_features(node: Node) -> FeatureLevelUnsupported | None:
    """Why this node's code cannot speak the cluster's finalized feature levels (None: it can): at once
    when its data directory keeps them (local_levels), else once its metadata caught up."""
    why = features.unsupported(node.level_guard.floor.levels())
    if why is None:
        await node.frontend.wait_caught_up()
        why = features.unsupported(node.frontend.metadata().features)
    if why is None:
        return None
    log.error("node %s refuses to run: %s", node.node_id, why)
    return FeatureLevelUnsupported(why)


def _refusal(check: asyncio.Future[FeatureLevelUnsupported | None]) -> FeatureLevelUnsupported | None:
    """The features check's refusal, once it has one."""
    if not check.done() or check.cancelled() or check.exception() is not None:
        return None
    return check.result()


async def serve(settings: ServeSettings) -> None:
    """Run the node and its doors until SIGTERM or SIGINT (or a listener that cannot open, or feature
    levels above its code)."""
    from api.http_limits import GUARD, listen
    from api.state import STATE

    config, http, kafka, tls = settings.node, settings.http, settings.kafka, settings.tls
    node = Node(config)
    await node.start()
    app, kafka_server = _doors(node, settings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    listener_ssl = None if tls is None else server_context(tls)
    listener: asyncio.Server | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    kafka_opening: asyncio.Task[None] | None = None
    features_check = asyncio.ensure_future(_check_features(node))
    features_check.add_done_callback(lambda check: None if _refusal(check) is None else stop.set())
    try:
        listener = await listen(runner, http.host, http.port, listener_ssl, app[GUARD])
        if kafka is not None:
            kafka_opening = asyncio.ensure_future(
                _open_kafka(node, kafka_server, settings, listener_ssl, kafka)
            )
            kafka_opening.add_done_callback(  # a listener that could not open (its port taken) stops the node
                lambda opening: None if opening.cancelled() or opening.exception() is None else stop.set()
            )
        tune_gc(settings.gc_gen0)
        stall_watch = watch_stalls()
        budgets = (kafka_server.request_bytes, app[STATE].request_bytes)  # requests' and answers' bytes
        memory_giver = asyncio.ensure_future(give_memory_back(lambda: not any(b.held for b in budgets)))
        scheme = "http" if tls is None else f"https (client certificates: {tls.client_auth})"
        log.info("node %s serving HTTP on %s %s (raft %s)", config.node_id, scheme, http, config.raft_address)
        await stop.wait()
        stall_watch.cancel()
        memory_giver.cancel()
        log.info("node %s stopping", config.node_id)
        # the Kafka listener first, before the node leaves the cluster: no produce may be in flight to it
        # when clients drop it from their metadata (kafka_api.draining); the HTTP door serves through the
        # handover, its clients told the new leaders
        if kafka is not None:
            unanswered = await kafka_server.drain(config.controlled_shutdown_ms / 1000)
            log.info("node %s: Kafka listener closed (%d produces unanswered)", config.node_id, unanswered)
        handed = await node.hand_over()
        log.info("node %s: %s", config.node_id, handed.describe())
    finally:
        refused = (
            features_check.result() if features_check.done() and not features_check.cancelled() else None
        )
        failed: BaseException | None = refused
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
        if isinstance(failed, Exception):  # refused features, or the Kafka listener could not open
            raise failed


def main(args: argparse.Namespace) -> int:
    try:
        ready = serve_settings(args)
        check_listen("--http", ready.http)
        check_listen("--raft", HostPort.parse(ready.node.raft_address, "--raft"))
        check_listen("--gossip", HostPort.parse(ready.node.gossip_address, "--gossip"), udp=True)
        if ready.kafka is not None:
            check_listen("--kafka", ready.kafka)
    except (ServeConfigError, OSError) as exc:
        print(f"raftlog serve: {exc}", file=sys.stderr, flush=True)
        return 2
    os.umask(UMASK)  # the log file too is the node user's alone
    if args.log_file is not None:
        try:
            logs.to_file(args.log_file, args.log_file_max_mib * MiB, args.log_files_kept)
        except OSError as exc:
            print(f"raftlog serve: --log-file {args.log_file}: {exc}", file=sys.stderr, flush=True)
            return 2
    if args.allow_plaintext_auth:
        log.warning(
            "--allow-plaintext-auth: passwords, tokens and the node-to-node credential cross the network in "
            "clear; anyone who reads one can replay it, and the node-to-node one controls the cluster"
        )
    data_dir = ready.node.data_dir
    os.makedirs(data_dir, mode=DATA_DIR_MODE, exist_ok=True)
    os.chmod(data_dir, DATA_DIR_MODE)  # made by an older version, or by hand: the owner's alone
    tune_malloc(args.malloc_keep_mib)
    open_files = raise_open_files_limit()
    log.info("open files limit %d", open_files)
    try:
        if args.event_loop == "uvloop":
            import uvloop

            uvloop.run(serve(ready))
        else:
            asyncio.run(serve(ready))
    except (DirectoryLocked, LegacyLogFormat, FeatureLevelUnsupported) as exc:  # before it changed its data
        print(f"raftlog serve: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0
