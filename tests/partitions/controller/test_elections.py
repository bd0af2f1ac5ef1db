"""Kafka's preferred and unclean leader elections over a Raft group (``partitions.controller.elections``)."""

from __future__ import annotations

from partitions.controller.elections import Decision, ElectionType, Outcome, decide, unfit_to_lead

PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN
REPLICAS = ("n1", "n2", "n3")
ALL = {"n1", "n2", "n3"}


def test_a_preferred_election_moves_leadership_to_the_first_replica_when_it_can() -> None:
    assert decide(PREFERRED, REPLICAS, "n2", ALL) == Decision(Outcome.TRANSFER, "n1")
    assert decide(PREFERRED, REPLICAS, "n1", ALL).outcome is Outcome.NOT_NEEDED
    assert decide(PREFERRED, REPLICAS, "n2", {"n2", "n3"}).outcome is Outcome.PREFERRED_NOT_AVAILABLE
    assert decide(PREFERRED, REPLICAS, None, ALL).outcome is Outcome.PREFERRED_NOT_AVAILABLE  # electing now


def test_an_unclean_election_is_never_made() -> None:
    """A leader: nothing to do; none: no majority, and nothing may be done without losing acknowledged
    writes, whoever is alive."""
    assert decide(UNCLEAN, REPLICAS, "n3", ALL).outcome is Outcome.NOT_NEEDED
    refused = decide(UNCLEAN, REPLICAS, None, {"n1"})
    assert refused.outcome is Outcome.NO_ELIGIBLE_LEADER and "majority" in refused.reason
    assert refused.target is None


def test_a_preferred_leader_without_a_door_the_others_serve_is_not_elected() -> None:
    """Kafka clients could not reach a leader without a Kafka listener (LEADER_NOT_AVAILABLE): a preferred
    election to it is PREFERRED_LEADER_NOT_AVAILABLE, saying why and what to do."""
    why = unfit_to_lead("n1", ("kafka",))
    assert why is not None and "no kafka listener" in why and "--kafka" in why
    assert unfit_to_lead("n1", ()) is None
    refused = decide(PREFERRED, REPLICAS, "n2", ALL, {"n1": why})
    assert refused.outcome is Outcome.PREFERRED_NOT_AVAILABLE and why in refused.reason
    assert decide(PREFERRED, REPLICAS, "n2", ALL, {"n3": why}) == Decision(Outcome.TRANSFER, "n1")
