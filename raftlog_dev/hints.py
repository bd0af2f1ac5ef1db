"""What ``raftlog dev`` prints once its cluster is up: commands that work as printed, in order (create a
topic, produce, fetch; Kafka tools; the supervisor's own commands), with the cluster's CA and, for
``--secure``, the owner-only files holding its credentials (``secure.client_files``): never a secret
itself, which would stand in the command's argv, where every local user reads it (``ps``)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys

from raftlog_contract import ADMIN_TOPICS_PATH, partition_path, records_path
from raftlog_dev.secure import DevSecurity, client_files

HINTS_TOPIC = "hello"  # the topic the hints make and use: the tour's "orders" is its own


def _kafka_settings(kafka: str, ca: str | None) -> dict[str, str]:
    """A Kafka client's configuration for the cluster without credentials (librdkafka's names, as kcat
    and confluent-kafka take them)."""
    settings = {"bootstrap.servers": kafka}
    if ca is not None:
        settings |= {"security.protocol": "ssl", "ssl.ca.location": ca}
    return settings


def raftlog_command(cwd: str | None = None) -> str:
    """The ``raftlog`` command as the user can type it from ``cwd``: ``raftlog`` when the PATH finds this
    installation's, else its path (relative when under ``cwd``, as ``.venv/bin/raftlog`` after ``make
    dev``): the hints are run as printed, and a ``.venv`` is rarely on the PATH."""
    installed = os.path.join(os.path.dirname(sys.executable), "raftlog")
    on_path = shutil.which("raftlog")
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(installed):
        return "raftlog"
    if not os.path.exists(installed):  # not installed as a command (a tree run with python -m)
        return f"{shlex.quote(sys.executable)} -m raftlog_cli"
    relative = os.path.relpath(installed, cwd or os.getcwd())
    return shlex.quote(installed if relative.startswith("..") else relative)


def up_text(
    count: int,
    data_dir: str,
    http: str,
    kafka: str,
    ca: str | None = None,
    security: DevSecurity | None = None,
    python: str = sys.executable,
    raftlog: str | None = None,
) -> str:
    """The lines printed once ``count`` nodes are up; ``http`` and ``kafka`` are any node's (the first's);
    ``raftlog``: the command as the user types it (``raftlog_command``)."""
    raftlog = raftlog_command() if raftlog is None else raftlog
    curl = admin = "curl -s"
    if ca is not None:
        curl += f" --cacert {shlex.quote(ca)}"
        admin = curl
    settings = _kafka_settings(kafka, ca)
    kcat = f"kcat -b {kafka}" + "".join(
        f" -X {shlex.quote(f'{key}={value}')}"
        for key, value in settings.items()
        if key != "bootstrap.servers"
    )
    files = client_files(data_dir)
    if security is not None:  # the credentials by their owner-only files
        admin = f"{curl} -K {shlex.quote(files.admin_curl)}"
        curl += f" -K {shlex.quote(files.user_curl)}"
        kcat = f"kcat -b {kafka} -F {shlex.quote(files.kafka)}"
    # a topic of the hints' own: the README's tour, run after them, creates "orders" from nothing
    topic = json.dumps({"name": HINTS_TOPIC, "partitions": 3, "replication_factor": min(3, count)})
    record = json.dumps({"records": [{"key": "k", "value": {"hello": "world"}}]})
    lines = [
        f"{admin} -XPOST {http}{ADMIN_TOPICS_PATH} -H 'Content-Type: application/json' -d '{topic}'",
        f"{curl} -XPOST {http}{partition_path(HINTS_TOPIC, 0)} "
        f"-H 'Content-Type: application/vnd.kafka.json.v2+json' -d '{record}'",
        f"{curl} '{http}{records_path(HINTS_TOPIC, 0)}?offset=0'",
        f"{kcat} -L   # Kafka clients and tools: bootstrap.servers={kafka}",
        f"echo 'k1:hello' | {kcat} -P -t {HINTS_TOPIC} -K: && {kcat} -C -t {HINTS_TOPIC} -e",
    ]
    if security is not None:
        group = json.dumps({"bootstrap.servers": kafka, "group.id": "hint", "auto.offset.reset": "earliest"})
        consumer = (
            f"from confluent_kafka import Consumer; c = Consumer({{**{group}, **dict(line.strip()"
            f".split('=', 1) for line in open({files.kafka!r}) if '=' in line)}}); "
            f"c.subscribe([{HINTS_TOPIC!r}]); print([m.value() for m in c.consume(1, 20) if not m.error()]); "
            "c.close()"
        )
        lines += [
            f"{shlex.quote(python)} -c {shlex.quote(consumer)}   # confluent-kafka, the same settings",
            f"RAFTLOG_CONFIG={shlex.quote(files.profile)} {raftlog} consume {HINTS_TOPIC} --partition 0",
        ]
    lines += [
        f"{raftlog} dev status --data-dir {data_dir}",
        f"{raftlog} dev restart n{count} --data-dir {data_dir}   # also: stop [--kill], start",
    ]
    security_note = console_login = ""
    if security is not None:
        console_login = f"; log in as {security.user}"
        security_note = (
            f" (TLS and authentication: cluster.json's security names the CA, user {security.user} "
            "and its password, and the admin token; the commands below read them from owner-only files)"
        )
    return (
        f"\ncluster of {count} up; cluster.json in {data_dir}{security_note}\n"
        f"web console: {http}/console (every node serves it){console_login}\n"
        f"schema registry: {http} (Confluent's API on every node's HTTP listener: schema.registry.url)\n"
        + "".join(f"  {line}\n" for line in lines)
        + f"Ctrl-C (or {raftlog} dev stop --data-dir {data_dir}) stops all nodes."
    )
