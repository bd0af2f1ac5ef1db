"""Gossip metadata and the merged view: addresses, liveness and leader routing by highest term."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from partitions.replicas import failures as replica_failures
from partitions.replicas.cluster_view import ClusterView, MetaFormatError, decode_meta, encode_meta
from partitions.replicas.failures import NO_FAILURES_DIGEST, ReplicaFailure


@given(
    st.dictionaries(st.text(min_size=1, max_size=20), st.integers(0, 2**40), max_size=50),
    st.integers(0, 2**31),
)
def test_meta_round_trips_and_drops_claims_that_do_not_fit(claims: dict[str, int], version: int) -> None:
    blob = encode_meta("http://127.0.0.1:8081", "127.0.0.1:8181", version, claims, 512)
    assert len(blob) <= 512
    meta = decode_meta(blob)
    assert (meta.http, meta.raft, meta.claims_version) == ("http://127.0.0.1:8081", "127.0.0.1:8181", version)
    assert meta.claims is None or meta.claims == claims


def test_garbage_meta_is_refused() -> None:
    for blob in (b"", b"\xc1", b"\x93\x01\x02\x03", encode_meta("h", "r", 1, {}, 512)[:-1]):
        with pytest.raises(MetaFormatError):
            decode_meta(blob)


def _view() -> ClusterView:
    view = ClusterView("n1")
    view.update("n1", "alive", 1, encode_meta("http://a", "a:1", 1, {"t-0.1": 3}, 512))
    view.update("n2", "alive", 1, encode_meta("http://b", "b:1", 1, {"t-0.1": 5, "t-1.1": 2}, 512))
    view.update("n3", "alive", 1, encode_meta("http://c", "c:1", 1, {"t-1.1": 4}, 512))
    return view


def test_routing_prefers_the_highest_term_and_skips_dead_members() -> None:
    view = _view()
    assert view.leader_for("t-0.1") == "n2"  # term 5 beats n1's stale term 3
    assert view.leader_for("t-1.1") == "n3"
    assert view.leader_for("unknown") is None
    view.update("n2", "dead", 2, b"")
    assert view.leader_for("t-0.1") == "n1", "a dead member's claims are skipped"
    assert view.leader_counts() == {"n1": 1, "n3": 1}
    assert view.alive() == ["n1", "n3"]


def test_a_suspect_claim_counts_only_without_an_alive_one_at_that_term() -> None:
    view = _view()
    view.update("n3", "suspect", 2, b"")
    assert view.leader_for("t-1.1") == "n3", "a suspect is still better than nothing"
    view.update("n1", "alive", 2, encode_meta("http://a", "a:1", 2, {"t-1.1": 4}, 512))
    assert view.leader_for("t-1.1") == "n1", "at equal term the alive claimant wins"


def test_large_claim_tables_are_fetched_when_their_version_changes() -> None:
    view = ClusterView("n1")
    many = {f"topic-{i}.1": i for i in range(200)}
    view.update("n2", "alive", 1, encode_meta("http://b", "b:1", 7, many, 512))
    assert view.needs_claims("n2")
    view.set_claims("n2", 7, many)
    assert not view.needs_claims("n2") and view.leader_for("topic-10.1") == "n2"
    view.set_claims("n2", 6, {})  # an older answer arriving late changes nothing
    assert view.leader_for("topic-10.1") == "n2"
    view.update("n2", "alive", 2, encode_meta("http://b", "b:1", 8, many, 512))
    assert view.needs_claims("n2")


FAILED = ReplicaFailure("n2", "orders", 0, "InvariantViolation: replayed entry at offset 6 differs", 3)


def test_a_node_without_failed_replicas_sends_no_failure_field() -> None:
    assert encode_meta("h", "r", 1, {"t-0.1": 2}, 512, (5, 6)) == encode_meta(
        "h", "r", 1, {"t-0.1": 2}, 512, (5, 6), failures=()
    )
    meta = decode_meta(encode_meta("h", "r", 1, {}, 512))
    assert meta.failures == () and meta.failures_digest == NO_FAILURES_DIGEST


def test_failed_replicas_travel_in_gossip_and_are_reported_by_the_view() -> None:
    view = _view()
    view.update("n2", "alive", 2, encode_meta("http://b", "b:1", 2, {}, 512, None, [FAILED]))
    assert view.failure("n2", "orders", 0) == FAILED
    assert view.failure("n2", "orders", 1) is None and view.failure("n3", "orders", 0) is None
    assert view.failures() == [FAILED]
    assert not view.needs_failures("n2")
    view.update("n2", "dead", 3, b"")
    assert view.failure("n2", "orders", 0) is None and view.failures() == [], "a dead node reports nothing"
    view.update("n2", "alive", 4, encode_meta("http://b", "b:1", 2, {}, 512, (1, 2)))
    assert view.failures() == [], "a node whose replicas recovered sends no failures"


def test_failures_that_do_not_fit_travel_as_a_digest_and_are_fetched() -> None:
    many = [ReplicaFailure("n2", f"topic-{i}", i, "OSError: " + "x" * 200, 1) for i in range(10)]
    claims = {f"topic-{i}.1": i for i in range(5)}
    blob = encode_meta("http://b", "b:1", 1, claims, 512, (10, 20), many)
    assert len(blob) <= 512
    meta = decode_meta(blob)
    assert meta.failures is None and meta.failures_digest == replica_failures.digest(many)
    assert meta.claims == claims and meta.disk == (10, 20), "the claims still fit without the failures"
    view = ClusterView("n1")
    view.update("n2", "alive", 1, blob)
    assert view.needs_failures("n2") and view.failures() == []
    view.set_failures("n2", list(reversed(many)))
    assert not view.needs_failures("n2") and sorted(view.failures(), key=lambda f: f.partition) == many
    view.update("n2", "alive", 1, blob)
    assert not view.needs_failures("n2"), "the same digest again: nothing to fetch"


@given(
    st.dictionaries(st.text(min_size=1, max_size=20), st.integers(0, 2**40), max_size=50),
    st.lists(
        st.builds(
            ReplicaFailure,
            st.just(""),
            st.text(min_size=1, max_size=20),
            st.integers(0, 1000),
            st.text(max_size=300),
            st.integers(1, 50),
        ),
        max_size=8,
    ),
    st.one_of(st.none(), st.tuples(st.integers(0, 2**40), st.integers(0, 2**40))),
)
def test_meta_with_failures_fits_and_round_trips(
    claims: dict[str, int], failures: list[ReplicaFailure], disk: tuple[int, int] | None
) -> None:
    blob = encode_meta("http://127.0.0.1:8081", "127.0.0.1:8181", 3, claims, 512, disk, failures)
    assert len(blob) <= 512
    meta = decode_meta(blob)
    assert meta.disk == disk and meta.claims_version == 3
    assert meta.claims is None or meta.claims == claims
    assert meta.failures_digest == replica_failures.digest(failures)
    assert meta.failures is None or list(meta.failures) == failures


def test_a_kafka_listener_travels_in_gossip_with_or_without_disk_and_failures() -> None:
    for disk, failures in ((None, ()), ((1, 2), ()), (None, [FAILED]), ((1, 2), [FAILED])):
        meta = decode_meta(encode_meta("h", "r", 1, {}, 512, disk, failures, kafka="10.0.0.1:9092"))
        assert meta.kafka == "10.0.0.1:9092" and meta.disk == disk
        assert meta.failures is not None and len(meta.failures) == len(failures)
    assert decode_meta(encode_meta("h", "r", 1, {}, 512, (1, 2))).kafka is None
    with pytest.raises(MetaFormatError, match="Kafka address"):
        decode_meta(msgpack.packb([1, "h", "r", 1, [], None, None, 9092]))


def test_a_full_disk_travels_in_gossip_as_a_ninth_field_older_nodes_do_not_read() -> None:
    for disk, failures, kafka in ((None, (), None), ((1, 2), [FAILED], "10.0.0.1:9092"), ((3, 0), (), None)):
        blob = encode_meta("h", "r", 1, {}, 512, disk, failures, kafka, disk_full=True)
        meta = decode_meta(blob)
        assert meta.disk_full and meta.disk == disk and meta.kafka == kafka
        assert len(msgpack.unpackb(blob)) == 9  # a node before the flag reads the first eight only
        assert not decode_meta(encode_meta("h", "r", 1, {}, 512, disk, failures, kafka)).disk_full
    broken = msgpack.packb([*msgpack.unpackb(encode_meta("h", "r", 1, {}, 512, disk_full=True))[:8], "yes"])
    with pytest.raises(MetaFormatError, match="disk-full"):
        decode_meta(broken)
