"""The checker holds every read to what was acknowledged before it began and to the log the cluster kept
(jepsen/read_checker.py), on hand-built histories: a read a deposed leader could answer (a high watermark
below an acknowledged write, below a record read or a high watermark answered before it began, or below a
record it returned itself) is a stale-read, a record read past the end of the final log is read-not-kept;
the same reads concurrent with the write, or answering what was acknowledged, are valid. The pause
nemesis' proof that it paused a leader another replaced is read back from its events and its polls."""

from __future__ import annotations

from typing import Any

from jepsen_history_builder import HistoryBuilder

from jepsen.checker import check
from jepsen.read_checker import paused_leaders

K = "t0/0"


def _poll(
    h: HistoryBuilder, process: int, offset: int, records: list[tuple[int, Any]], hwm: int, **extra: Any
) -> None:
    h.invoke(process, "poll", key=K, offset=offset)
    h.complete(process, "ok", records=[list(r) for r in records], high_watermark=hwm, **extra)


def _written(h: HistoryBuilder, count: int) -> list[int]:
    """``count`` acknowledged sends to K at offsets 0.. (values 1..)."""
    values = list(range(1, count + 1))
    for offset, value in enumerate(values):
        h.send(0, K, value, offset)
    return values


def _one(kind: str) -> dict[str, int]:
    return {kind: 1}


def _classes(h: HistoryBuilder, log: list[int]) -> dict[str, int]:
    h.final_read(9, K, log)
    result = check(h.history())
    return {name: count for name, count in result["anomaly_counts"].items() if count}


def test_a_read_answering_a_high_watermark_below_an_acknowledged_write_is_stale() -> None:
    h = HistoryBuilder()
    log = _written(h, 5)
    _poll(h, 1, 3, [], hwm=3)  # began after offset 4 was acknowledged: a deposed leader's answer
    assert _classes(h, log) == _one("stale-read")


def test_a_read_concurrent_with_the_write_may_answer_the_older_high_watermark() -> None:
    h = HistoryBuilder()
    log = _written(h, 3)
    h.invoke(0, "send", key=K, value=4)
    _poll(h, 1, 3, [], hwm=3)  # began before the write's acknowledgement
    h.complete(0, "ok", offset=3)
    _poll(h, 1, 3, [(3, 4)], hwm=4)
    assert _classes(h, [*log, 4]) == {}


def test_a_high_watermark_that_goes_back_after_one_answered_is_stale() -> None:
    h = HistoryBuilder()
    h.invoke(0, "send", key=K, value=1)  # of unknown outcome: nothing acknowledged
    _poll(h, 1, 0, [(0, 1)], hwm=1)
    _poll(h, 2, 1, [], hwm=0)  # another client, later, told less
    h.complete(0, "info")
    assert _classes(h, [1]) == _one("stale-read")


def test_a_read_returning_records_past_its_own_high_watermark_is_stale() -> None:
    h = HistoryBuilder()
    log = _written(h, 2)
    _poll(h, 1, 0, [(0, 1), (1, 2)], hwm=1)
    assert _classes(h, log) == _one("stale-read")


def test_reads_that_carry_no_high_watermark_are_held_to_nothing_more() -> None:
    h = HistoryBuilder()
    log = _written(h, 3)
    h.poll(1, K, 3, [])  # a Kafka client's poll: no high watermark recorded
    assert _classes(h, log) == {}


def test_a_record_read_past_the_end_of_the_final_log_was_not_kept() -> None:
    h = HistoryBuilder()
    h.invoke(0, "send", key=K, value=1)
    h.complete(0, "info")
    _poll(h, 1, 0, [(0, 1)], hwm=1)  # read during the run, of a send of unknown outcome
    assert _classes(h, []) == _one("read-not-kept")


def _paused(h: HistoryBuilder, leaders: dict[str, Any], probes: list[int], outcome: str) -> None:
    led = {"n1": {K: {"term": 2, "high_watermark": 3}}}
    h.nemesis("start", "pause", {"nodes": ["n1"], "mode": "leader", "led": led})
    h.send(0, K, 4, 3)  # acknowledged by the new leader meanwhile
    for process in probes:
        h.invoke(process, "poll", key=K, offset=3)
    h.nemesis("stop", "pause", {"nodes": ["n1"], "leaders": {"n1": leaders}, "probes": {"n1": probes}})
    for process in probes:
        if outcome == "ok":
            h.complete(process, "ok", records=[[3, 4]], high_watermark=4, leader="n2", node="http://n1")
        else:
            h.complete(process, outcome, status=503, error_code=50301)


def test_the_proof_names_a_paused_leader_that_another_replaced_and_the_reads_it_was_asked() -> None:
    h = HistoryBuilder()
    log = _written(h, 3)
    _paused(h, {K: {"leader": "n2", "term": 3}}, [100], "ok")
    h.send(0, K, 5, 4)
    [window] = paused_leaders(h.history())
    assert window["node"] == "n1" and window["paused_s"] > 0
    assert window["replaced"] == {K: {"leader": "n2", "term": 3}}
    assert window["reads"] == {"ok": 1, "fail": 0, "info": 0} and window["answered_by"] == ["n2"]
    assert _classes(h, [*log, 4, 5]) == {}


def test_the_proof_leaves_out_a_key_whose_leader_did_not_change() -> None:
    h = HistoryBuilder()
    _paused(h, {K: {"leader": "n1", "term": 2}}, [], "fail")
    [window] = paused_leaders(h.history())
    assert window["replaced"] == {} and window["reads"] == {"ok": 0, "fail": 0, "info": 0}


def test_a_stale_answer_to_a_paused_leader_s_probe_is_caught() -> None:
    h = HistoryBuilder()
    log = _written(h, 3)
    h.nemesis("start", "pause", {"nodes": ["n1"], "led": {"n1": {K: {"term": 2, "high_watermark": 3}}}})
    h.send(0, K, 4, 3)  # acknowledged by the new leader while n1 was paused
    h.invoke(100, "poll", key=K, offset=3)
    leaders = {"n1": {K: {"leader": "n2", "term": 3}}}
    h.nemesis("stop", "pause", {"nodes": ["n1"], "leaders": leaders, "probes": {"n1": [100]}})
    h.complete(100, "ok", records=[], high_watermark=3, leader="n1")  # the old leader's own state
    h.final_read(9, K, [*log, 4])
    result = check(h.history())
    assert {name: count for name, count in result["anomaly_counts"].items() if count} == _one("stale-read")
    [example] = result["anomalies"]["stale-read"]
    assert example["served_by"] == "n1" and example["shown_before"] == 4
