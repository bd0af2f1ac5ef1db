"""A user on the admin API of a real 3-node cluster (node processes, ``--require-auth --enforce-acls``),
with curl: refused 403 on every node for what no ACL allows (create a topic, alter its configs, write
ACLs, move replicas, scrape ``/metrics``), let in once the admin token grants it through another node,
and nothing done in between."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from serve_args import token_file
from test_auth import curl, node_processes
from test_token_auth import TOKEN, make_user

from tests.waiting import wait_for

ADMIN = ("-H", f"Authorization: Bearer {TOKEN}")
FRANK = ("-u", "frank:p4ss")
JSON = ("-H", "Content-Type: application/json")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    root = tmp_path_factory.mktemp("admin-acls")
    with node_processes(root, "--require-auth", "--enforce-acls", *token_file(root, TOKEN)) as urls:
        yield urls


def call(method: str, url: str, body: object = None, who: tuple[str, ...] = FRANK) -> tuple[int, object]:
    sent = () if body is None else ("-d", json.dumps(body))
    status, answer, _ = curl(f"-X{method}", url, *JSON, *who, *sent)
    return status, answer


def cluster_acl(operation: str) -> dict[str, str]:
    return {
        "resource_type": "cluster",
        "name": "kafka-cluster",
        "principal": "User:frank",
        "operation": operation,
    }


def test_a_user_does_on_v1_what_its_acls_allow_on_every_node(servers: list[str]) -> None:
    first, second, third = servers
    made = call(
        "POST", f"{first}/v1/topics", {"name": "placed", "partitions": 1, "replication_factor": 1}, ADMIN
    )
    assert made[0] == 201, made
    assert isinstance(made[1], dict)
    replica = made[1]["replicas"][0][0]
    elsewhere = next(n for n in ("n1", "n2", "n3") if n != replica)
    make_user(first, "frank")
    wait_for(
        lambda: call("GET", f"{third}/v1/cluster/health")[0] == 403, "frank not let in on n3", 15, every_s=0.1
    )

    create = {"name": "frank-1", "partitions": 1, "replication_factor": 3}
    refusals = {
        ("POST", "/v1/topics", json.dumps(create)): "create",
        ("PATCH", "/v1/topics/placed/configs", '{"configs": {"retention.ms": 60000}}'): "alter_configs",
        ("POST", "/v1/acls", json.dumps({"acls": [cluster_acl("read")]})): "alter",
        ("POST", "/v1/partitions/placed/0/replicas", json.dumps({"replicas": [elsewhere]})): "alter",
        ("GET", "/metrics", None): "describe",
    }
    for (method, path, body), operation in refusals.items():
        status, answer = call(method, f"{third}{path}", None if body is None else json.loads(body))
        assert status == 403 and isinstance(answer, dict), (path, answer)
        assert (answer["error_code"], answer["operation"]) == (40301, operation), (path, answer)
    status, configs = call("GET", f"{first}/v1/topics/placed/configs", who=ADMIN)
    assert status == 200 and configs == {"topic": "placed", "configs": {}}, "a refusal changed nothing"
    assert call("GET", f"{first}/v1/topics/frank-1/configs", who=ADMIN)[0] == 404

    grants = [
        cluster_acl("create"),
        cluster_acl("alter"),
        {"resource_type": "topic", "name": "placed", "principal": "User:frank", "operation": "alter_configs"},
    ]
    assert call("POST", f"{second}/v1/acls", {"acls": grants}, ADMIN)[0] == 200
    wait_for(
        lambda: call("POST", f"{third}/v1/topics", create)[0] == 201,
        "frank's CREATE applied on n3",
        15,
        every_s=0.1,
    )
    status, configs = call("PATCH", f"{third}/v1/topics/placed/configs", {"configs": {"retention.ms": 60000}})
    assert status == 200 and isinstance(configs, dict) and configs["configs"] == {"retention.ms": 60000}
    moved = call("POST", f"{third}/v1/partitions/placed/0/replicas", {"replicas": [elsewhere]})
    assert moved[0] == 202, moved
    status, page, _ = curl(f"{third}/metrics", *FRANK)  # ALTER implies DESCRIBE, as in Kafka
    assert status == 200 and "login_failures" in str(page)
    assert call("POST", f"{third}/v1/acls", {"acls": [cluster_acl("describe")]})[0] == 200
