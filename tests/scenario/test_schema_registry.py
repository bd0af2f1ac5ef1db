"""Real processes: the schema registry's table is the cluster's, not a node's. A schema registered through
one node is answered by every node with the same id; kill -9 of the ``__schemas`` leader loses nothing
registered, the next schema gets a new id (never one given before), and the killed node, started again,
answers as the others do."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from .cluster import ProcessCluster

pytestmark = pytest.mark.slow
DEADLINE_S = 60.0
MEDIA = "application/vnd.schemaregistry.v1+json"


def _schema(fields: list[str]) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": "User",
            "fields": [{"name": name, "type": "string", "default": ""} for name in fields],
        }
    )


def _call(url: str, method: str, path: str, body: Any = None, accept: str = MEDIA) -> httpx.Response:
    """One request; answers while no node leads ``__schemas`` (503) are asked again until the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            answer = httpx.request(
                method, url + path, json=body, headers={"Content-Type": MEDIA, "Accept": accept}, timeout=30
            )
            if answer.status_code < 500:
                return answer
            last = f"{answer.status_code} {answer.text[:200]}"
        except httpx.TransportError as exc:
            last = repr(exc)
        assert time.monotonic() < deadline, f"{method} {path} on {url} unanswered: {last}"
        time.sleep(0.2)


def _leader(url: str) -> str:
    answer = _call(url, "GET", "/v1/partitions/__schemas/0", accept="application/json")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["leader"])


def test_registered_schemas_survive_a_kill_of_the_registry_leader_with_their_ids(
    cluster: ProcessCluster,
) -> None:
    first_url = cluster.urls[0]
    registered = _call(first_url, "POST", "/subjects/users-value/versions", {"schema": _schema(["name"])})
    assert registered.status_code == 200, registered.text
    first_id = registered.json()["id"]
    for url in cluster.urls:  # every node answers it, with the same id and text
        by_id = _call(url, "GET", f"/schemas/ids/{first_id}")
        assert by_id.status_code == 200 and json.loads(by_id.json()["schema"]) == json.loads(
            _schema(["name"])
        )

    victim = _leader(first_url)
    cluster.kill(victim)
    survivor = next(
        url for node, url in zip(cluster.nodes, cluster.urls, strict=True) if node.node_id != victim
    )
    second = _call(survivor, "POST", "/subjects/users-value/versions", {"schema": _schema(["name", "email"])})
    assert second.status_code == 200, second.text
    assert second.json()["id"] != first_id and second.json()["version"] == 2
    assert _leader(survivor) != victim

    cluster.start(victim)
    cluster.wait_ready([victim])
    for url in cluster.urls:
        versions = _call(url, "GET", "/subjects/users-value/versions")
        assert versions.json() == [1, 2], (url, versions.text)
        again = _call(url, "POST", "/subjects/users-value", {"schema": _schema(["name"])})
        assert (again.json()["id"], again.json()["version"]) == (first_id, 1), (url, again.text)
