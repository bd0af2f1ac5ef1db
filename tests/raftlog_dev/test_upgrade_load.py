"""The upgrade load's attribution of a tolerated answer to the node that gave it and the code it ran then:
the answer of a node on this release is never excused, whatever the time."""

from __future__ import annotations

import email.message
import io
import json
import time
import urllib.error

from confluent_kafka import KafkaError
from upgrade_load import PREVIOUS, THIS, ClientStats, Load, Releases, _kafka_error


def refusal(status: int, server: str) -> urllib.error.HTTPError:
    headers = email.message.Message()
    headers["Server"] = server
    return urllib.error.HTTPError("http://n1", status, "refused", headers, io.BytesIO(b"{}"))


def test_a_node_runs_one_release_at_a_time_and_either_while_it_switches() -> None:
    releases = Releases(["n1", "n2"], PREVIOUS)
    before = time.monotonic()
    releases.switching("n1")
    during = time.monotonic()
    releases.switched("n1", THIS)
    after = time.monotonic()
    assert releases.ran("n1", before - 0.001) == {PREVIOUS}
    assert releases.ran("n1", during) == {PREVIOUS, THIS}
    assert releases.ran("n1", after) == {THIS} and releases.ran("n2", after) == {PREVIOUS}
    assert releases.previous({"n1"}, after) is None and releases.previous({"n1", "n2"}, after) == "n2"


def test_an_http_refusal_is_excused_only_when_a_node_on_the_previous_release_gave_it() -> None:
    releases = Releases(["n1", "n2", "n3"], THIS)
    load = Load(["http://n1", "http://n2", "http://n3"], ["k1", "k2", "k3"], True, releases)
    assert not load._previous_answered("http://n1", "POST", refusal(500, "raftlog"))  # this release's
    assert load.tally.errors == [] and not load.tally.previous_release
    # an answer that says 0.1.0 from a node the test says runs this release: the test is wrong, a failure
    assert load._previous_answered("http://n1", "POST", refusal(500, "Python/3.11 aiohttp/3.9.5"))
    assert len(load.tally.errors) == 1 and "which ran ['this']" in load.tally.errors[0]
    releases.switching("n2")
    releases.switched("n2", PREVIOUS)
    assert load._previous_answered("http://n2", "GET", refusal(503, "Python/3.11 aiohttp/3.9.5"))
    assert load.tally.previous_release == {"http GET 503 (by n2 on 0.1.0)": 1}


def test_a_kafka_error_is_excused_only_when_the_node_that_could_answer_it_ran_the_previous_release() -> None:
    releases = Releases(["n1", "n2", "n3"], THIS)
    load = Load(["http://n1", "http://n2", "http://n3"], ["k1:1", "k2:2", "k3:3"], True, releases)
    stats = ClientStats(load.brokers)
    stats(json.dumps({"brokers": {"GroupCoordinator": {"nodename": "k2:2"}}, "topics": {}}))
    timed_out = KafkaError(KafkaError.REQUEST_TIMED_OUT)
    _kafka_error(load.tally, "offset commit", timed_out, load._by_previous(timed_out, stats))
    assert len(load.tally.errors) == 1  # the coordinator n2 runs this release: not excused
    releases.switched("n2", PREVIOUS)
    _kafka_error(load.tally, "offset commit", timed_out, load._by_previous(timed_out, stats))
    assert load.tally.previous_release == {"offset commit: REQUEST_TIMED_OUT (by n2 on 0.1.0)": 1}
    moving = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    _kafka_error(load.tally, "offset commit", moving, None)
    assert load.tally.retried["offset commit: COORDINATOR_LOAD_IN_PROGRESS"] == 1  # Kafka's retriable
