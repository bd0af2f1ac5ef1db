"""``raftlog bench perf --compare nats``: a JetStream cluster just up that leaves a phase's stream creation
unanswered (nats-py's timeout) is asked again, a bounded number of times; another error ends the run.
NATS's client is the bench extra's, not the tests': its timeout class stands in here under its name."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from raftlog_bench import perf_systems
from raftlog_bench.peers import NatsTarget
from raftlog_bench.targets import Layout


class NatsTimeout(Exception):
    """nats.errors.TimeoutError, as the bench extra's nats-py raises it."""


@pytest.fixture
def nats_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    errors = types.ModuleType("nats.errors")
    errors.TimeoutError = NatsTimeout  # type: ignore[attr-defined]
    nats = types.ModuleType("nats")
    nats.errors = errors  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nats", nats)
    monkeypatch.setitem(sys.modules, "nats.errors", errors)


def _creating(monkeypatch: pytest.MonkeyPatch, outcomes: list[Exception | None]) -> list[str]:
    """NatsTarget.create answering ``outcomes`` in turn (None: created); the layouts it was asked for."""
    asked: list[str] = []

    async def create(self: NatsTarget, layout: Layout) -> None:
        asked.append(layout.name)
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    monkeypatch.setattr(NatsTarget, "create", create)
    return asked


LAYOUT = Layout("perf1_1024", 3, 1024, 100)


@pytest.mark.usefixtures("nats_errors")
def test_streams_left_unanswered_are_asked_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _creating(monkeypatch, [NatsTimeout(), NatsTimeout(), None])
    asyncio.run(perf_systems._PatientNatsTarget(["nats://127.0.0.1:4222"]).create(LAYOUT))
    assert asked == [LAYOUT.name] * 3


@pytest.mark.usefixtures("nats_errors")
def test_a_cluster_that_never_answers_ends_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _creating(monkeypatch, [NatsTimeout()] * perf_systems.NATS_CREATE_ATTEMPTS)
    with pytest.raises(NatsTimeout):
        asyncio.run(perf_systems._PatientNatsTarget(["nats://127.0.0.1:4222"]).create(LAYOUT))
    assert len(asked) == perf_systems.NATS_CREATE_ATTEMPTS


@pytest.mark.usefixtures("nats_errors")
def test_another_error_is_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _creating(monkeypatch, [ValueError("stream name already in use with a different configuration")])
    with pytest.raises(ValueError, match="already in use"):
        asyncio.run(perf_systems._PatientNatsTarget(["nats://127.0.0.1:4222"]).create(LAYOUT))
    assert len(asked) == 1
