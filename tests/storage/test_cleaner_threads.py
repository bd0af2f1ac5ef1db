"""The cleaner's threads (Kafka's log.cleaner.threads): as many run as asked, asked again at each look (so
a change applies while the node runs), passes of different logs overlap, a log is never cleaned by two
threads at once, the key map bound is shared out among the threads, and a thread told to end finishes
its pass first."""

from __future__ import annotations

import threading

from raftlog.storage import Log, ProducerRecord, cleaner_threads
from raftlog.storage.cleaner import clean_log
from raftlog.storage.cleaner_threads import THREADS_MAX, Cleaner
from tests.storage.helpers import FakeClock, read_all
from tests.storage.test_compaction import compacted
from tests.waiting import wait_for

WAIT_S = 30.0  # a hang bound: every wait below ends on a condition


def _compactable(path, clock) -> Log:
    log = Log.open(str(path), compacted(), clock=clock)
    for i in range(100):
        log.append([ProducerRecord(b"v%d" % i, b"k%d" % (i % 3))])
    log.roll()
    log.append([ProducerRecord(b"t", b"t")])
    return log


def _alive(cleaner: Cleaner) -> set[str]:
    return {each.name for each in cleaner._running.values() if each._thread and each._thread.is_alive()}


def test_as_many_threads_run_as_asked_and_a_change_applies_at_the_next_look(memory_path):
    asked = {"threads": 2}
    cleaner = Cleaner(lambda: [], FakeClock(), interval_ms=3_600_000, threads=lambda: asked["threads"])
    cleaner.start()
    first = cleaner._running[0]
    try:
        assert cleaner.stats.threads == 2 and _alive(cleaner) == {"raftlog-cleaner-0", "raftlog-cleaner-1"}
        asked["threads"] = 4
        assert cleaner.resize() == 4 and cleaner.stats.threads == 4
        ending = [cleaner._running[i] for i in (2, 3)]
        asked["threads"] = 1
        assert cleaner.resize() == 1 and cleaner.stats.threads == 1 and list(cleaner._running) == [0]
        for thread in ending:  # told to end, and they do: they were between looks
            assert thread.stop.is_set()
            thread._thread.join(WAIT_S)
            assert not thread._thread.is_alive()
        asked["threads"] = 0  # never fewer than one, never more than the bound, whatever is asked
        assert cleaner.resize() == 1
        asked["threads"] = 1000
        assert cleaner.wanted() == THREADS_MAX
    finally:
        cleaner.close()
    assert cleaner.stats.threads == 0 and first._thread is None  # joined


def test_two_threads_clean_two_logs_at_once_and_never_one_log_twice(memory_path, monkeypatch):
    clock = FakeClock()
    logs = [_compactable(memory_path / name, clock) for name in ("a", "b")]
    first_in = threading.Event()
    let_go = threading.Event()
    inside: list[str] = []
    lock = threading.Lock()
    keys_asked: list[int] = []

    def held_clean_log(log, now_ms, keys_max, pace):
        with lock:
            assert log.directory not in inside, "one log cleaned by two threads at once"
            inside.append(log.directory)
            keys_asked.append(keys_max)
        try:
            if log.directory.endswith("a"):  # the first pass over "a" waits until the other ran
                first_in.set()
                assert let_go.wait(WAIT_S)
            return clean_log(log, now_ms, keys_max, pace)
        finally:
            with lock:
                inside.remove(log.directory)

    monkeypatch.setattr(cleaner_threads, "clean_log", held_clean_log)
    cleaner = Cleaner(lambda: logs, clock, rate_bytes_per_s=1 << 30, keys_max=1000, threads=lambda: 2)
    reports: dict[str, list] = {}
    one = threading.Thread(target=lambda: reports.setdefault("one", cleaner.run_once(clock())))
    one.start()
    assert first_in.wait(WAIT_S)
    # while "a" is claimed, another thread's look passes it by and cleans "b"
    assert [r.directory for r in cleaner.run_once(clock())] == [str(memory_path / "b")]
    let_go.set()
    one.join(WAIT_S)
    assert [r.directory for r in reports["one"]] == [str(memory_path / "a")]  # "b" was clean by then
    assert keys_asked == [500, 500, 500]  # the bound shared out between the two threads
    assert cleaner.stats.passes == 2 and cleaner.stats.dirty_bytes == 0
    for log in logs:
        assert sorted(r.key for r in read_all(log)) == [b"k0", b"k1", b"k2", b"t"]
        log.close()


def test_the_threads_compact_while_the_node_runs_and_all_end_at_close(memory_path):
    clock = FakeClock()
    logs = [_compactable(memory_path / f"log{i}", clock) for i in range(4)]
    cleaner = Cleaner(lambda: logs, clock, rate_bytes_per_s=1 << 30, interval_ms=1, threads=lambda: 3)
    cleaner.start()
    threads = [each._thread for each in cleaner._running.values()]
    try:
        assert len(threads) == 3
        wait_for(lambda: cleaner.stats.passes >= len(logs) and cleaner.stats.dirty_bytes == 0,
                 "every log compacted by the threads", timeout_s=WAIT_S, every_s=0.01)  # fmt: skip
    finally:
        cleaner.close()
    assert not [t for t in threads if t is not None and t.is_alive()]
    for log in logs:
        assert len(read_all(log)) == 4
        log.close()


def test_a_look_that_fails_is_counted_and_the_thread_goes_on(memory_path):
    clock = FakeClock()
    logs = [_compactable(memory_path / "a", clock)]
    asked = {"looks": 0}

    def listing() -> list:
        asked["looks"] += 1
        if asked["looks"] == 1:
            raise RuntimeError("a bug while listing the logs")
        return logs

    cleaner = Cleaner(listing, clock, rate_bytes_per_s=1 << 30, interval_ms=1)
    cleaner.start()
    try:
        counted = "the failed look counted, the next one compacting"
        wait_for(lambda: cleaner.stats.passes >= 1 and cleaner.stats.failures == 1, counted, WAIT_S, 0.01)
    finally:
        cleaner.close()
    logs[0].close()
