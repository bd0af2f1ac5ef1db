"""Incremental fetch sessions (KIP-227) as the node's cache keeps them, without node processes: full then
incremental fetches, what an incremental answer holds, forgotten partitions, the session errors, and the
bound on sessions with Kafka's eviction."""

from kio.schema.errors import ErrorCode

from kafka_api.fetch_sessions import (
    EVICTION_MS,
    FINAL_EPOCH,
    NO_SESSION,
    Answered,
    FetchSessions,
    Wanted,
    next_epoch,
)


def _idle(high: int = 10) -> Answered:
    return Answered(
        records=False, error=False, high_watermark=high, log_start_offset=0, last_stable_offset=high
    )


def _open_full(cache: FetchSessions, keys: list[tuple[str, int]], now: int = 0) -> int:
    context = cache.open(NO_SESSION, 0, False, [(k, Wanted(0, 1024)) for k in keys], (), now)
    error, session_id, answered = cache.close(context, {k: _idle() for k in keys}, now)
    assert error == ErrorCode.none and answered == keys
    return session_id


def test_incremental_answers_only_what_changed_and_reads_every_session_partition() -> None:
    cache = FetchSessions()
    keys = [(f"t{i}", 0) for i in range(100)]
    session_id = _open_full(cache, keys)
    assert session_id != NO_SESSION
    context = cache.open(session_id, 1, False, [], (), 10)
    assert context.incremental and [k for k, _ in context.partitions] == keys  # all read, none named
    answers = {k: _idle() for k in keys}
    answers[("t7", 0)] = Answered(True, False, 12, 0, 12)
    answers[("t9", 0)] = _idle(high=11)  # no records, a new high watermark: answered too
    error, same_id, answered = cache.close(context, answers, 10)
    assert (error, same_id, answered) == (ErrorCode.none, session_id, [("t7", 0), ("t9", 0)])
    # the partition that returned records is read last next time; an updated offset is remembered
    context = cache.open(session_id, 2, False, [(("t7", 0), Wanted(12, 1024))], (), 20)
    assert context.partitions[-1] == (("t7", 0), Wanted(12, 1024))
    assert cache.close(context, {k: answers[k] for k in keys}, 20)[2] == [("t7", 0)]  # records again
    assert cache.incremental_fetches == 2 and cache.full_fetches == 1


def test_a_full_fetch_naming_a_partition_twice_reads_it_once_as_last_named() -> None:
    cache = FetchSessions()
    wanted = [(("a", 0), Wanted(0, 1024)), (("a", 1), Wanted(0, 1024)), (("a", 0), Wanted(5, 2048))]
    for epoch in (0, FINAL_EPOCH):
        context = cache.open(NO_SESSION, epoch, False, wanted, (), 0)
        assert context.partitions == [(("a", 0), Wanted(5, 2048)), (("a", 1), Wanted(0, 1024))]


def test_forgotten_partitions_leave_the_session_and_an_empty_session_closes() -> None:
    cache = FetchSessions()
    session_id = _open_full(cache, [("a", 0), ("a", 1)])
    context = cache.open(session_id, 1, False, [], [("a", 0)], 1)
    assert [k for k, _ in context.partitions] == [("a", 1)]
    cache.close(context, {("a", 1): _idle()}, 1)
    context = cache.open(session_id, 2, False, [], [("a", 1)], 2)
    assert not context.incremental and context.partitions == []  # answered as a sessionless fetch
    assert session_id not in cache.sessions


def test_session_errors() -> None:
    cache = FetchSessions()
    session_id = _open_full(cache, [("a", 0)])
    assert cache.open(session_id + 1, 1, False, [], (), 1).error == ErrorCode.fetch_session_id_not_found
    assert cache.open(session_id, 5, False, [], (), 1).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.open(session_id, 1, True, [], (), 1).error == ErrorCode.fetch_session_topic_id_error
    first = cache.open(session_id, 1, False, [], (), 1)  # the epoch it expects is still 1
    duplicate = cache.open(session_id, 2, False, [], (), 1)
    assert cache.close(first, {("a", 0): _idle()}, 1)[0] == ErrorCode.invalid_fetch_session_epoch  # overtaken
    assert cache.close(duplicate, {("a", 0): _idle()}, 1)[0] == ErrorCode.none
    # a full fetch naming the session closes it; epoch -1 opens none
    context = cache.open(session_id, FINAL_EPOCH, False, [(("a", 0), Wanted(0, 1))], (), 2)
    assert cache.close(context, {("a", 0): _idle()}, 2)[1] == NO_SESSION and not cache.sessions
    assert cache.session_errors == 3
    assert next_epoch(2**31 - 1) == 1 and next_epoch(0) == 1


def test_sessions_are_bounded_and_evicted_as_kafka_does() -> None:
    cache = FetchSessions(sessions_max=3)
    small = _open_full(cache, [("s", 0)], now=0)
    big = [_open_full(cache, [("b", i), ("b", i + 10)], now=0) for i in range(2)]
    # full, and no session idle or old past the eviction time: a newcomer gets none (full fetches)
    assert _open_full(cache, [("n", 0)] * 1, now=1000) == NO_SESSION
    assert len(cache.sessions) == 3
    # past the eviction time, the others in use: the smallest gives way to a larger newcomer only
    for session_id in big:
        for epoch in (1,):
            context = cache.open(session_id, epoch, False, [], (), EVICTION_MS)
            cache.close(context, {}, EVICTION_MS)
    context = cache.open(small, 1, False, [], (), EVICTION_MS)
    cache.close(context, {}, EVICTION_MS)
    later = EVICTION_MS + 2
    assert _open_full(cache, [("n", 0)], now=later) == NO_SESSION  # as small as the smallest: none
    newcomer = _open_full(cache, [("n", 0), ("n", 1)], now=later)
    assert newcomer != NO_SESSION and small not in cache.sessions and cache.evictions == 1
    # a session idle past the eviction time gives way to anyone
    for session_id in [big[0], newcomer]:
        epoch = cache.sessions[session_id].epoch
        cache.close(cache.open(session_id, epoch, False, [], (), 2 * EVICTION_MS), {}, 2 * EVICTION_MS)
    assert _open_full(cache, [("x", 0)], now=2 * EVICTION_MS + 1) != NO_SESSION
    assert big[1] not in cache.sessions and len(cache.sessions) == 3


def test_an_attacker_opening_sessions_without_end_holds_at_most_the_bound() -> None:
    cache = FetchSessions(sessions_max=50)
    for i in range(5000):
        _open_full(cache, [(f"t{i}", p) for p in range(i % 7 + 1)], now=i * 100)
    assert len(cache.sessions) <= 50
