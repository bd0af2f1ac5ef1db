"""``raftlog bench gossip`` (``python -m raftlog_bench.gossip``): N real-UDP members on 127.0.0.1.

Prints the issue's numbers: crash -> every survivor declares it dead (p50/p99 over trials), false deaths
at injected packet loss, metadata propagation, join convergence, and the idle CPU of all members. Loss is
injected in the transport (``Gossip.set_fault``: each member drops that fraction of its outgoing
datagrams, so a round trip loses about twice that). Progress goes to stderr; the table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from membership.gossip import Gossip
from membership.model import GossipConfig, Member, MemberState
from raftlog_bench.arguments import add_json_argument, refused, standalone_parser
from raftlog_bench.output import emit

DESCRIPTION = "SWIM membership: crash detection, false deaths under loss, metadata, join, idle CPU."
SECRET = b"membership-bench-secret"


def _progress(message: str) -> None:
    print(f"[gossip bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _percentile(values: Sequence[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


def _summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50_s": _round(_percentile(values, 0.5)),
        "p99_s": _round(_percentile(values, 0.99)),
        "max_s": _round(max(values) if values else None),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass
class _Cluster:
    config: GossipConfig
    seed: int
    nodes: dict[str, Gossip] = field(default_factory=dict)
    events: list[tuple[float, str, Member]] = field(default_factory=list)
    crashed: set[str] = field(default_factory=set)
    counter: int = 0

    async def add(self, node_id: str, address: str = "127.0.0.1:0", seeds: Sequence[str] = ()) -> Gossip:
        self.counter += 1
        node = Gossip(
            node_id, address, SECRET, meta=b"v0", config=self.config, seed=self.seed * 1000 + self.counter
        )
        node.subscribe(self._recorder(node_id))
        await node.start()
        self.nodes[node_id] = node
        self.crashed.discard(node_id)
        if seeds:
            await node.join(list(seeds), timeout_s=5.0)
        return node

    def _recorder(self, observer: str) -> Callable[[Member], None]:
        def record(member: Member) -> None:
            self.events.append((time.monotonic(), observer, member))

        return record

    def live(self) -> list[Gossip]:
        return [n for i, n in self.nodes.items() if i not in self.crashed]

    def converged(self) -> bool:
        live = self.live()
        ids = {n.node_id for n in live}
        for node in live:
            alive = {m.node_id for m in node.members() if m.state is MemberState.ALIVE}
            if not ids <= alive:
                return False
        return True

    async def wait(
        self, predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.005
    ) -> float | None:
        start = time.monotonic()
        try:
            async with asyncio.timeout(timeout_s):
                while not predicate():
                    await asyncio.sleep(step_s)
        except TimeoutError:
            return None
        return time.monotonic() - start

    async def stop_all(self) -> None:
        for node in self.nodes.values():
            await node.stop()


def _all_see(observers: list[Gossip], node_id: str, state: MemberState) -> Callable[[], bool]:
    def check() -> bool:
        return all((m := o.member(node_id)) is not None and m.state is state for o in observers)

    return check


def _all_see_meta(observers: list[Gossip], node_id: str, meta: bytes) -> Callable[[], bool]:
    def check() -> bool:
        return all((m := o.member(node_id)) is not None and m.meta == meta for o in observers)

    return check


def _joined(newcomer: Gossip, others: list[Gossip]) -> Callable[[], bool]:
    ids = {n.node_id for n in others}

    def check() -> bool:
        if not _all_see(others, newcomer.node_id, MemberState.ALIVE)():
            return False
        return ids <= {m.node_id for m in newcomer.members() if m.state is MemberState.ALIVE}

    return check


def _false_deaths(cluster: _Cluster, since: float) -> list[tuple[float, str, Member]]:
    return [
        e
        for e in cluster.events
        if e[0] >= since and e[2].state is MemberState.DEAD and e[2].node_id not in cluster.crashed
    ]


async def _crash_trials(
    cluster: _Cluster, args: argparse.Namespace, rng_pick: Callable[[list[str]], str]
) -> dict[str, Any]:
    first_suspect: list[float] = []
    first_dead: list[float] = []
    all_dead: list[float] = []
    rejoin: list[float] = []
    undetected = 0
    false_deaths = 0
    for trial in range(args.crash_trials):
        candidates = [i for i in cluster.nodes if i not in cluster.crashed and i != "m0"]
        victim_id = rng_pick(candidates)
        victim = cluster.nodes[victim_id]
        address = victim.address
        mark = len(cluster.events)
        started = time.monotonic()
        cluster.crashed.add(victim_id)
        await victim.stop()  # no leave: a crash
        survivors = cluster.live()
        took = await cluster.wait(_all_see(survivors, victim_id, MemberState.DEAD), args.detect_timeout, 0.01)
        events = [e for e in cluster.events[mark:] if e[2].node_id == victim_id]
        suspects = [e[0] - started for e in events if e[2].state in (MemberState.SUSPECT, MemberState.DEAD)]
        deads = [e[0] - started for e in events if e[2].state is MemberState.DEAD]
        if suspects:
            first_suspect.append(min(suspects))
        if deads:
            first_dead.append(min(deads))
        if took is None:
            undetected += 1
        else:
            # the moment the last survivor's own event happened, not when our polling noticed
            last: dict[str, float] = {}
            for at, observer, member in events:
                if member.state is MemberState.DEAD:
                    last.setdefault(observer, at)
            all_dead.append(max(last.values()) - started if len(last) >= len(survivors) else took)
        false_deaths += len(_false_deaths(cluster, started))
        _progress(f"crash trial {trial + 1}/{args.crash_trials}: {victim_id} dead everywhere after {took}")
        # restart it under the same name and address; it refutes its death and is alive again
        await cluster.add(victim_id, address, seeds=[cluster.nodes["m0"].address])
        back = await cluster.wait(cluster.converged, 60.0, 0.01)
        if back is not None:
            rejoin.append(back)
        await asyncio.sleep(1.0)
    return {
        "trials": args.crash_trials,
        "first_suspect": _summary(first_suspect),
        "first_dead": _summary(first_dead),
        "all_survivors_dead": _summary(all_dead),
        "undetected": undetected,
        "restart_full_view": _summary(rejoin),
        "false_deaths_during_trials": false_deaths,
    }


async def _meta_trials(
    cluster: _Cluster, args: argparse.Namespace, rng_pick: Callable[[list[str]], str]
) -> dict[str, Any]:
    latencies: list[float] = []
    for trial in range(args.meta_trials):
        owner_id = rng_pick([n.node_id for n in cluster.live()])
        value = b"leaders:v%d" % (trial + 1)
        observers = [n for n in cluster.live() if n.node_id != owner_id]
        mark = len(cluster.events)
        started = time.monotonic()
        cluster.nodes[owner_id].set_meta(value)
        took = await cluster.wait(_all_see_meta(observers, owner_id, value), 10.0)
        seen: dict[str, float] = {}
        for at, observer, member in cluster.events[mark:]:
            if member.node_id == owner_id and member.meta == value:
                seen.setdefault(observer, at)
        if took is not None:
            latencies.append(max(seen.values()) - started if len(seen) >= len(observers) else took)
        await asyncio.sleep(0.3)
    _progress(f"metadata: {len(latencies)}/{args.meta_trials} reached everyone")
    return {"trials": args.meta_trials, "reaches_all": _summary(latencies)}


async def _join_trials(
    cluster: _Cluster, args: argparse.Namespace, rng_pick: Callable[[list[str]], str]
) -> dict[str, Any]:
    latencies: list[float] = []
    for trial in range(args.join_trials):
        seed = cluster.nodes[rng_pick([n.node_id for n in cluster.live()])].address
        node_id = f"joiner{trial}"
        started = time.monotonic()
        newcomer = await cluster.add(node_id, seeds=[seed])
        others = [n for n in cluster.live() if n is not newcomer]

        took = await cluster.wait(_joined(newcomer, others), 30.0)
        if took is not None:
            latencies.append(time.monotonic() - started)
        _progress(f"join trial {trial + 1}/{args.join_trials}: converged after {_round(took)}")
        await newcomer.leave()
        await newcomer.stop()
        cluster.crashed.add(node_id)
        del cluster.nodes[node_id]
        await asyncio.sleep(0.5)
    return {"trials": args.join_trials, "converges": _summary(latencies)}


async def _idle(cluster: _Cluster, args: argparse.Namespace) -> dict[str, Any]:
    packets_before = sum(n.stats()["packets_out"] for n in cluster.live())
    cpu_before, wall_before = time.process_time(), time.monotonic()
    await asyncio.sleep(args.idle_seconds)
    cpu, wall = time.process_time() - cpu_before, time.monotonic() - wall_before
    packets = sum(n.stats()["packets_out"] for n in cluster.live()) - packets_before
    members = len(cluster.live())
    result = {
        "seconds": args.idle_seconds,
        "cpu_pct_of_one_core_all_members": round(100 * cpu / wall, 2),
        "packets_per_member_per_s": round(packets / wall / members, 2),
    }
    _progress(f"idle: {result}")
    return result


async def _loss(cluster: _Cluster, args: argparse.Namespace, loss: float) -> dict[str, Any]:
    refutations_before = sum(n.stats()["refutations"] for n in cluster.live())
    for node in cluster.live():
        node.set_fault(loss=loss)
    started = time.monotonic()
    cpu_before = time.process_time()
    deadline = started + args.loss_seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
        suspicions = sum(1 for e in cluster.events if e[0] >= started and e[2].state is MemberState.SUSPECT)
        _progress(
            f"loss {loss:.0%}: {time.monotonic() - started:.0f}/{args.loss_seconds:.0f}s, "
            f"{suspicions} suspect events, {len(_false_deaths(cluster, started))} false deaths"
        )
    cpu = time.process_time() - cpu_before
    wall = time.monotonic() - started
    for node in cluster.live():
        node.set_fault(loss=0.0)
    events = [e for e in cluster.events if e[0] >= started]
    false = _false_deaths(cluster, started)
    reconverged = await cluster.wait(cluster.converged, 60.0, 0.05)
    return {
        "loss": loss,
        "seconds": args.loss_seconds,
        "false_deaths": len(false),
        "members_falsely_declared_dead": len({e[2].node_id for e in false}),
        "suspect_events": sum(1 for e in events if e[2].state is MemberState.SUSPECT),
        "refutations": sum(n.stats()["refutations"] for n in cluster.live()) - refutations_before,
        "awareness_max": max(n.stats()["awareness"] for n in cluster.live()),
        "cpu_pct_of_one_core_all_members": round(100 * cpu / wall, 2),
        "reconverged_after_s": _round(reconverged),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import random

    rng = random.Random(args.seed)

    def pick(items: list[str]) -> str:
        return rng.choice(sorted(items))

    cluster = _Cluster(GossipConfig(), args.seed)
    out: dict[str, Any] = {"members": args.members, "config": "memberlist DefaultLANConfig"}
    try:
        started = time.monotonic()
        first = await cluster.add("m0")
        for i in range(1, args.members):
            await cluster.add(f"m{i}", seeds=[first.address])
        took = await cluster.wait(cluster.converged, 60.0)
        out["initial_join_all_s"] = _round(time.monotonic() - started if took is not None else None)
        _progress(f"{args.members} members converged: {out['initial_join_all_s']} s after the first started")
        await asyncio.sleep(2.0)
        out["idle"] = await _idle(cluster, args)
        out["metadata"] = await _meta_trials(cluster, args, pick)
        out["join"] = await _join_trials(cluster, args, pick)
        out["crash"] = await _crash_trials(cluster, args, pick)
        out["loss"] = []
        for loss in args.losses:
            out["loss"].append(await _loss(cluster, args, loss))
    finally:
        await cluster.stop_all()
    return out


def _table(result: dict[str, Any]) -> str:
    crash = result["crash"]
    lines = [
        f"membership bench: {result['members']} members on 127.0.0.1, one process, {result['config']}",
        f"{'metric':<52} {'p50':>8} {'p99':>8} {'max':>8}  goal",
    ]

    def row(name: str, summary: dict[str, Any], goal: str) -> None:
        cells = [
            f"{summary[k]:>8}" if summary[k] is not None else f"{'-':>8}" for k in ("p50_s", "p99_s", "max_s")
        ]
        lines.append(f"{name + ' (n=' + str(summary['n']) + ')':<52} {' '.join(cells)}  {goal}")

    row("crash -> first suspect, s", crash["first_suspect"], "")
    row("crash -> first dead, s", crash["first_dead"], "")
    row("crash -> all survivors dead, s", crash["all_survivors_dead"], "p99 <= 10 s")
    row("restart under same name -> full view, s", crash["restart_full_view"], "")
    row("metadata change reaches all, s", result["metadata"]["reaches_all"], "p99 <= 1 s")
    row("join of a new member converges, s", result["join"]["converges"], "p99 <= 3 s")
    lines.append(f"crashes never detected everywhere: {crash['undetected']}")
    lines.append(f"false deaths during crash trials: {crash['false_deaths_during_trials']}")
    idle = result["idle"]
    lines.append(
        f"idle CPU, all members: {idle['cpu_pct_of_one_core_all_members']}% of one core "
        f"({idle['packets_per_member_per_s']} datagrams/s per member)   goal <= 2%"
    )
    for loss in result["loss"]:
        lines.append(
            f"loss {loss['loss']:.0%} for {loss['seconds']:.0f} s: "
            f"false deaths {loss['false_deaths']} (goal 0), "
            f"suspect events {loss['suspect_events']}, refutations {loss['refutations']}, "
            f"max awareness {loss['awareness_max']}, CPU {loss['cpu_pct_of_one_core_all_members']}%, "
            f"reconverged {loss['reconverged_after_s']} s after loss off"
        )
    lines.append(f"initial join of all members: {result['initial_join_all_s']} s; wall {result['wall_s']} s")
    return "\n".join(lines)


def _losses(text: str) -> list[float]:
    values = [float(part) for part in text.split(",") if part.strip()]
    if not all(0.0 <= v < 1.0 for v in values):
        raise argparse.ArgumentTypeError("loss rates must be in [0, 1)")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (also registered by ``raftlog bench gossip``)."""
    parser.add_argument("--members", type=int, default=50, help="members in the cluster (default 50)")
    parser.add_argument("--crash-trials", type=int, default=10, help="crash trials (default 10)")
    parser.add_argument("--meta-trials", type=int, default=20, help="metadata change trials (default 20)")
    parser.add_argument("--join-trials", type=int, default=10, help="join trials (default 10)")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="idle CPU window (default 20)")
    parser.add_argument(
        "--losses", type=_losses, default=[0.05, 0.10], help="packet loss rates to soak (default 0.05,0.10)"
    )
    parser.add_argument(
        "--loss-seconds",
        type=float,
        default=300.0,
        help="soak length per loss rate (default 300, per the issue)",
    )
    parser.add_argument("--detect-timeout", type=float, default=60.0, help="give up on a crash trial after S")
    parser.add_argument("--seed", type=int, default=1, help="seed for choices and members (default 1)")
    add_json_argument(parser, "the result")


def _problem(args: argparse.Namespace) -> str | None:
    checks = [
        (3 <= args.members <= 500, "--members must be in [3, 500]"),
        (0 <= args.crash_trials <= 1000, "--crash-trials must be in [0, 1000]"),
        (0 <= args.meta_trials <= 1000 and 0 <= args.join_trials <= 1000, "trials must be in [0, 1000]"),
        (0 < args.idle_seconds <= 3600, "--idle-seconds must be in (0, 3600]"),
        (0 < args.loss_seconds <= 7200, "--loss-seconds must be in (0, 7200]"),
        (0 < args.detect_timeout <= 600, "--detect-timeout must be in (0, 600]"),
    ]
    return next((message for ok, message in checks if not ok), None)


def run_from_args(args: argparse.Namespace) -> int:
    problem = _problem(args)
    if problem is not None:
        return refused("gossip", problem)
    started = time.monotonic()
    result = asyncio.run(run(args))
    result["wall_s"] = round(time.monotonic() - started, 1)
    emit(args.json, _table(result), result)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(standalone_parser("gossip", DESCRIPTION, add_arguments).parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
