"""Each listener's request budget under the hostile clients, read from the node's own gauges.

While the attackers attack (``jepsen.hostile``), the nemesis reads every node's ``/metrics`` every
``SAMPLE_EVERY_S``: ``raftlog_request_bytes_held{door}``, the bytes of requests a listener holds (a Kafka
frame's whole announced size from when the listener takes it, an HTTP body's as it is read), and
``raftlog_request_bytes_waits_total{door}``, the requests that waited for room in that budget. Each
listener's highest sample is held against its own budget (``--http-request-bytes-max``,
``--kafka-request-bytes-max`` in the node's argv, else the server's default): over it is a finding. The
waits show a budget that held an attacker back: the logged-in pin (``login-pin``) announces more frames
to a node than one user's share takes, so the node's Kafka listener must hold one whole pinned frame
and make the next wait. The node's peak memory (VmHWM) may rise by what both budgets hold and two
inflations at most, with room to spare (``peak_growth_max``).

Pure but for :func:`watch`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any

from jepsen import hostile
from jepsen.workload import Http
from raftlog_contract import METRICS_PATH

MiB = 1024 * 1024
DOORS = ("http", "kafka")
OPTIONS = {"http": "--http-request-bytes-max", "kafka": "--kafka-request-bytes-max"}
# the server's defaults of both options (api/http_limits.py, partitions/security/holds.py; jepsen may not
# import them: tests/jepsen/test_jepsen_hostile.py checks that they agree)
REQUEST_BYTES_MAX_DEFAULT = {"http": 256 * MiB, "kafka": 256 * MiB}
# what one decompression may inflate to (raftlog.storage.batch.INFLATED_BYTES_MAX_DEFAULT), twice: a Kafka
# and an HTTP bomb at once; and room for what the node holds besides (768 MiB in all with the defaults)
INFLATION_BYTES_MAX = 64 * MiB
SPARE_BYTES = 128 * MiB
SAMPLE_EVERY_S = 0.5
SAMPLE_TIMEOUT_S = 2.0
_LINE = re.compile(r'^raftlog_request_bytes_(held|waits_total)\{door="(http|kafka)"\} ([0-9.eE+-]+)$')


def budgets(argv: Sequence[str]) -> dict[str, int]:
    """Each listener's budget of request bytes as a node's ``argv`` sets it (``--option=N`` or
    ``--option N``; the last one counts), else the server's default."""
    found = dict(REQUEST_BYTES_MAX_DEFAULT)
    for position, argument in enumerate(argv):
        for door, option in OPTIONS.items():
            if argument.startswith(option + "="):
                found[door] = int(argument.split("=", 1)[1])
            elif argument == option and position + 1 < len(argv):
                found[door] = int(argv[position + 1])
    return found


def peak_growth_max(budget: Mapping[str, int]) -> int:
    """How much a node's peak memory may rise during an attack window: what its listeners' budgets let
    the attacks make it hold at once, two inflations (a Kafka and an HTTP bomb) and room to spare."""
    return sum(budget[door] for door in DOORS) + 2 * INFLATION_BYTES_MAX + SPARE_BYTES


def parse(text: str) -> dict[str, dict[str, float]]:
    """``{"held": {door: bytes}, "waits": {door: count}}`` from a node's Prometheus text."""
    found: dict[str, dict[str, float]] = {"held": {}, "waits": {}}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            kind = "held" if match.group(1) == "held" else "waits"
            found[kind][match.group(2)] = float(match.group(3))
    return found


def fold(samples: Sequence[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """One node's samples over a window: each door's highest held, and its waits first and last seen."""
    folded: dict[str, Any] = {"samples": len(samples)}
    for door in DOORS:
        held = [s["held"][door] for s in samples if door in s["held"]]
        waits = [s["waits"][door] for s in samples if door in s["waits"]]
        folded[door] = {
            "held_max": int(max(held)) if held else None,
            "waits": int(waits[-1] - waits[0]) if waits else None,
        }
    return folded


def pin_missed(tally: Mapping[str, Mapping[str, int]], nodes: Sequence[str]) -> list[str]:
    """What in a window's tally shows the logged-in pin did not reach a node: fewer than two pinned frames
    announced to it (one user's share holds one whole frame; the second is what the budget must hold
    back), or less than one second of the attack's pace (``PIN_BYTES_PER_S``) sent into them, which the
    node reads only from a frame it took into its budget. Without both, the memory bounds held against
    nothing."""
    pin = tally.get("login-pin", {})
    found = []
    for node in nodes:
        announced, sent = pin.get(f"frames_announced:{node}", 0), pin.get(f"bytes_sent:{node}", 0)
        if announced < 2 or sent < hostile.PIN_BYTES_PER_S:
            found.append(
                f"login-pin at {node}: {announced} pinned frames announced (at least 2), {sent} bytes sent "
                f"(at least {hostile.PIN_BYTES_PER_S})"
            )
    return found


def findings(seen: Mapping[str, Mapping[str, Any]], budget: Mapping[str, Mapping[str, int]]) -> list[str]:
    """A listener that held more than its budget, or a node never read."""
    found = []
    for node, folded in sorted(seen.items()):
        if not folded["samples"]:
            found.append(f"{node}: its request budgets were never read (/metrics did not answer)")
            continue
        for door in DOORS:
            held = folded[door]["held_max"]
            if held is not None and held > budget[node][door]:
                found.append(
                    f"{node}'s {door} listener held {held} bytes of requests, more than its budget "
                    f"({budget[node][door]})"
                )
    return found


async def watch(
    http: Http, urls: Mapping[str, str], stop: asyncio.Event
) -> dict[str, list[dict[str, dict[str, float]]]]:
    """Every node's gauges every ``SAMPLE_EVERY_S`` until ``stop`` is set (a node that does not answer
    is not sampled that time); the samples by node."""
    samples: dict[str, list[dict[str, dict[str, float]]]] = {node: [] for node in urls}
    while True:
        for node, url in urls.items():
            kind, _, payload, _ = await http.call(
                "GET", METRICS_PATH, url=url, timeout_s=SAMPLE_TIMEOUT_S, accept="text/plain"
            )
            if kind == "ok" and isinstance(payload, str):
                samples[node].append(parse(payload))
        try:
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)
            return samples
        except TimeoutError:
            continue
