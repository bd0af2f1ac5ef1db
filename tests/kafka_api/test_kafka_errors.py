"""Every raftlog error a Kafka handler can meet has a Kafka error code in ``kafka_api.errors``."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from kio.schema.errors import ErrorCode

import partitions
import raftlog
from kafka_api import errors
from partitions.errors import NoControllerLeader, TooFewLiveNodes, UnknownTopic
from raftlog.consensus.errors import NoLeader, NotLeader
from raftlog.errors import RaftlogError

# Errors that never reach a front door: node-internal transport and wire errors, and the HTTP layer's own.
NOT_ON_A_KAFKA_REQUEST = (
    "raftlog.consensus.hub_config",
    "raftlog.consensus.wire_errors",
    "partitions.replicas.recovery",
)


def _concrete_errors() -> list[type[RaftlogError]]:
    for package in (raftlog, partitions):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    found: list[type[RaftlogError]] = []
    pending: list[type[RaftlogError]] = [RaftlogError]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub.__module__.split(".")[0] in ("raftlog", "partitions") and sub not in found:
                found.append(sub)
                pending.append(sub)
    return [k for k in found if not k.__subclasses__() and k.__module__ not in NOT_ON_A_KAFKA_REQUEST]


def test_every_concrete_error_has_a_kafka_code() -> None:
    unmapped = [
        f"{k.__module__}.{k.__name__}"
        for k in _concrete_errors()
        if not any(issubclass(k, kind) for kind, _ in errors.TABLE)
    ]
    assert not unmapped, f"errors without a Kafka code in kafka_api/errors.py: {sorted(unmapped)}"


def test_the_codes_clients_act_on() -> None:
    assert errors.code_of(NotLeader("orders-0.1", "n2")) is ErrorCode.not_leader_or_follower
    assert errors.code_of(UnknownTopic("orders")) is ErrorCode.unknown_topic_or_partition
    assert errors.code_of(ValueError("a bug")) is ErrorCode.unknown_server_error
    # an internal topic not created yet: what FindCoordinator answers, and every client retries
    assert errors.code_of(TooFewLiveNodes(3, 1, 2)) is ErrorCode.coordinator_not_available


def test_no_controller_leader_is_not_controller_as_kafka_answers_it() -> None:
    """No controller decides (an election): a Kafka broker waits for an active controller and admin
    clients retry NOT_CONTROLLER, looking the controller up again; franz-go ends a CreateTopics answered
    LEADER_NOT_AVAILABLE. Any other group without a leader stays LEADER_NOT_AVAILABLE."""
    assert errors.code_of(NoControllerLeader("controller")) is ErrorCode.not_controller
    assert errors.code_of(NoLeader("orders-0.1")) is ErrorCode.leader_not_available


def test_a_transaction_coordinator_s_write_not_answered_in_time_is_a_coordinator_s_code() -> None:
    """As Kafka's transaction coordinator answers an append to its log that failed: codes every client
    asks again on. REQUEST_TIMED_OUT to EndTxn ends franz-go's transaction as failed (it rewinds and
    processes the input again) while the decision may yet commit."""
    from kafka_api.errors import transaction_coordinator_code as coordinator_code
    from kafka_api.wire import Request
    from raftlog.consensus.errors import OutcomeUnknown, ProposalDiscarded, ProposalQueueFull

    end_txn = Request(26, 3, 1, "franz-go", None)
    assert (
        coordinator_code(OutcomeUnknown("__transactions-0.1", "not answered"), end_txn)
        is ErrorCode.coordinator_not_available
    )
    assert (
        coordinator_code(ProposalQueueFull("__transactions-0.1"), end_txn)
        is ErrorCode.coordinator_not_available
    )
    assert coordinator_code(ProposalDiscarded("__transactions-0.1"), end_txn) is ErrorCode.not_coordinator
    assert coordinator_code(NotLeader("__transactions-0.1", None), end_txn) is ErrorCode.not_coordinator


def test_a_group_api_whose_record_was_not_written_answers_a_coordinators_code() -> None:
    """As Kafka's group coordinator turns a failed append to its offsets partition into a code every group
    client retries: a proposal a new leader discarded (franz-go got NOT_LEADER_FOR_PARTITION to a join,
    and gave the member up), leadership lost, no leader yet, not written in time."""
    from kafka_api.errors import code_of, group_coordinator_code
    from partitions.groups.errors import UnknownMember
    from raftlog.consensus.errors import OutcomeUnknown, ProposalDiscarded

    group = "__consumer_groups-2.22"
    assert group_coordinator_code(ProposalDiscarded(group)) is ErrorCode.not_coordinator
    assert group_coordinator_code(NotLeader(group, "n2")) is ErrorCode.not_coordinator
    assert group_coordinator_code(NoLeader(group)) is ErrorCode.coordinator_load_in_progress
    unanswered = OutcomeUnknown(group, "not answered")
    assert group_coordinator_code(unanswered) is ErrorCode.coordinator_not_available
    assert group_coordinator_code(UnknownMember("g", "m")) is code_of(UnknownMember("g", "m"))


def test_a_consumer_group_heartbeat_whose_write_a_new_leader_discarded_is_not_coordinator() -> None:
    """The KIP-848 heartbeat through the Kafka door: the member's client looks its coordinator up again
    (NOT_COORDINATOR), where NOT_LEADER_OR_FOLLOWER ended franz-go's group session."""
    import asyncio
    import datetime
    from types import SimpleNamespace

    from kafka_api import wire
    from kafka_api.consumer_group_apis import consumer_group_heartbeat
    from kafka_api.security import Session
    from raftlog.consensus.errors import ProposalDiscarded

    async def discarded(group: str, heartbeat: object, viewer: object) -> object:
        raise ProposalDiscarded("__consumer_groups-2.22")

    async def nothing() -> None:
        return None

    consumer = SimpleNamespace(timeouts=lambda _group: (45_000, 5_000), heartbeat=discarded)
    door = SimpleNamespace(
        allows=lambda *_: True,
        coordinator_of=lambda *_: "n1",
        node=SimpleNamespace(node_id="n1"),
        session=Session(host="127.0.0.1"),
        security=SimpleNamespace(enforce_acls=False),
        coordinator=SimpleNamespace(consumer=consumer, ensure_topic=nothing),
    )
    body = SimpleNamespace(
        group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=("t",),
        server_assignor=None, topic_partitions=None, subscribed_topic_regex=None,
    )  # fmt: skip
    answer = asyncio.run(consumer_group_heartbeat(door, wire.Request(68, 0, 1, "test", body)))  # type: ignore[arg-type]
    assert answer.error_code is ErrorCode.not_coordinator, answer


def test_an_item_s_error_is_its_answer_and_a_bug_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``errors.Caught``, the door's one boundary of an item's error: a typed error is its code and words,
    a refusal the door decided its own code, a bug UNKNOWN_SERVER_ERROR and a logged traceback; nothing
    raised is NONE; a cancellation is no answer and goes through."""
    import asyncio

    with errors.Caught() as caught:
        pass
    assert (caught.failed, caught.code, caught.message) == (False, ErrorCode.none, None)
    with errors.Caught() as caught:
        raise UnknownTopic("orders")
    assert (caught.failed, caught.code) == (True, ErrorCode.unknown_topic_or_partition)
    assert caught.message == str(UnknownTopic("orders"))
    with errors.Caught() as caught:
        raise errors.Refused(ErrorCode.invalid_partitions, "3 partitions: more than 2")
    assert (caught.code, caught.message) == (ErrorCode.invalid_partitions, "3 partitions: more than 2")
    with errors.Caught(lambda error: ErrorCode.not_coordinator) as caught:
        raise NotLeader("__consumer_groups-0.1", "n2")
    assert caught.code is ErrorCode.not_coordinator

    def a_bug() -> None:
        raise ZeroDivisionError("a bug")

    caplog.clear()
    with errors.Caught() as caught:
        a_bug()
    assert caught.code is ErrorCode.unknown_server_error
    assert any(r.exc_info and "a_bug" in caplog.text for r in caplog.records), caplog.text
    with pytest.raises(asyncio.CancelledError), errors.Caught():
        raise asyncio.CancelledError


def test_a_task_s_outcome_is_its_result_or_its_error_s_answer() -> None:
    import asyncio

    async def appended() -> int:
        return 7

    async def refused() -> int:
        raise NotLeader("orders-0.1", "n2")

    assert asyncio.run(errors.outcome_of(appended())) == 7
    outcome = asyncio.run(errors.outcome_of(refused()))
    assert isinstance(outcome, errors.Caught) and outcome.code is ErrorCode.not_leader_or_follower
