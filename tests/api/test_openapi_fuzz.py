"""Fuzz every endpoint from the OpenAPI document the app serves (schemathesis): no 5xx, only documented
status codes and content types, bodies that match their schema.

Two nodes over one in-memory ``FakeCluster`` are served on 127.0.0.1 by an event loop in a background
thread (schemathesis drives a blocking HTTP client). Requests go to n1; some partitions are led by n2 only,
so forwarding is fuzzed too. Generated path parameters, query parameters and bodies are steered towards
existing topics, partitions and offsets three times in four (otherwise nearly every request would stop at
"unknown topic"; consumer-instance paths are steered to an instance subscribed to "orders"); the rest,
and schemathesis's coverage phase, stay as generated. The cluster is rebuilt
before every case, so a fuzzed ``DELETE /v1/topics/{topic}`` does not starve later cases. Fetch waits are
capped at 20 ms in the fake data service (the API still sees any ``timeout``), which keeps a run bounded.

CI runs each operation's coverage cases (about 50) and 40 derandomized examples (about 52 s for the 71
operations alone on 2 cores); ``RAFTLOG_FUZZ_EXAMPLES=600`` runs a longer, randomized hunt. A failure
names the operation (in the test's id too), the check (e.g. "ST108 Response violates schema"), the answer
and a curl command that reproduces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import json
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
import requests
import schemathesis
from aiohttp import web
from fake_node import INTERNAL_CREDENTIAL, FakeCluster, FakeData, FakeNode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case, HookContext
from schemathesis.checks import CheckFunction, not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import ROUTES, build_app
from api.openapi import document
from partitions.controller.state import TopicMetadata
from partitions.data.service import FetchedBatches
from partitions.features import SUPPORTED
from partitions.groups.group_model import InstanceConfig
from partitions.peers.client import LEVELS_HEADER, encode_levels
from partitions.peers.client import MEDIA_TYPE as PEER_MEDIA_TYPE
from raftlog.consensus.errors import NotLeader
from raftlog.storage.batch import ProducerRecord, encode_batch
from raftlog_contract import RECORD_BATCH

T = TypeVar("T")
TOPICS: dict[str, list[list[str]]] = {
    "orders": [["n1", "n2"], ["n2", "n1"]],  # n1 leads partition 0, n2 leads partition 1
    "audit": [["n2"]],  # n1 holds no replica: always forwarded
}
FETCH_WAIT_MS_MAX = 20
EXAMPLES_PER_OPERATION = int(os.environ.get("RAFTLOG_FUZZ_EXAMPLES", "40"))  # more for a longer hunt


# opaque binary bodies, sent as they are: a peer call's msgpack, a producer-encoded record batch
schemathesis.serializer.alias([PEER_MEDIA_TYPE, RECORD_BATCH], "application/octet-stream")

CHECKS: list[CheckFunction] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


class ShortWaitData(FakeData):
    """Long polls cut short: a fuzzed fetch's timeout is anything up to the documented maximum."""

    async def fetch_batches(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> FetchedBatches:
        return await super().fetch_batches(
            topic, partition, offset, max_bytes, min(timeout_ms, FETCH_WAIT_MS_MAX)
        )

    async def fetch_stable(
        self, topic: str, partition: int, offset: int, max_bytes: int, timeout_ms: int
    ) -> FetchedBatches:
        return await super().fetch_stable(
            topic, partition, offset, max_bytes, min(timeout_ms, FETCH_WAIT_MS_MAX)
        )


class ServedCluster:
    """Nodes n1 and n2 served by an event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.cluster = FakeCluster(["n1", "n2"])
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-server", daemon=True)
        self.runners: list[web.AppRunner] = []
        self.nodes: list[FakeNode] = []
        self.data: dict[str, FakeData] = {}
        self.made: dict[str, TopicMetadata] | None = None  # the topics as the last reset left them
        self.applied: dict[tuple[str, int], int] = {}  # and the entries each partition had applied
        # One session for every case: its connections are kept alive (a case no longer costs a connect,
        # an accept and a close on each side), and it reads no proxy settings from the environment for
        # each request (requests walks every variable: 6 of the file's 150 CPU seconds). It keeps no
        # cookie: a case carries nothing from the one before (the API sets none today).
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        self.thread.start()
        for node_id in self.cluster.node_ids:
            self.cluster.addresses[node_id] = self.run(self._serve(node_id))
        self.run(self._reset())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    @property
    def url(self) -> str:
        return self.cluster.addresses["n1"]

    async def _serve(self, node_id: str) -> str:
        node = FakeNode(self.cluster, node_id, data=ShortWaitData)
        self.data[node_id] = node.data
        self.nodes.append(node)
        runner = web.AppRunner(build_app(node))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.runners.append(runner)
        host, port = runner.addresses[0][:2]
        return f"http://{host}:{port}"

    def _untouched(self) -> bool:
        """Whether the topics are as the last reset left them. A partition's state changes only by an
        entry applied to it (each counted) or by the fake admin, which replaces its topic's metadata or
        moves its leader."""
        cluster = self.cluster
        if self.made is None or cluster.topics != self.made:
            return False
        for name, meta in self.made.items():
            if cluster.topics[name] is not meta:
                return False
            for p in range(meta.partitions):
                state = cluster.partitions.get((name, p))
                if state is None or (state.applied, state.term, state.leader, state.replicas) != (
                    self.applied.get((name, p), 0),
                    1,
                    meta.replicas[p][0],
                    meta.replicas[p],
                ):
                    return False
        return True

    async def _reset(self) -> None:
        """Every case starts from the same cluster: the topics of ``TOPICS``, three records in each
        partition, the consumer group's one instance. Partitions a case left untouched are kept (a log
        costs about a millisecond to make, and most cases only read)."""
        cluster = self.cluster
        for data in self.data.values():
            data.inject.clear()
            data.leader_overrides.clear()
        if not self._untouched():
            for name in list(cluster.topics):
                cluster.drop_topic(name)
            for name, replicas in TOPICS.items():
                cluster.add_topic(name, len(replicas), replicas)
            for (name, partition), state in cluster.partitions.items():
                leader = self.data[state.leader or "n1"]
                for i in range(3):
                    value = f"{name}-{partition}-{i}".encode()
                    batch = encode_batch(0, [ProducerRecord(value)], 0, int(time.time() * 1000))
                    await leader.produce_batch(name, partition, batch, 1000)
        cluster.group_tables.clear()
        with contextlib.suppress(NotLeader):  # n1 (the controller) creates __consumer_groups
            await self.data["n1"].groups.create_instance(
                GROUP, INSTANCE, InstanceConfig(offset_reset="earliest")
            )
        coordinator = next(b for b in self.data.values() if b.groups.recorded(GROUP) is not None)
        if coordinator.node_id != "n1":
            await coordinator.groups.create_instance(GROUP, INSTANCE, InstanceConfig(offset_reset="earliest"))
        await coordinator.groups.subscribe(GROUP, INSTANCE, ["orders"])
        self.made = dict(cluster.topics)
        self.applied = {key: state.applied for key, state in cluster.partitions.items()}

    def reset(self) -> None:
        self.run(self._reset())

    def close(self) -> None:
        self.session.close()
        for runner in self.runners:
            self.run(runner.cleanup())
        for node in self.nodes:
            self.run(node.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def _maybe(generated: Any, replacement: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Keep what schemathesis generated one time in four, else take ``replacement`` (which exists).
    Hypothesis shrinks towards 0, so a shrunk failure prefers the existing value."""
    return st.integers(0, 3).flatmap(lambda n: st.just(generated) if n == 3 else replacement)


def _steer(generated: Any, choices: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Each key of ``choices`` present in the mapping ``generated`` is (probably) replaced."""
    if not isinstance(generated, dict):
        return st.just(generated)
    present = {key: _maybe(generated[key], values) for key, values in choices.items() if key in generated}
    return st.fixed_dictionaries(present).map(lambda steered: {**generated, **steered})


def _steer_items(
    generated: Any, field: str, choices: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[Any]:
    """Steer each object of the list ``generated[field]``."""
    if not isinstance(generated, dict) or not isinstance(generated.get(field), list):
        return st.just(generated)
    items = st.tuples(*(_steer(item, choices) for item in generated[field]))
    return items.map(lambda steered: {**generated, field: list(steered)})


TOPIC = st.sampled_from(sorted(TOPICS))
PARTITION = st.integers(0, 1)
OFFSET = st.integers(0, 4)  # each partition holds offsets 0..2
GROUP, INSTANCE = "fuzzers", "fuzz"  # a consumer instance subscribed to "orders", made before each case
PATH = {"topic": TOPIC, "partition": PARTITION, "group": st.just(GROUP), "instance": st.just(INSTANCE)}
QUERY = {
    "topic": TOPIC,
    "partition": PARTITION,
    "offset": OFFSET,
    "timeout": st.integers(0, 50),
    "max_bytes": st.integers(1, 200),
    "target": st.sampled_from(["n1", "n2"]),
}


def _steer_produce(body: Any) -> st.SearchStrategy[Any]:
    """Records to existing partitions; producer_id and sequence given together (or neither)."""
    records = _steer_items(body, "records", {"partition": st.sampled_from([None, 0])})
    if not isinstance(body, dict):
        return records
    producer = st.sampled_from([{}, {"producer_id": 7, "sequence": 0}, {"producer_id": 7, "sequence": 1}])

    def paired(steered: dict[str, Any], idempotent: dict[str, int]) -> dict[str, Any]:
        rest = {k: v for k, v in steered.items() if k not in ("producer_id", "sequence")}
        return {**rest, **idempotent}

    return _maybe(body, st.tuples(records, producer).map(lambda pair: paired(*pair)))


BODIES: dict[str, Callable[[Any], st.SearchStrategy[Any]]] = {
    "produce": _steer_produce,
    "produceToPartition": _steer_produce,
    "commitOffsets": lambda body: _steer_items(
        body, "offsets", {"topic": TOPIC, "partition": PARTITION, "offset": OFFSET}
    ),
    "commitConsumerOffsets": lambda body: _steer_items(
        body, "offsets", {"topic": TOPIC, "partition": PARTITION, "offset": OFFSET}
    ),
    "seek": lambda body: _steer_items(
        body, "offsets", {"topic": TOPIC, "partition": PARTITION, "offset": OFFSET}
    ),
    "seekToBeginning": lambda body: _steer_items(
        body, "partitions", {"topic": TOPIC, "partition": PARTITION}
    ),
    "seekToEnd": lambda body: _steer_items(body, "partitions", {"topic": TOPIC, "partition": PARTITION}),
    "subscribe": lambda body: _steer(body, {"topics": st.lists(TOPIC, min_size=1, max_size=2)}),
    "createTopic": lambda body: _steer(
        body,
        {
            "name": st.from_regex(r"[a-z][a-z0-9_.-]{0,20}", fullmatch=True),
            "partitions": st.integers(1, 4),
            "replication_factor": st.integers(1, 2),
            "configs": st.just({}),
        },
    ),
}


def _load_schema() -> Any:
    """The document ``GET /openapi.json`` serves (checked below), loaded without a server at import."""
    loaded = schemathesis.openapi.from_dict(document(ROUTES, admin_token=False))

    @loaded.hook("flatmap_path_parameters")  # type: ignore[untyped-decorator]
    def existing_partition(context: HookContext, path_parameters: Any) -> st.SearchStrategy[Any]:
        return _steer(path_parameters, PATH)

    @loaded.hook("flatmap_query")  # type: ignore[untyped-decorator]
    def existing_offsets(context: HookContext, query: Any) -> st.SearchStrategy[Any]:
        return _steer(query, QUERY)

    @loaded.hook("flatmap_body")  # type: ignore[untyped-decorator]
    def existing_records(context: HookContext, body: Any) -> st.SearchStrategy[Any]:
        operation = context.operation
        steer = BODIES.get(operation.definition.raw["operationId"]) if operation is not None else None
        return steer(body) if steer is not None else st.just(body)

    return loaded


schema = _load_schema()
# Node-to-node calls take only the cluster credential and answer every fuzzed request 401:
# tests/api/test_internal_endpoints.py walks each of them instead (refusals, typed answers, bad bodies).
OPERATIONS = {
    result.ok().label: result.ok()
    for result in schema.exclude(path_regex=r"^/internal/").get_all_operations()
}


@pytest.fixture(scope="module")
def served() -> Iterator[ServedCluster]:
    cluster = ServedCluster()
    yield cluster
    cluster.close()


def _call(case: Case, served: ServedCluster) -> None:
    served.reset()
    case.call_and_validate(base_url=served.url, session=served.session, checks=CHECKS, timeout=10)


# A test per operation, named by it, whose cases are made when it runs: schemathesis's own parametrize
# gives every operation's test one and the same name under pytest 9.2 (so a failure's id, -k and the
# file's cost in tests/file_costs.json did not say which), and makes the coverage phase's cases while
# collecting, about 3.6 s of CPU in every worker of a parallel run.
@pytest.mark.parametrize("label", list(OPERATIONS))
def test_every_endpoint_answers_as_documented(label: str, served: ServedCluster) -> None:
    """schemathesis's coverage phase (each parameter's boundaries, missing and wrong-typed values), then
    its fuzzing phase (positive and negative cases, steered by the hooks above)."""
    operation = OPERATIONS[label]
    coverage = schema.config.generation_for(operation=operation, phase="coverage")
    for case in schema.iter_coverage_cases(
        operation, generation_modes=list(coverage.modes), generation_config=coverage
    ):
        _call(case, served)
    fuzzing = schema.config.generation_for(operation=operation, phase="fuzzing")

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=os.environ.get("RAFTLOG_FUZZ_EXAMPLES") is None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of([operation.as_strategy(generation_mode=mode) for mode in fuzzing.modes]))
    def fuzzed(case: Case) -> None:
        _call(case, served)

    fuzzed()


def _operation(path: str, method: str) -> Any:
    return schema[path][method]


def test_the_fuzzed_document_is_the_served_one(served: ServedCluster) -> None:
    answer = requests.get(f"{served.url}/openapi.json", timeout=10)
    assert answer.status_code == 200
    assert answer.json() == json.loads(json.dumps(document(ROUTES, admin_token=False)))


def test_what_the_fuzzer_found_stays_fixed(served: ServedCluster) -> None:
    """Each of these failed the checks before its fix: the 201 of createTopic was documented as a
    ``Topic`` (partitions as a list; it is a count); a duplicated query parameter answered an undocumented
    400; a peer call whose body is not a peer message must be a documented 400, not a 500."""
    served.reset()
    created = _operation("/v1/topics", "POST").Case(body={"name": "fresh", "partitions": 2})
    assert created.call_and_validate(base_url=served.url, checks=CHECKS).status_code == 201
    twice = _operation("/topics/{topic}/partitions/{partition}/records", "GET").Case(
        path_parameters={"topic": "orders", "partition": 0}, query={"offset": ["0", "1"]}
    )
    assert twice.call_and_validate(base_url=served.url, checks=CHECKS).status_code == 400
    # internal endpoints answer only a peer, of a release that reads the cluster's formats
    peer = {"Authorization": f"Bearer {INTERNAL_CREDENTIAL}", LEVELS_HEADER: encode_levels(SUPPORTED)}
    garbled = _operation("/internal/v1/peer/read_batches", "POST").Case(
        body=b"\xc1 not msgpack", media_type=PEER_MEDIA_TYPE, headers=peer
    )
    assert garbled.call_and_validate(base_url=served.url, checks=CHECKS).status_code == 400


def test_the_checks_fail_on_a_bad_answer(served: ServedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fuzz test that cannot fail is worth nothing: a body off its schema and a 500 are both caught."""
    served.reset()
    monkeypatch.setattr(served.nodes[0].metadata, "topics", lambda: [1, 2])
    with pytest.raises(FailureGroup, match="not of type"):
        _operation("/topics", "GET").Case().call_and_validate(base_url=served.url, checks=CHECKS)
    served.data["n1"].inject["offsets"] = [RuntimeError("a bug")]
    offsets = _operation("/topics/{topic}/partitions/{partition}/offsets", "GET").Case(
        path_parameters={"topic": "orders", "partition": 0}
    )
    with pytest.raises(FailureGroup, match="Server error"):
        offsets.call_and_validate(base_url=served.url, checks=CHECKS)
