"""The share group checker on built histories (its negative controls): what KIP-932 allows (a record
delivered again with a higher count after its lock expired or it was released, an acknowledgement
refused or of unknown outcome) is valid, and each anomaly is caught: a record accepted twice, delivered
after its acceptance, delivered again with a count not above an earlier one, lost though the group
drained, or a value never sent. The histories go through ``jepsen.checking`` as a run's would."""

from __future__ import annotations

from typing import Any

import pytest
from jepsen_history_builder import HistoryBuilder

from jepsen import checking
from jepsen.history import HistoryError
from jepsen.share_checker import (
    ACCEPTED_TWICE,
    DELIVERED_AFTER_ACCEPT,
    DELIVERY_COUNT_REGRESSION,
    LOST_RECORD,
    PHANTOM_READ,
)

K0, K1 = "sq/0", "sq/1"
PRODUCER, M1, M2 = 0, 1, 2
GROUP = "sg"


def acquire(h: HistoryBuilder, member: int, *records: tuple[str, int, int, int], final: bool = False) -> None:
    h.invoke(member, "acquire", group=GROUP, final=final)
    h.complete(member, "ok", records=[list(r) for r in records])


def ack(h: HistoryBuilder, member: int, *acks: tuple[str, int, str], type: str = "ok") -> None:
    h.invoke(member, "ack", group=GROUP, acks=[list(a) for a in acks])
    h.complete(member, type)


def produced() -> HistoryBuilder:
    h = HistoryBuilder()
    h.send(PRODUCER, K0, 10, 0)
    h.send(PRODUCER, K0, 11, 1)
    h.send(PRODUCER, K1, 20, 0)
    return h


def allowed() -> HistoryBuilder:
    """M1 gets three records, accepts one, releases one and holds the third until its lock expires; M2
    gets the released and the expired one a second time and accepts them; M1's late acknowledgement of
    the expired record is refused; the drain finds nothing more."""
    h = produced()
    acquire(h, M1, (K0, 0, 10, 1), (K0, 1, 11, 1), (K1, 0, 20, 1))
    ack(h, M1, (K0, 0, "accept"), (K0, 1, "release"))
    acquire(h, M2, (K0, 1, 11, 2), (K1, 0, 20, 2))
    ack(h, M1, (K1, 0, "accept"), type="fail")  # its lock expired: refused
    ack(h, M2, (K0, 1, "accept"), (K1, 0, "accept"))
    acquire(h, M2, final=True)
    return h


def check(h: HistoryBuilder) -> dict[str, Any]:
    return checking.check(h.history())


def only(results: dict[str, Any], kind: str) -> dict[str, Any]:
    found = {k: n for k, n in results["anomaly_counts"].items() if n}
    assert results["verdict"] == "invalid" and set(found) == {kind}, (found, results["reasons"])
    anomaly: dict[str, Any] = results["anomalies"][kind][0]
    return anomaly


def test_what_kip_932_allows_is_valid() -> None:
    results = check(allowed())
    assert results["verdict"] == "valid", results["reasons"]
    assert results["workload"] == "share"
    assert results["stats"]["redeliveries"] == 2 and results["stats"]["delivery_count_max"] == 2


def test_a_history_that_did_not_drain_is_unknown() -> None:
    h = produced()
    acquire(h, M1, (K0, 0, 10, 1))
    results = check(h)
    assert results["verdict"] == "unknown" and "did not drain" in " ".join(results["reasons"])


def test_a_record_accepted_twice_is_caught() -> None:
    h = allowed()
    ack(h, M1, (K0, 0, "accept"))  # a second acceptance, acknowledged
    anomaly = only(check(h), ACCEPTED_TWICE)
    assert (anomaly["key"], anomaly["offset"], anomaly["times"]) == (K0, 0, 2)


def test_a_record_delivered_after_its_acceptance_is_caught() -> None:
    h = allowed()
    acquire(h, M2, (K0, 0, 10, 2))  # the accepted record handed out again
    anomaly = only(check(h), DELIVERED_AFTER_ACCEPT)
    assert (anomaly["key"], anomaly["offset"]) == (K0, 0)


def test_an_unknown_acceptance_allows_a_delivery_after_it() -> None:
    h = produced()
    acquire(h, M1, (K0, 0, 10, 1), (K0, 1, 11, 1), (K1, 0, 20, 1))
    ack(h, M1, (K0, 0, "accept"), type="info")  # outcome unknown: its lock may have expired first
    acquire(h, M2, (K0, 0, 10, 2))
    ack(h, M2, (K0, 0, "accept"), (K0, 1, "accept"), (K1, 0, "accept"), type="fail")
    acquire(h, M2, (K0, 1, 11, 2), (K1, 0, 20, 2))
    acquire(h, M2, final=True)
    assert check(h)["verdict"] == "valid"


def test_a_delivery_count_that_goes_back_is_caught() -> None:
    h = produced()
    acquire(h, M1, (K0, 0, 10, 1), (K0, 1, 11, 1), (K1, 0, 20, 1))
    ack(h, M1, (K0, 0, "release"))
    acquire(h, M2, (K0, 0, 10, 1))  # a second delivery counted as the first: the count was lost
    anomaly = only(check(h), DELIVERY_COUNT_REGRESSION)
    assert (anomaly["delivery_count"], anomaly["earlier_count"]) == (1, 1)


def test_a_record_no_member_got_is_lost_once_the_group_drained() -> None:
    h = produced()
    acquire(h, M1, (K0, 0, 10, 1), (K1, 0, 20, 1))  # K0@1 never delivered
    ack(h, M1, (K0, 0, "accept"), (K1, 0, "accept"))
    acquire(h, M2, final=True)
    anomaly = only(check(h), LOST_RECORD)
    assert (anomaly["key"], anomaly["offset"], anomaly["value"]) == (K0, 1, 11)


def test_a_value_never_sent_is_a_phantom() -> None:
    h = allowed()
    acquire(h, M2, (K1, 5, 99, 1))
    assert only(check(h), PHANTOM_READ)["value"] == 99


def test_a_malformed_acquire_or_acknowledgement_is_refused() -> None:
    h = produced()
    h.invoke(M1, "acquire", group=GROUP)
    h.complete(M1, "ok", records=[[K0, 0, 10]])  # no delivery count
    with pytest.raises(HistoryError, match="delivery_count"):
        h.history()
    h = produced()
    h.invoke(M1, "ack", group=GROUP, acks=[[K0, 0, "keep"]])
    h.complete(M1, "ok")
    with pytest.raises(HistoryError, match="acks"):
        h.history()
