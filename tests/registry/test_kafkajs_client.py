"""KafkaJS's registry client (``@kafkajs/confluent-schema-registry``, from npm with the judges' suites:
``suites/node``) against the registry: it registers an Avro, a JSON Schema and a Protobuf schema through
the node leading the registry's partition and encodes records, which go through the Kafka door; that node is
kill -9ed; a fresh client on another node decodes every record and registers a new version; the node started
again decodes them too and knows the new version as the subject's latest. Each step is a run of
``suites/node/kafkajs_registry.js``."""

from __future__ import annotations

import base64
import json
import pathlib
import subprocess
from typing import Any

import client_records as records
import judges
from waiting import wait_for

from raftlog_client.local_cluster import LocalCluster

CATCH_UP_S = 30.0  # a node started again has the registrations made while it was down (liveness bound)
STEP_TIMEOUT_S = 120.0  # one step: a few registry requests, each bounded by the client's own retries
KINDS = ("avro", "json", "protobuf")


def kafkajs(step: str, url: str, request: dict[str, Any], directory: pathlib.Path) -> dict[str, Any]:
    """One step of ``kafkajs_registry.js`` against ``url``: its JSON answer (AssertionError with its
    stderr when it fails)."""
    node = judges.node_binary()
    home = judges.NodeSuite().install()
    request_file = directory / f"{step}.json"
    request_file.write_text(json.dumps(request))
    done = subprocess.run(
        [node, str(home / "kafkajs_registry.js"), step, url, str(request_file)],
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"kafkajs_registry.js {step} against {url}:\n{done.stderr}"
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_kafkajs_registry_client_across_a_kill(running_cluster: LocalCluster, tmp_path: pathlib.Path) -> None:
    cluster = running_cluster
    writer = records.registry_leader(cluster)  # its kill moves the registry to another leader
    survivor = records.other_node(cluster, writer)
    topics = {kind: f"kafkajs-{kind}" for kind in KINDS}
    records.create_topics(cluster, *topics.values())
    schemas = {
        "avro": {"type": "AVRO", "schema": records.AVRO},
        "json": {"type": "JSON", "schema": records.JSON_SCHEMA},
        "protobuf": {"type": "PROTOBUF", "schema": records.PROTOBUF_TEXT},
    }
    for kind in KINDS:
        schemas[kind]["subject"] = f"{topics[kind]}-value"
    values = {
        "avro": records.payments("kafkajs"),
        "json": records.readings("kafkajs"),
        "protobuf": [{"name": f"kafkajs-{n}", "count": n + 1} for n in range(records.RECORDS)],
    }
    written = kafkajs("write", cluster.urls[writer], {"schemas": schemas, "values": values}, tmp_path)
    assert len(set(written["ids"].values())) == len(KINDS), written["ids"]
    for kind in KINDS:
        records.produce_bytes(cluster, topics[kind], [base64.b64decode(p) for p in written["payloads"][kind]])

    cluster.control("stop", writer, kill=True)
    consumed = {kind: records.read_bytes(cluster, topics[kind]) for kind in KINDS}
    encoded = {kind: [base64.b64encode(p).decode() for p in payloads] for kind, payloads in consumed.items()}
    evolve = {"type": "AVRO", "schema": records.AVRO_V2, "subject": schemas["avro"]["subject"]}
    read = kafkajs("read", cluster.urls[survivor], {"payloads": encoded, "evolve": evolve}, tmp_path)
    assert read["values"] == values
    assert read["new_id"] not in written["ids"].values()

    cluster.control("start", writer)
    request = {"payloads": encoded, "evolve": evolve, "new_id": read["new_id"]}

    def caught_up() -> dict[str, Any] | None:
        answer = kafkajs("check", cluster.urls[writer], request, tmp_path)
        return answer if answer["latest_id"] == read["new_id"] else None

    what = f"{writer} answers id {read['new_id']} as the latest of {evolve['subject']}"
    checked = wait_for(caught_up, what, CATCH_UP_S, retrying=(AssertionError,))
    assert checked["values"] == values and checked["new_schema_found"]
