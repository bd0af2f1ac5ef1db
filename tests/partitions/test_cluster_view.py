"""Gossip metadata and the merged view: addresses, liveness and leader routing by highest term."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from partitions.cluster_view import ClusterView, MetaFormatError, decode_meta, encode_meta


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
