"""The ``old-release`` fault: a node started again on the previous release's code (``run --upgrade-from``,
built by ``raftlog_dev.releases`` under ``.releases/``) on its data and its command line, after the
operator raised the cluster's level above that code, as issue 71 found an operator could (release 0.1.0
has no check of its own: the newer nodes must keep it out, docs/upgrades.md).

The run's cluster is formed by the previous release and rolled to this checkout before the workload, as
for the ``upgrade`` fault (``upgrade_fault.roll_forward``); then :func:`raise_levels` finalizes
``raftlog.version`` 2 with the operator's command, ``raftlog cluster features upgrade``. Each window:

- :func:`start`: the next node in turn (:func:`in_turn`) stopped (SIGTERM) and started on the previous
  release's code (the harness's own start, ``Cluster.launch``), not waited for: a node kept out never
  reports ready;
- :func:`prove`: the proof that the fault landed, asked of every other running node: its health names the
  node kept out (``nodes_kept_out``: the reason, and when), ``GET /v1/nodes`` says it leads nothing, then a
  partition's leadership moved to it, which must be refused (the answer is kept). Waiting stops early when
  the node reports ready (then it is not kept out) or exits;
- :func:`heal`: stopped again and started on this checkout; the nemesis waits until it reports ready (its
  ``ready`` event), as for every node a heal restarts.

After the run, once every node stopped, :func:`compare_replicas` runs ``raftlog log compare --nodes`` over
the nodes' data directories. ``jepsen.old_release_checker`` judges both: a window without its proof, or
replicas that differ or were not compared, make the run invalid.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from jepsen.control import REPO_ROOT, Cluster, ControlError
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError, RequestFailed

NAME = "old-release"
FEATURE = "raftlog.version"
LEVEL = 2  # the level release 0.1.0's code is below
PROOF_S = 60.0  # how long the others may take to name the node kept out: its start on a loaded machine
POLL_S = 0.5
LEVELS_S = 60.0  # how long the level raise may be refused while gossip has not told every node's code
COMMAND_TIMEOUT_S = 120.0  # one raftlog command (the compare reads every replica's log)
FEATURE_REFUSED = 40926  # api/errors.py: FeatureUpdateRefused (a node not heard from, or below the level)


def in_turn(nodes: Sequence[str], free: Sequence[str], turn: int) -> str | None:
    """The node of window ``turn`` (0, 1, ...): each node in turn, the next free one when it is busy."""
    for step in range(len(nodes)):
        node = nodes[(turn + step) % len(nodes)]
        if node in free:
            return node
    return None


def raftlog(cluster: Cluster, *argv: str) -> subprocess.CompletedProcess[str]:
    """``raftlog ARGV`` (this checkout's CLI) against every node, with the run's admin token."""
    env = {
        **os.environ,
        "RAFTLOG_SERVER": ",".join(cluster.urls),
        "RAFTLOG_ADMIN_TOKEN": cluster.admin_token,
    }
    try:
        return subprocess.run(
            [sys.executable, "-m", "raftlog_cli", *argv],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            cwd=REPO_ROOT,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise ControlError(f"raftlog {' '.join(argv)}: no answer within {COMMAND_TIMEOUT_S:.0f} s") from exc


def raise_levels(cluster: Cluster) -> dict[str, Any]:
    """``raftlog cluster features upgrade --feature raftlog.version --level 2``, as the operator raises it
    once every node runs this release; asked again while refused for a node gossip has not yet shown on
    this release (at most ``LEVELS_S``). What it answered; ``ControlError`` when it did not finalize."""
    argv = ("cluster", "features", "upgrade", "--feature", FEATURE, "--level", str(LEVEL), "--json")
    began = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        done = raftlog(cluster, *argv)
        refused = f"error_code {FEATURE_REFUSED}" in done.stderr
        if done.returncode == 0 or not refused or time.monotonic() - began > LEVELS_S:
            break
        time.sleep(1.0)
    if done.returncode != 0:
        raise ControlError(f"raftlog {' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    try:
        finalized = json.loads(done.stdout)["finalized"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ControlError(f"raftlog {' '.join(argv)}: unexpected answer {done.stdout[:300]!r}") from exc
    if finalized.get(FEATURE) != LEVEL:
        raise ControlError(f"raftlog {' '.join(argv)} answered {finalized}: {FEATURE} not at {LEVEL}")
    return {
        "command": f"raftlog {' '.join(argv)}",
        "finalized": finalized,
        "attempts": attempts,
        "seconds": round(time.monotonic() - began, 3),
    }


async def start(cluster: Cluster, node: str) -> dict[str, Any]:
    """Stop ``node`` and start it on the previous release's code, on its data and command line, without
    waiting for it: what it ran, what it runs now and its pid."""
    return await _restart(cluster, node, previous=True)


async def heal(cluster: Cluster, node: str) -> dict[str, Any]:
    """Stop ``node`` and start it on this checkout's code (the nemesis watches it until it reports ready,
    as every node a heal restarts): what it ran, what it runs now and its pid."""
    return await _restart(cluster, node, previous=False)


async def _restart(cluster: Cluster, node: str, previous: bool) -> dict[str, Any]:
    restarted: dict[str, Any] = {"from": cluster.version(node)}
    await asyncio.to_thread(cluster.stop, node)
    if previous:
        cluster.on_other.add(node)
    else:
        cluster.on_other.discard(node)
    restarted["pid"] = cluster.start(node)
    restarted["to"] = cluster.version(node)
    return restarted


async def prove(cluster: Cluster, node: str, topics: Mapping[str, int]) -> dict[str, Any]:
    """The proof that ``node``, started on the previous release, is kept out: every other running node's
    health names it (``kept_out``: node -> reason; ``kept_out_after_s``: since this call), and none shows
    it leading a partition (``leader_of``); then a partition's leadership moved to it (``transfer``: the
    answer, which must be a refusal). ``ready`` or ``exited``: why it stopped waiting before that."""
    others = [n.node_id for n in cluster.nodes if n.node_id != node]
    clients = {
        other: RaftlogClient(
            [cluster.spec(other).http], admin_token=cluster.admin_token, timeout_s=5.0, retries=1
        )
        for other in others
    }
    began = time.monotonic()
    proof: dict[str, Any] = {"node": node, "kept_out": {}, "leader_of": {}}
    try:
        while time.monotonic() - began < PROOF_S:
            if not cluster.running(node):
                proof["exited"] = cluster.log_tail(node, 5)
                break
            if await asyncio.to_thread(cluster.ready, node):
                proof["ready"] = True  # a node kept out never reports ready
                break
            asked = [other for other in others if cluster.running(other)]
            seen = {other: await _seen(clients[other], node) for other in asked}
            if asked and all(reason and leads == 0 for reason, leads in seen.values()):
                proof["kept_out"] = {other: reason for other, (reason, _) in seen.items()}
                proof["leader_of"] = {other: leads for other, (_, leads) in seen.items()}
                proof["kept_out_after_s"] = round(time.monotonic() - began, 3)
                break
            await asyncio.sleep(POLL_S)
        else:
            proof["waited_s"] = PROOF_S
        asked = [other for other in others if cluster.running(other)]
        if asked:
            proof["transfer"] = await _transfer(clients[asked[0]], node, topics)
    finally:
        await asyncio.gather(*(client.close() for client in clients.values()))
    return proof


async def _seen(client: RaftlogClient, node: str) -> tuple[str | None, int | None]:
    """What one other node says of ``node``: why its health keeps it out (None: it does not), and how many
    partitions its ``GET /v1/nodes`` says it leads (None: unknown)."""
    try:
        health = await client.cluster.health()
        listed = await client.cluster.nodes()
    except (ClientError, OSError, TimeoutError):
        return None, None
    reason = health.get("nodes_kept_out", {}).get(node)
    entry = next((n for n in listed if n.get("node_id") == node), {})
    leads = entry.get("leader_of")
    return (str(reason) if reason else None), (int(leads) if isinstance(leads, int) else None)


async def _transfer(client: RaftlogClient, node: str, topics: Mapping[str, int]) -> dict[str, Any]:
    """Move the leadership of the first partition ``node`` holds a replica of to it: the answer."""
    for topic in sorted(topics):
        for partition in range(topics[topic]):
            try:
                state = await client.cluster.partition_state(topic, partition)
            except (ClientError, OSError, TimeoutError):
                continue
            if not any(r.get("node") == node for r in state.get("replicas", [])):
                continue
            asked: dict[str, Any] = {"topic": topic, "partition": partition, "target": node}
            try:
                answer = await client.cluster.transfer_leadership(topic, partition, node)
            except RequestFailed as refused:
                return {**asked, "status": refused.status, "error_code": refused.error_code,
                        "message": refused.message}  # fmt: skip
            except (ClientError, OSError, TimeoutError) as exc:
                return {**asked, "error": f"{type(exc).__name__}: {exc}"}
            return {**asked, "status": 200, "answer": answer}
    return {"error": f"no partition found holding a replica on {node}"}


def compare_replicas(cluster: Cluster) -> dict[str, Any]:
    """``raftlog log compare --nodes DATA`` over every node's data directory (the nodes stopped): each
    partition held by two nodes or more compared byte for byte. Its exit status (0: identical), the
    partitions by verdict, those that did not compare identical, and its summary line."""
    data = os.path.dirname(cluster.data_dir(cluster.nodes[0].node_id))
    argv = ("log", "compare", "--nodes", data, "--json")
    try:
        done = raftlog(cluster, *argv)
    except ControlError as exc:
        return {"command": f"raftlog {' '.join(argv)}", "exit": None, "summary": str(exc)}
    try:
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    except ValueError as exc:  # judged as not compared: its exit status stands
        rows = [{"partition": None, "verdict": "unreadable", "error": f"its output: {exc}"}]
    verdicts: dict[str, int] = {}
    for row in rows:  # identical, differs, unreadable, or not compared (held by one node only)
        verdicts[str(row.get("verdict"))] = verdicts.get(str(row.get("verdict")), 0) + 1
    return {
        "command": f"raftlog {' '.join(argv)}",
        "exit": done.returncode,
        "partitions": dict(sorted(verdicts.items())),
        "batches": sum(int(row.get("compared", {}).get("batches", 0)) for row in rows),
        "not_identical": [row for row in rows if row.get("verdict") in ("differs", "unreadable")],
        "summary": done.stderr.strip(),
    }
