"""Which transactional ids a listing keeps (``TransactionFilter``, both doors' ListTransactions): Kafka's
filters by state, producer id and how long a transaction has been open, and KIP-1152's pattern of ids,
matched whole with RE2 as Kafka's ``Pattern.matcher(id).matches()``, a pattern RE2 refuses answered in
Kafka's words."""

from __future__ import annotations

import pytest

from partitions.regex import REGEX_CHARS_MAX
from partitions.transactions.errors import InvalidTransactionalIdPattern
from partitions.transactions.service import STATES, TransactionFilter, TransactionSummary

NOW_MS = 1_000_000


def summary(
    tid: str, state: str = "Ongoing", producer_id: int = 1, started_ms: int = NOW_MS - 10
) -> TransactionSummary:
    return TransactionSummary(tid, producer_id, 0, state, started_ms, 60_000, 0)


def kept(wanted: TransactionFilter, *summaries: TransactionSummary) -> list[str]:
    return [s.transactional_id for s in summaries if wanted.keeps(s, NOW_MS)]


def test_a_pattern_matches_the_whole_id() -> None:
    ids = [summary(t) for t in ("app-1", "app-2", "my-app-1", "app-10", "app")]
    assert kept(TransactionFilter.of(id_pattern="app-\\d"), *ids) == ["app-1", "app-2"]
    assert kept(TransactionFilter.of(id_pattern="app"), *ids) == ["app"]  # not a search: the whole id
    assert kept(TransactionFilter.of(id_pattern=".*app-1.*"), *ids) == ["app-1", "my-app-1", "app-10"]
    for none in (None, ""):  # as Kafka reads an empty or null pattern: every id
        assert kept(TransactionFilter.of(id_pattern=none), *ids) == [s.transactional_id for s in ids]


def test_every_filter_holds_at_once() -> None:
    ids = [
        summary("a-1", "Ongoing", 1, NOW_MS - 5_000),
        summary("a-2", "Ongoing", 2, NOW_MS - 50),
        summary("a-3", "CompleteCommit", 1, -1),
        summary("b-1", "Ongoing", 1, NOW_MS - 5_000),
    ]
    wanted = TransactionFilter.of(["Ongoing"], [1], 1_000, "a-.*")
    assert kept(wanted, *ids) == ["a-1"]
    assert kept(TransactionFilter.of(open_longer_than_ms=0), *ids) == [
        "a-1",
        "a-2",
        "b-1",
    ]  # none open: left out
    assert kept(TransactionFilter.of(producer_ids=[2]), *ids) == ["a-2"]


def test_unknown_states_are_named_and_match_nothing() -> None:
    wanted = TransactionFilter.of(["Running", "Ongoing", "Bogus"])
    assert wanted.unknown_states == ("Bogus", "Running")
    assert kept(wanted, summary("x", "Empty"), summary("y", "Ongoing")) == ["y"]
    assert TransactionFilter.of(STATES).unknown_states == ()


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("app-(", "missing )"),
        ("(a)\\1", "invalid escape sequence"),  # RE2 has no backreferences, as RE2/J
        ("(?=a)b", "invalid perl operator"),  # nor lookarounds
        ("x" * (REGEX_CHARS_MAX + 1), f"longer than {REGEX_CHARS_MAX} characters"),
    ],
)
def test_a_pattern_re2_refuses_is_answered_in_kafka_s_words(pattern: str, reason: str) -> None:
    with pytest.raises(InvalidTransactionalIdPattern) as refused:
        TransactionFilter.of(id_pattern=pattern)
    assert str(refused.value).startswith(
        f"Transaction ID pattern `{pattern}` is not a valid regular expression: "
    )
    assert reason in str(refused.value)


def test_a_pattern_that_backtracks_without_end_in_re_ends_in_re2() -> None:
    """``(a*)*b`` against a run of a's as long as Kafka's longest id: Python's ``re`` would not end in a
    lifetime (exponential), RE2 answers at once (linear); the suite's timeout is the judge."""
    assert kept(TransactionFilter.of(id_pattern="(a*)*b"), summary("a" * 32_767)) == []
