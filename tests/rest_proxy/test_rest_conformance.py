"""The reference REST proxies' own cases, against a real 3-node cluster: Confluent's kafka-rest v2
integration tests (ConsumerBinaryTest, ConsumerJsonTest, ConsumerTimeoutTest, SeekToTimestampTest,
ProducerTest, MetadataApiTest, RootResourceTest) and Redpanda's pandaproxy tests (content negotiation,
consumer lifecycle, offsets, invalid inputs), in our own words. Stateless requests go to every node (two
of three are not the partition's leader); a consumer's steps go through different nodes. Where raftlog
answers differently on purpose, the test says so and docs/rest-conformance.md gives the reason."""

from __future__ import annotations

import asyncio
import base64
import datetime
import time
from typing import Any

from rest_fixtures import BINARY, JSON, V2, Answer, b64, call
from waiting import wait_until

from raftlog_client.local_cluster import LocalCluster


async def create_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    body = {"name": name, "partitions": partitions, "replication_factor": 3}
    created = await call(cluster.servers[0], "POST", "/v1/topics", body=body, content_type="application/json")
    assert created.status == 201, created.body
    for base in cluster.servers:  # every node knows it and its leaders before the cases start

        async def led(base: str = base) -> bool:
            view = await call(base, "GET", f"/topics/{name}/partitions")
            return view.status == 200 and all(p["leader"] for p in view.body)

        await wait_until(led, f"{base} to know {name} and its leaders", timeout_s=20)


async def produce_binary(base: str, topic: str, records: list[dict[str, Any]]) -> Answer:
    return await call(base, "POST", f"/topics/{topic}", body={"records": records}, content_type=BINARY)


async def read_until(base: str, instance: str, count: int, accept: str = BINARY) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(rows) < count and time.monotonic() < deadline:
        answer = await call(base, "GET", f"{instance}/records", accept=accept, params={"timeout": "500"})
        assert answer.status == 200 and answer.content_type == accept, answer
        rows += answer.body
    return rows


async def test_metadata_on_every_node(rest_cluster: LocalCluster) -> None:
    """MetadataApiTest and Redpanda's test_get_brokers / test_list_topics(_validation)."""
    await create_topic(rest_cluster, "meta", 2)
    for base in rest_cluster.servers:
        brokers = await call(base, "GET", "/brokers")
        assert brokers.status == 200 and brokers.content_type == V2 and brokers.body == {"brokers": [1, 2, 3]}
        for accept in (None, "*/*", V2):
            topics = await call(base, "GET", "/topics", accept=accept, content_type=None)
            assert topics.status == 200 and topics.content_type == V2 and "meta" in topics.body
        topic = await call(base, "GET", "/topics/meta")
        assert topic.body["name"] == "meta" and len(topic.body["partitions"]) == 2
        partition = await call(base, "GET", "/topics/meta/partitions/0")
        assert partition.body["partition"] == 0 and len(partition.body["replicas"]) == 3
        assert sorted(r["broker"] for r in partition.body["replicas"]) == [1, 2, 3]
        assert sum(r["leader"] for r in partition.body["replicas"]) == 1
        offsets = await call(base, "GET", "/topics/meta/partitions/1/offsets")
        assert offsets.body == {"beginning_offset": 0, "end_offset": 0}
        missing = await call(base, "GET", "/topics/topicdoesntexist")
        assert (missing.status, missing.error_code, missing.content_type) == (404, 40401, V2)
        no_partition = await call(base, "GET", "/topics/meta/partitions/1000")
        assert (no_partition.status, no_partition.error_code) == (404, 40402)
        # Redpanda answers application/json with 406; raftlog answers the same JSON labelled as asked
        plain = await call(base, "GET", "/topics", accept="application/json")
        assert plain.status == 200 and plain.content_type == "application/json"


async def test_content_negotiation_on_every_node(rest_cluster: LocalCluster) -> None:
    """RootResourceTest and Redpanda's validation cases: 406 for an Accept naming nothing served, 415
    for a body without a Content-Type or with one the route does not take."""
    await create_topic(rest_cluster, "media", 1)
    for base in rest_cluster.servers:
        refused = await call(base, "GET", "/topics", accept="text/plain")
        assert (refused.status, refused.error_code) == (406, 40601)
        records = {"records": [{"value": b64(b"x")}]}
        for content_type in (None, "text/plain", V2):
            answer = await call(base, "POST", "/topics/media", body=records, content_type=content_type)
            assert (answer.status, answer.error_code) == (415, 41501), (content_type, answer)
        # the references answer 406 here; raftlog answers in the v2 type (docs/rest-conformance.md)
        one_accept = await call(
            base, "POST", "/topics/media", body=records, content_type=BINARY, accept=BINARY
        )
        assert one_accept.status == 200 and one_accept.content_type == V2
        consumer = await call(base, "POST", "/consumers/media-g", body={"name": "c"}, content_type=None)
        assert (consumer.status, consumer.error_code) == (415, 41501)


async def test_binary_consumer_lifecycle_across_nodes(rest_cluster: LocalCluster) -> None:
    """ConsumerBinaryTest (only values, with keys, Accept */*, commit, delete, not found after) and
    Redpanda's test_create_consumer_validation (duplicate name)."""
    await create_topic(rest_cluster, "bin", 3)
    n1, n2, n3 = rest_cluster.servers
    created = await call(n1, "POST", "/consumers/bin-g", body={"name": "c", "auto.offset.reset": "earliest"})
    assert created.status == 200 and created.content_type == V2 and created.body["instance_id"] == "c"
    assert created.body["base_uri"].endswith("/consumers/bin-g/instances/c")
    duplicate = await call(n2, "POST", "/consumers/bin-g", body={"name": "c"})
    assert (duplicate.status, duplicate.error_code, duplicate.content_type) == (409, 40902, V2)
    config = {"id": "id", "name": "name", "format": "binary", "auto.offset.reset": "bad-config"}
    bad = await call(n3, "POST", "/consumers/bin-g", body=config)
    assert (bad.status, bad.error_code, bad.content_type) == (422, 42204, V2)
    instance = "/consumers/bin-g/instances/c"
    subscribed = await call(n2, "POST", f"{instance}/subscription", body={"topics": ["bin"]})
    assert subscribed.status == 204
    first = await call(n3, "GET", f"{instance}/records", accept=BINARY, params={"timeout": "0"})
    assert first.status == 200 and first.body == []
    values = [b"value-1", b"value-2", b"value-3", b"value-4"]
    produced = await produce_binary(
        n3, "bin", [{"key": b64(b"k%d" % i), "value": b64(v)} for i, v in enumerate(values)]
    )
    assert produced.status == 200 and produced.content_type == V2
    assert all(o.get("error_code") is None and o["offset"] >= 0 for o in produced.body["offsets"])
    rows = await read_until(n1, instance, 4)
    assert sorted(base64_value(r) for r in rows) == values and all(r["timestamp"] > 0 for r in rows)
    assert {r["topic"] for r in rows} == {"bin"}
    accept_all = await call(n2, "GET", f"{instance}/records", accept="*/*", params={"timeout": "0"})
    assert accept_all.status == 200 and accept_all.content_type == BINARY
    committed = await call(n3, "POST", f"{instance}/offsets", raw=b"")
    assert committed.status == 200 and committed.content_type == V2 and committed.body == []
    assert (await call(n1, "DELETE", instance)).status == 204
    gone = await call(n2, "GET", f"{instance}/records")
    assert (gone.status, gone.error_code) == (404, 40403) and gone.content_type == BINARY


def base64_value(row: dict[str, Any]) -> bytes:
    return base64.b64decode(row["value"])


async def test_json_consumer_round_trips_json_values(rest_cluster: LocalCluster) -> None:
    """ConsumerJsonTest: strings, null, numbers, maps and lists come back as the JSON they were."""
    await create_topic(rest_cluster, "json", 1)
    n1, n2, n3 = rest_cluster.servers
    values: list[Any] = ["value", None, 43.2, 999, {"key": "value"}, [1, "two"]]
    produced = await call(
        n1, "POST", "/topics/json", body={"records": [{"value": v} for v in values]}, content_type=JSON
    )
    assert produced.status == 200
    created = await call(
        n2, "POST", "/consumers/json-g", body={"format": "json", "auto.offset.reset": "earliest"}
    )
    instance = "/consumers/json-g/instances/" + created.body["instance_id"]
    assert (await call(n3, "POST", f"{instance}/subscription", body={"topics": ["json"]})).status == 204
    rows = await read_until(n1, instance, len(values), accept=JSON)
    assert [r["value"] for r in rows] == values
    wrong = await call(n2, "GET", f"{instance}/records", accept=BINARY)
    assert (wrong.status, wrong.error_code) == (406, 40601)


async def test_a_read_without_timeout_waits_the_request_timeout(rest_cluster: LocalCluster) -> None:
    """ConsumerTimeoutTest: an empty read lasts consumer.request.timeout.ms, not much longer."""
    await create_topic(rest_cluster, "idle", 1)
    n1, n2, _ = rest_cluster.servers
    body = {"name": "t", "consumer.request.timeout.ms": "500"}
    assert (await call(n1, "POST", "/consumers/idle-g", body=body)).status == 200
    instance = "/consumers/idle-g/instances/t"
    assert (await call(n2, "POST", f"{instance}/subscription", body={"topics": ["idle"]})).status == 204
    for _ in range(2):
        started = time.monotonic()
        empty = await call(n1, "GET", f"{instance}/records", accept=BINARY)
        elapsed = time.monotonic() - started
        assert empty.body == [] and 0.45 <= elapsed < 10, elapsed


async def test_seek_to_a_timestamp(rest_cluster: LocalCluster) -> None:
    """SeekToTimestampTest: three records, a moment, three more; seeking to the moment reads the three
    later ones."""
    await create_topic(rest_cluster, "seek", 1)
    n1, n2, n3 = rest_cluster.servers
    created = await call(n1, "POST", "/consumers/seek-g", body={"name": "s"})
    instance = "/consumers/seek-g/instances/s"
    assert created.status == 200
    assert (await call(n2, "POST", f"{instance}/subscription", body={"topics": ["seek"]})).status == 204
    await read_until(n3, instance, 0)  # the first read takes the assignment
    before = [{"value": b64(b"before-%d" % i), "partition": 0} for i in range(3)]
    assert (await produce_binary(n1, "seek", before)).status == 200
    await asyncio.sleep(0.5)
    moment = datetime.datetime.now(datetime.UTC)
    await asyncio.sleep(0.5)
    after = [{"value": b64(b"after-%d" % i), "partition": 0} for i in range(3)]
    assert (await produce_binary(n2, "seek", after)).status == 200
    stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    body = {"timestamps": [{"topic": "seek", "partition": 0, "timestamp": stamp}]}
    assert (await call(n3, "POST", f"{instance}/positions", body=body)).status == 204
    rows = await read_until(n1, instance, 3)
    assert [base64_value(r) for r in rows] == [b"after-0", b"after-1", b"after-2"]
    assert (await call(n2, "POST", f"{instance}/offsets", raw=b"")).status == 200


async def test_produce_answers_per_record_on_every_node(rest_cluster: LocalCluster) -> None:
    """ProducerTest: keys, explicit partitions, null values, to a partition (exact offsets)."""
    await create_topic(rest_cluster, "prod", 3)
    for base in rest_cluster.servers:
        keyed = await produce_binary(
            base, "prod", [{"key": b64(b"key%d" % i), "value": b64(b"v")} for i in range(4)]
        )
        assert keyed.status == 200 and keyed.content_type == V2 and len(keyed.body["offsets"]) == 4
        placed = await produce_binary(
            base, "prod", [{"value": b64(b"v"), "partition": p} for p in (0, 1, 1, 2)]
        )
        assert [o["partition"] for o in placed.body["offsets"]] == [0, 1, 1, 2]
        nulls = await produce_binary(base, "prod", [{"value": None}] * 4)
        assert nulls.status == 200 and len(nulls.body["offsets"]) == 4
    to_partition = []
    for base in rest_cluster.servers:
        two = {"records": [{"value": b64(b"x")}] * 2}
        answer = await call(base, "POST", "/topics/prod/partitions/2", body=two, content_type=BINARY)
        assert answer.status == 200 and [o["partition"] for o in answer.body["offsets"]] == [2, 2]
        to_partition += [o["offset"] for o in answer.body["offsets"]]
    assert to_partition == list(range(to_partition[0], to_partition[0] + 6))  # dense, in order
    # Confluent answers 200 with an error per record after its producer's metadata timeout, Redpanda 200
    # with Kafka's code 3: raftlog answers at once with the request's error (docs/rest-conformance.md)
    missing = await produce_binary(rest_cluster.servers[1], "invalid-topic", [{"value": b64(b"v")}])
    assert (missing.status, missing.error_code) == (404, 40401)


async def test_group_offsets_with_redpandas_body(rest_cluster: LocalCluster) -> None:
    """Redpanda's test_consumer_group_binary_v2: three topics of three partitions, a record each; nothing
    committed (raftlog, as Confluent, leaves those partitions out); commit with the ``partitions`` body;
    read back."""
    topics = ["grp-a", "grp-b", "grp-c"]
    for topic in topics:
        await create_topic(rest_cluster, topic, 3)
        for p in range(3):
            assert (
                await produce_binary(rest_cluster.servers[p], topic, [{"value": b64(b"x"), "partition": p}])
            ).status == 200
    n1, n2, n3 = rest_cluster.servers
    created = await call(n1, "POST", "/consumers/grp-g", body={"name": "m", "auto.offset.reset": "earliest"})
    instance = "/consumers/grp-g/instances/m"
    assert created.status == 200
    assert (await call(n2, "POST", f"{instance}/subscription", body={"topics": topics})).status == 204
    every = [{"topic": t, "partition": p} for t in topics for p in range(3)]
    before = await call(n3, "GET", f"{instance}/offsets", body={"partitions": every})
    assert before.status == 200 and before.body == {"offsets": []}
    assert len(await read_until(n1, instance, 9)) == 9
    commit = {"partitions": [{**tp, "offset": 0} for tp in every]}
    assert (await call(n2, "POST", f"{instance}/offsets", body=commit)).status == 200
    after = await call(n3, "GET", f"{instance}/offsets", body={"partitions": every})
    assert sorted(
        (o["topic"], o["partition"], o["offset"], o["metadata"]) for o in after.body["offsets"]
    ) == [(t, p, 0, "") for t in topics for p in range(3)]
    assert (await call(n1, "DELETE", instance)).status == 204


async def test_invalid_names_are_refused_naming_the_parameter(rest_cluster: LocalCluster) -> None:
    """Redpanda's PandaProxyInvalidInputsTest: control characters in names in the path and in bodies."""
    await create_topic(rest_cluster, "names", 1)
    n1, n2, n3 = rest_cluster.servers
    member = await call(n1, "POST", "/consumers/names-g", body={"name": "my\nconsumer"})
    assert (member.status, member.error_code) == (400, 40001) and "name" in member.body["message"]
    group = await call(n2, "POST", "/consumers/My%0Dconsumer", body={"name": "c"})
    assert group.status == 400 and "path parameter group" in group.body["message"]
    deleted = await call(n3, "DELETE", "/consumers/names-g/instances/my%7Finstance")
    assert deleted.status == 400 and "path parameter instance" in deleted.body["message"]
    produced = await call(
        n1, "POST", "/topics/my%0Dtopic", body={"records": [{"value": None}]}, content_type=BINARY
    )
    assert produced.status == 400 and "path parameter topic" in produced.body["message"]
    fetched = await call(n2, "GET", "/topics/my%1Ftopic/partitions/0/records?offset=0")
    assert fetched.status == 400
    assert (await call(n1, "POST", "/consumers/names-g", body={"name": "ok"})).status == 200
    subscribe = await call(
        n3, "POST", "/consumers/names-g/instances/ok/subscription", body={"topics": ["test\ntopic"]}
    )
    assert subscribe.status == 400 and "topics[0]" in subscribe.body["message"]
    commit = {"offsets": [{"topic": "test\ntopic", "partition": 0, "offset": 0}]}
    committed = await call(n2, "POST", "/consumers/names-g/instances/ok/offsets", body=commit)
    assert committed.status == 400 and "offsets[0].topic" in committed.body["message"]
