"""The ``old-release`` fault's verdict (``jepsen.old_release_fault``), folded into every workload's results
by ``jepsen.checking``. Pure: read from the history's nemesis events and the replicas' comparison the run
made once its nodes stopped (``run.json``'s ``replicas``).

- ``old-release-unproven``: a window of the fault whose proof is missing or says the fault did not land:
  its stop must carry ``proof`` with at least one other node's health naming the node kept out (a reason,
  from every other node that ran), every one of them showing it leading no partition, and a leadership
  transfer to it refused as kept out (409, error code 40934); a node that reported ready, exited, or whose
  window never ended has no proof. A run with such a window is invalid, never valid: nothing would show
  that its records survived a node of the previous release.
  A run that compared its replicas (it named the fault) without a window of it is invalid too.
- ``replicas-differ``: a run with a window of the fault whose replicas were not compared, or whose
  ``raftlog log compare --nodes`` did not exit 0 (a partition's replicas differ, or one could not be read).
"""

from __future__ import annotations

from typing import Any, Final

from jepsen.history import Event, History, JsonDict

FAULT: Final = "old-release"  # as jepsen.nemesis.VERSION_FAULTS declares it
UNPROVEN: Final = "old-release-unproven"
REPLICAS_DIFFER: Final = "replicas-differ"
KEPT_OUT_STATUS: Final = 409
KEPT_OUT_ERROR_CODE: Final = 40934  # api/errors.py: NodeKeptOut (jepsen may not import the server)
CLASSES: Final[dict[str, str]] = {
    UNPROVEN: "an old-release window without the proof that the node, started on the previous release, was "
    "kept out: the other nodes' health naming it, it leading nothing, a leadership transfer to it refused",
    REPLICAS_DIFFER: "after a run with old-release windows, a partition's replicas not byte for byte the "
    "same (raftlog log compare --nodes over the stopped nodes' data), or not compared",
}


def windows(history: History) -> list[tuple[Event, Event | None]]:
    """Each window of the fault: its start and the stop that ended it (None: the history ends inside)."""
    found: list[tuple[Event, Event | None]] = []
    for event in history.nemesis:
        if event.get("fault") != FAULT:
            continue
        if event.f == "start":
            found.append((event, None))
        elif event.f == "stop" and found and found[-1][1] is None:
            found[-1] = (found[-1][0], event)
    return found


def problems(start: Event, stop: Event | None) -> list[str]:
    """Why a window does not show that its node was kept out (empty: it does)."""
    if stop is None:
        return ["the window never ended (the history ends inside it): no proof recorded"]
    proof = stop.get("value", {}).get("proof")
    if not isinstance(proof, dict):
        return ["no proof recorded"]
    found: list[str] = []
    if start.get("value", {}).get("to") == "checkout":
        found.append("the harness started it on this checkout's code")
    if proof.get("ready"):
        found.append("it reported ready, which a node kept out never does")
    if proof.get("exited") is not None:
        found.append("it exited on the previous release")
    kept_out: dict[str, Any] = proof.get("kept_out") or {}
    if not kept_out or not all(isinstance(reason, str) and reason for reason in kept_out.values()):
        waited = proof.get("waited_s")
        found.append("no other node's health named it kept out" + (f" within {waited} s" if waited else ""))
    leads = proof.get("leader_of") or {}
    if set(leads) != set(kept_out) or any(count != 0 for count in leads.values()):
        found.append(f"not shown leading nothing by every node that named it: {leads}")
    transfer = proof.get("transfer") or {}
    if (transfer.get("status"), transfer.get("error_code")) != (KEPT_OUT_STATUS, KEPT_OUT_ERROR_CODE):
        found.append(f"a leadership transfer to it was not refused as kept out: {transfer or 'none tried'}")
    return found


def judge(history: History, results: JsonDict, replicas: JsonDict | None) -> JsonDict:
    """``results`` with the fault's verdict folded in (``old_release``: each window and the replicas'
    comparison): unchanged for a run without a window of the fault and without a comparison."""
    spans = windows(history)
    if not spans and replicas is None:
        return results
    found: dict[str, list[JsonDict]] = {UNPROVEN: [], REPLICAS_DIFFER: []}
    if not spans:  # the run named the fault (it compared its replicas) and no window of it started
        found[UNPROVEN].append(_anomaly(UNPROVEN, [], window=None, node=None, problems=["no window started"]))
    shown: list[JsonDict] = []
    for number, (start, stop) in enumerate(spans, start=1):
        missing = problems(start, stop)
        proof = (stop.get("value", {}).get("proof") if stop is not None else None) or {}
        node = (start.get("value", {}).get("nodes") or [None])[0]
        shown.append(
            {
                "window": number,
                "node": node,
                "start": start.time,
                "stop": None if stop is None else stop.time,
                "proven": not missing,
                "problems": missing,
                "kept_out": proof.get("kept_out"),
                "kept_out_after_s": proof.get("kept_out_after_s"),
                "transfer": proof.get("transfer"),
            }
        )
        if missing:
            events = [start] if stop is None else [start, stop]
            found[UNPROVEN].append(_anomaly(UNPROVEN, events, window=number, node=node, problems=missing))
    if replicas is None:
        not_compared = ["the replicas were not compared after the run"]
        found[REPLICAS_DIFFER].append(_anomaly(REPLICAS_DIFFER, [], problems=not_compared))
    elif replicas.get("exit") != 0:
        differing = [row.get("partition") for row in replicas.get("not_identical", [])]
        summary = f"raftlog log compare exit {replicas.get('exit')}: {differing or replicas.get('summary')}"
        found[REPLICAS_DIFFER].append(_anomaly(REPLICAS_DIFFER, [], partitions=differing, problems=[summary]))
    folded = {**results, "old_release": {"windows": shown, "replicas": replicas}}
    folded["classes"] = {**results["classes"], **CLASSES}
    folded["anomaly_counts"] = {**results["anomaly_counts"], **{k: len(v) for k, v in found.items()}}
    folded["anomalies"] = {**results["anomalies"], **{k: v for k, v in found.items() if v}}
    reasons = [f"{len(items)} {kind} ({_named(items[0])})" for kind, items in found.items() if items]
    if reasons:
        folded["verdict"], folded["reasons"] = "invalid", [*results["reasons"], *reasons]
    return folded


def _anomaly(kind: str, events: list[Event], **detail: Any) -> JsonDict:
    """An anomaly as the checkers list one: its class, what it is about, the events that show it."""
    return {"class": kind, **detail, "indexes": [e.index for e in events], "ops": [e.raw for e in events]}


def _named(anomaly: JsonDict) -> str:
    where = f"window {anomaly['window']} ({anomaly['node']}): " if anomaly.get("window") else ""
    return where + "; ".join(anomaly["problems"])
