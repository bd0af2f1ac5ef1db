"""What the fault runs' tests require of a run's availability, as the harness measured it (results.json's
``availability``, jepsen/recovery.py): figures relative to the run's own machine, so that load cannot
move the verdict, in place of counts of acknowledged writes fitted to what a loaded run produced."""

from __future__ import annotations

import math
import pathlib
from typing import Any

from planted import recovery_past_bound

from jepsen import recovery

# In a span without faults, every node up and ready and every partition elected (jepsen/recovery.py), a
# write fails only when it meets a leadership change no fault caused: the leader balancer's transfers,
# one a round at most. The bound must fail on the smallest outage of a cluster that claims to be up: one
# of the workload's partitions without a leader refuses 1/P of the writes (P <= 5 partitions in every
# workload: a fifth or more), one node refusing what is sent to it a third of the HTTP writes (a sixth of
# a run's whose workers take HTTP and Kafka in turn): at most 5/6 (83%) acknowledged. 90% lies above that
# and leaves the balancer's transfers a tenth of the writes.
FAULT_FREE_OK_MIN = 0.9
# The writes the spans without faults must hold for that fraction to mean anything: what the workload
# plans (its rate times the share of its steps that write) in the span the harness keeps without faults
# at the end of every run, recovery.FAULT_FREE_END_S; the harness holds the workers until that span holds
# them (at most FAULT_FREE_END_MAX_S), so a loaded machine makes the run longer, not the count smaller. A
# count the plan sets, not one a run produced; fewer only from a cluster that cannot serve the plan's
# writes in a minute without faults.


def problems(availability: dict[str, Any], planned_writes_per_s: float) -> list[str]:
    """What in a run's measured availability breaks its bounds: a heal whose first acknowledged write
    came later than its bound (``recovery.recovery_bound_s``: twice the ready time of the nodes it
    brought back, plus the longest election timeout and a client's next attempt) or could not be judged;
    fewer writes in the spans without faults than the workload plans in the last one, or too few of them
    acknowledged."""
    found = [
        f"window {number} healed at {w['healed_at']} s: {w['judged']} (first write acknowledged after "
        f"{w['recovery_s']} s, bound {w['bound_s']} s, nodes ready after {w['ready_s']} s)"
        for number, w in enumerate(availability["recoveries"], start=1)
        if w["judged"] != "ok"
    ]
    fault_free = availability["fault_free"]
    planned = math.ceil(planned_writes_per_s * recovery.FAULT_FREE_END_S)
    if fault_free["writes"] < planned:
        found.append(
            f"{fault_free['writes']} writes in {fault_free['seconds']} s without faults, fewer than the "
            f"{planned} the workload plans in {recovery.FAULT_FREE_END_S} s"
        )
    fraction = fault_free["ok_fraction"]
    if fraction is None or fraction < FAULT_FREE_OK_MIN:
        found.append(f"{fault_free['ok']} of {fault_free['writes']} writes without faults acknowledged")
    return found


def figures(availability: dict[str, Any]) -> str:
    """The measured figures, for a test's failure message and the reports."""
    recoveries = [
        f"{w['recovery_s']}/{w['bound_s']} s (ready {w['ready_s']} s)" for w in availability["recoveries"]
    ]
    fault_free = availability["fault_free"]
    return (
        f"recoveries (first ack/bound): {recoveries}; without faults {fault_free['ok']}/"
        f"{fault_free['writes']} acknowledged in {fault_free['seconds']} s"
    )


def assert_available(run_dir: pathlib.Path, results: dict[str, Any], planned_writes_per_s: float) -> None:
    """The run's availability within its bounds, and the run holding what they need to catch a slow
    recovery: with every recovery delayed past its bound (``planted.recovery_past_bound``), they break."""
    availability = results["availability"]
    assert problems(availability, planned_writes_per_s) == [], (str(run_dir), figures(availability))
    delayed = recovery_past_bound(run_dir / "history.jsonl")
    assert problems(delayed, planned_writes_per_s) != [], ("past their bounds passes", figures(delayed))
