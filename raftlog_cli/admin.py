"""Operator commands of the ``raftlog`` CLI: cluster health and nodes, partition moves and leadership,
node decommission and maintenance, the controller group's members, topic configs. Each prints a short
human summary, or the server's JSON with ``--json``. ``raftlog_cli.cli`` registers them and supplies
how to run a call against the cluster."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from raftlog_cli.arguments import config_pair
from raftlog_cli.table import Column, table
from raftlog_client.client import RaftlogClient

WAIT_POLL_S = 0.5
Work = Callable[[RaftlogClient], Awaitable[int]]
WithClient = Callable[[argparse.Namespace, Work], int]


def print_answer(args: argparse.Namespace, body: Any, summary: Callable[[Any], str]) -> None:
    print(json.dumps(body, indent=2) if args.json else summary(body))


def _bytes(value: int | None) -> str:
    if value is None:
        return "?"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _parts(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['topic']}/{r['partition']}" for r in rows) or "none"


def health_summary(body: dict[str, Any]) -> str:
    lines = [
        f"healthy: {'yes' if body['is_healthy'] else 'NO'}   controller: {body.get('controller') or 'none'}",
        f"nodes: {', '.join(body['nodes'])}   down: {', '.join(body['nodes_down']) or 'none'}",
        f"leaderless partitions: {_parts(body['leaderless_partitions'])}",
        f"under-replicated partitions: {_parts(body['under_replicated_partitions'])}",
    ]
    for node, reason in sorted(body.get("nodes_kept_out", {}).items()):
        lines.append(f"kept out: {node}: {reason}")
    for node, doors in sorted(body.get("nodes_missing_doors", {}).items()):
        lines.append(
            f"missing a door: {node} has no {' or '.join(doors)} listener, so it leads nothing "
            "(start it with --kafka)"
        )
    failed = body.get("failed_replicas", [])
    lines.append(f"failed replicas (cannot open or replay): {'none' if not failed else len(failed)}")
    for row in failed:
        lines.append(
            f"  {row['node']} {row['topic']}/{row['partition']} (attempt {row['attempts']}): {row['error']}"
        )
    if body.get("moving_partitions"):
        lines.append(f"moving partitions: {_parts(body['moving_partitions'])}")
    if body.get("nodes_maintenance"):
        lines.append(f"in maintenance: {', '.join(body['nodes_maintenance'])}")
    if body.get("nodes_decommissioning"):
        lines.append(f"decommissioning: {', '.join(body['nodes_decommissioning'])}")
    if body.get("nodes_decommissioned"):
        lines.append(
            f"decommissioned (hold no replica, may be stopped): {', '.join(body['nodes_decommissioned'])}"
        )
    for node, disk in sorted(body.get("disk", {}).items()):
        lines.append(f"disk {node}: {_bytes(disk['used_bytes'])} used, {_bytes(disk['free_bytes'])} free")
    return "\n".join(lines)


NODES = (
    Column("NODE", "<8"), Column("STATE", "<8", " "), Column("LEADS", ">5", " "),
    Column("DISK USED", ">10", " "), Column("VERSION", "<8", "  "), Column("FLAGS", "<26", "  "),
    Column("HTTP", gap=" "),
)  # fmt: skip


def nodes_summary(rows: list[dict[str, Any]]) -> str:
    cells = [
        (
            r["node_id"],
            r["state"],
            r["leader_of"],
            _bytes(r.get("disk_used_bytes")),
            _version(r),
            _flags(r),
            r["http"],
        )
        for r in rows
    ]
    lines = table(NODES, cells)
    lines += [f"{r['node_id']} is kept out: {r['kept_out']}" for r in rows if r.get("kept_out")]
    return "\n".join(lines)


def _version(node: dict[str, Any]) -> str:
    """A node's version as it gossiped it; a node of release 0.1.0 gossips none."""
    version = node.get("version")
    if version is not None:
        return str(version)
    return "0.1.0?" if node.get("state") == "alive" else "?"


def features_summary(body: dict[str, Any]) -> str:
    lines = []
    for feature, level in sorted(body["finalized"].items()):
        lines.append(f"{feature}: finalized level {level}")
    lines.append(f"{'NODE':<10}{'VERSION':<10}SUPPORTS")
    for node, about in sorted(body["nodes"].items()):
        supported = about.get("features")
        levels = (
            "level 1 (0.1.0's formats)"
            if supported is None
            else ", ".join(f"{feature} {level}" for feature, level in sorted(supported.items()))
        )
        lines.append(f"{node:<10}{about.get('version') or '0.1.0?':<10}{levels}")
    return "\n".join(lines)


def every_level_up(features: dict[str, Any]) -> dict[str, int]:
    """Each feature the cluster may raise, to the highest level every node supports: a node of release
    0.1.0 names none and supports level 1 of each (``GET /v1/features``)."""
    nodes = [about.get("features") or {} for about in features["nodes"].values()]
    raised = {}
    for feature, finalized in sorted(features["finalized"].items()):
        common = min((supported.get(feature, 1) for supported in nodes), default=finalized)
        if common > finalized:
            raised[feature] = common
    return raised


def _flags(node: dict[str, Any]) -> str:
    flags = [f for f in ("maintenance", "decommissioning") if node.get(f)]
    if node.get("decommissioned"):  # finished: said once, as `node status` says it
        flags = [f if f != "decommissioning" else "decommissioned" for f in flags]
    if node.get("kept_out"):  # why: on a line of its own below the table
        flags.append("KEPT-OUT")
    flags += [f"NO-{door.upper()}" for door in node.get("doors_missing", ())]
    return ",".join(flags) or "-"


def move_summary(body: dict[str, Any]) -> str:
    where = f"{body['topic']}/{body['partition']}"
    move = body.get("move")
    if move is None:
        return f"{where}: replicas {','.join(body['replicas'])}, no move in progress"
    state = "cancelled, returning to" if move["cancelled"] else "moving to"
    joining = f", {move['adding']} joining" if move["adding"] else ""
    return f"{where}: replicas {','.join(move['replicas'])}, {state} {','.join(move['target'])}{joining}"


def partition_summary(body: dict[str, Any]) -> str:
    lines = [
        f"{body.get('topic')}/{body.get('partition')}: leader {body.get('leader') or 'none'}, term "
        f"{body.get('term')}, offsets {body.get('log_start_offset')}..{body.get('high_watermark')}",
        f"{'NODE':<8}{'ROLE':<10}{'RAFT INDEX':>12}{'LAG':>8}  IN SYNC   (Raft entries, not record offsets)",
    ]
    for replica in body.get("replicas", []):
        match = "-" if replica.get("match_index") is None else replica["match_index"]
        lag = "-" if replica.get("lag") is None else replica["lag"]
        in_sync = {True: "yes", False: "NO"}.get(replica.get("in_sync"), "?")
        lines.append(
            f"{replica.get('node', '?'):<8}{replica.get('role', '?'):<10}{match:>12}{lag:>8}  {in_sync}"
        )
        if replica.get("error"):
            lines.append(f"  {replica['error']}")
    return "\n".join(lines)


def decommission_summary(body: dict[str, Any]) -> str:
    node = body["node_id"]
    if not body["decommissioning"]:
        return f"{node}: not decommissioning; holds {body['replicas_remaining']} replica(s)"
    if body["done"]:
        if body.get("controller_voter"):
            return (
                f"{node}: decommissioned: it holds no partition replica but is a controller voter: "
                f"`raftlog controller remove {node}` (add another voter first to keep the group's size)"
            )
        return f"{node}: decommissioned: it holds no replica and may be stopped"
    lines = [
        f"{node}: decommissioning, {body['replicas_remaining']} replica(s) left; "
        f"moving now: {_parts(body.get('moving', []))}"
    ]
    blocked = body.get("blocked", [])
    if blocked:
        lines.append(f"blocked: {len(blocked)} partition(s) cannot move now:")
        lines += [f"  {b['topic']}/{b['partition']}: {b['reason']}" for b in blocked]
    return "\n".join(lines)


def controller_summary(body: dict[str, Any]) -> str:
    match = body["match_index"]
    # the leader's times (absent from a node of release 0.1.0, empty below raftlog.version 2)
    heard, caught_up = body.get("last_heard_ms", {}), body.get("caught_up_at_ms", {})
    now_ms = int(time.time() * 1000)

    def ago(at: int | None) -> str:
        return "never" if at is None else f"{max(0, now_ms - at) / 1000:.1f} s ago"

    lines = [f"leader {body['leader']} (term {body['term']}), commit index {body['commit_index']}"]
    for role, nodes in (("voter", body["voters"]), ("learner", body["learners"])):
        for node in nodes:
            progress = "" if node == body["leader"] else f"  match index {match.get(node, 0)}"
            if node != body["leader"] and heard:
                progress += f", heard {ago(heard.get(node))}, caught up {ago(caught_up.get(node))}"
            lines.append(f"  {node}  {role}{progress}")
    if body["pending"]:
        lines.append(f"no change may start yet: {body['pending']}")
    return "\n".join(lines)


def _config_value(text: str) -> Any:
    return int(text) if text.lstrip("-").isdigit() else text


def _configs_summary(configs: dict[str, Any]) -> str:
    return "\n".join(f"{k}={v}" for k, v in sorted(configs.items())) or "(defaults)"


ArgsWork = Callable[[RaftlogClient, argparse.Namespace], Awaitable[int]]
Call = Callable[[RaftlogClient, argparse.Namespace], Awaitable[Any]]


def printing(call: Call, summary: Callable[[Any], str]) -> ArgsWork:
    """The work of a command that prints one call's answer: its ``summary``, or its JSON with ``--json``."""

    async def work(client: RaftlogClient, args: argparse.Namespace) -> int:
        print_answer(args, await call(client, args), summary)
        return 0

    return work


def command_group(commands: Any, name: str, text: str) -> Any:
    """Add the command ``name`` (help ``text``) to ``commands``; its subcommands go on what this returns."""
    return commands.add_parser(name, help=text).add_subparsers(dest=f"{name}_command", required=True)


def runner(with_client: WithClient) -> Callable[[ArgsWork], Callable[[argparse.Namespace], int]]:
    """A command's ``run``: its work with a client for the parsed ``args``."""

    def run(work: ArgsWork) -> Callable[[argparse.Namespace], int]:
        return lambda args: with_client(args, lambda client: work(client, args))

    return run


def output_options() -> argparse.ArgumentParser:
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print the server's JSON answer")
    return output


def add_commands(
    commands: Any, topic_commands: Any, server: argparse.ArgumentParser, with_client: WithClient
) -> None:
    """Register the operator commands on ``commands`` (and ``topic config`` on ``topic_commands``)."""
    common = [server, output_options()]
    run = runner(with_client)

    cluster_sub = command_group(commands, "cluster", "cluster health and nodes")

    async def health(client: RaftlogClient, args: argparse.Namespace) -> int:
        body = await client.cluster.health()
        print_answer(args, body, health_summary)
        return 0 if body["is_healthy"] else 1

    cluster_sub.add_parser(
        "health",
        parents=common,
        help="controller, nodes down, failed replicas, leaderless and under-replicated partitions, disk "
        "(exit 1 if unhealthy)",
    ).set_defaults(run=run(health))

    cluster_sub.add_parser(
        "nodes", parents=common, help="every node: state, leaderships, disk, flags"
    ).set_defaults(run=run(printing(lambda client, args: client.cluster.nodes(), nodes_summary)))

    features_parser = cluster_sub.add_parser(
        "features",
        parents=common,
        help="finalized feature levels and each node's version and supported levels",
    )
    features_parser.set_defaults(
        run=run(printing(lambda client, args: client.cluster.features(), features_summary))
    )
    features_sub = features_parser.add_subparsers(dest="features_command")

    async def upgrade_features(client: RaftlogClient, args: argparse.Namespace) -> int:
        if (args.feature is None) != (args.level is None):
            print("raftlog: --feature and --level go together (neither: every feature)", file=sys.stderr)
            return 2
        if args.feature is not None:
            print_answer(
                args, await client.cluster.update_feature(args.feature, args.level), features_summary
            )
            return 0
        shown = await client.cluster.features()
        raised = every_level_up(shown)
        for feature, level in raised.items():  # the server refuses, naming the nodes, what one cannot read
            shown = await client.cluster.update_feature(feature, level)
        print_answer(args, shown, features_summary)
        if not raised and not args.json:
            print("every feature is at the highest level every node supports")
        return 0

    upgrade = features_sub.add_parser(
        "upgrade",
        parents=common,
        help="finalize every feature at the highest level every node supports, or one (--feature, --level); "
        "refused, naming them, while a node does not support it",
    )
    upgrade.add_argument("--feature", help="one feature, e.g. raftlog.version (default: every feature)")
    upgrade.add_argument("--level", type=int, help="the level to finalize it at")
    upgrade.set_defaults(run=run(upgrade_features))

    partition_sub = command_group(commands, "partition", "move replicas, transfer leadership")

    def partition_parser(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = partition_sub.add_parser(name, parents=common, help=text)
        parser.add_argument("topic")
        parser.add_argument("partition", type=int)
        return parser

    async def move(client: RaftlogClient, args: argparse.Namespace) -> int:
        replicas = [n.strip() for n in args.replicas.split(",") if n.strip()]
        print_answer(
            args, await client.cluster.move_replicas(args.topic, args.partition, replicas), move_summary
        )
        if not args.wait:
            return 0

        async def poll() -> dict[str, Any]:
            return await client.cluster.move_progress(args.topic, args.partition)

        return await _wait(args, poll, lambda body: body["move"] is None, move_summary)

    moving = partition_parser("move", "move a partition to a new replica set, one member at a time")
    moving.add_argument(
        "--replicas", required=True, help="the new replica set, e.g. n1,n3,n4 (first: preferred leader)"
    )
    _wait_options(moving)
    moving.set_defaults(run=run(move))

    status = printing(
        lambda client, args: client.cluster.move_progress(args.topic, args.partition), move_summary
    )
    partition_parser("status", "a partition's replicas and its move in progress").set_defaults(
        run=run(status)
    )

    describe = printing(
        lambda client, args: client.cluster.partition_state(args.topic, args.partition), partition_summary
    )
    partition_parser(
        "describe", "a partition as its leader sees it: offsets, each replica's lag"
    ).set_defaults(run=run(describe))

    cancel = printing(
        lambda client, args: client.cluster.cancel_move(args.topic, args.partition), move_summary
    )
    partition_parser("cancel", "cancel a move: back to the original replicas").set_defaults(run=run(cancel))

    async def transfer(client: RaftlogClient, args: argparse.Namespace) -> int:
        body = await client.cluster.transfer_leadership(args.topic, args.partition, args.target)
        print_answer(args, body, lambda b: f"{b['topic']}/{b['partition']}: leader is now {b['leader']}")
        return 0

    transferring = partition_parser("transfer", "hand a partition's leadership to another replica")
    transferring.add_argument("--target", help="node id of a replica (default: the most caught-up one)")
    transferring.set_defaults(run=run(transfer))

    node_sub = command_group(commands, "node", "decommission, recommission, maintenance")

    def node_parser(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = node_sub.add_parser(name, parents=common, help=text)
        parser.add_argument("node_id")
        return parser

    async def decommission(client: RaftlogClient, args: argparse.Namespace) -> int:
        print_answer(args, await client.cluster.decommission(args.node_id), decommission_summary)
        if not args.wait:
            return 0

        async def poll() -> dict[str, Any]:
            return await client.cluster.decommission_status(args.node_id)

        return await _wait(args, poll, lambda body: bool(body["done"]), decommission_summary)

    decommissioning = node_parser("decommission", "move every replica off a node")
    _wait_options(decommissioning)
    decommissioning.set_defaults(run=run(decommission))

    progress = printing(
        lambda client, args: client.cluster.decommission_status(args.node_id), decommission_summary
    )
    node_parser("status", "progress of a decommission").set_defaults(run=run(progress))

    recommission = printing(
        lambda client, args: client.cluster.recommission(args.node_id), decommission_summary
    )
    node_parser("recommission", "stop a decommission; its moves turn around").set_defaults(
        run=run(recommission)
    )

    async def maintenance(client: RaftlogClient, args: argparse.Namespace) -> int:
        body = await client.cluster.set_maintenance(args.node_id, not args.off)
        print_answer(
            args,
            body,
            lambda b: (
                f"{b['node_id']}: maintenance {'on: leadership drains away' if b['maintenance'] else 'off'}"
            ),
        )
        return 0

    maintaining = node_parser("maintenance", "drain a node's leadership and keep it away (--off to end)")
    maintaining.add_argument("--off", action="store_true", help="end maintenance: the node may lead again")
    maintaining.set_defaults(run=run(maintenance))

    controller_sub = command_group(
        commands, "controller", "the controller group: describe, add, remove voters"
    )
    controller_sub.add_parser(
        "describe", parents=common, help="leader, voters, learners joining and each member's match index"
    ).set_defaults(run=run(printing(lambda client, args: client.cluster.controller(), controller_summary)))

    async def add_voter(client: RaftlogClient, args: argparse.Namespace) -> int:
        print_answer(args, await client.cluster.add_controller_voter(args.node_id), controller_summary)
        if not args.wait:
            return 0
        return await _wait(
            args, client.cluster.controller, lambda b: args.node_id in b["voters"], controller_summary
        )

    adding = controller_sub.add_parser(
        "add", parents=common, help="add a node to the controller group: a learner, a voter once caught up"
    )
    adding.add_argument("node_id")
    _wait_options(adding)
    adding.set_defaults(run=run(add_voter))

    remove_voter = printing(
        lambda client, args: client.cluster.remove_controller_voter(args.node_id), controller_summary
    )
    removing = controller_sub.add_parser(
        "remove", parents=common, help="remove a node from the controller group (it then follows it)"
    )
    removing.add_argument("node_id")
    removing.set_defaults(run=run(remove_voter))

    async def config(client: RaftlogClient, args: argparse.Namespace) -> int:
        if args.set:
            configs = await client.cluster.alter_topic_configs(
                args.name, {k: _config_value(v) for k, v in args.set}
            )
        else:
            configs = await client.cluster.topic_configs(args.name)
        print_answer(args, configs, _configs_summary)
        return 0

    configuring = topic_commands.add_parser(
        "config", parents=common, help="show a topic's configs, or change some live with --set KEY=VALUE"
    )
    configuring.add_argument("name")
    configuring.add_argument("--set", action="append", type=config_pair, default=[], metavar="KEY=VALUE")
    configuring.set_defaults(run=run(config))


def _wait_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true", help="print progress until it is done")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="give up waiting after this many seconds (exit 1)"
    )


async def _wait(
    args: argparse.Namespace,
    poll: Callable[[], Awaitable[dict[str, Any]]],
    done: Callable[[dict[str, Any]], bool],
    summary: Callable[[Any], str],
) -> int:
    """Poll until ``done``; print each new state. Exit status 1 when ``--timeout`` passes first."""
    deadline = time.monotonic() + args.timeout
    shown = None
    while time.monotonic() < deadline:
        body = await poll()
        line = summary(body)
        if line != shown:
            print(json.dumps(body) if args.json else line, flush=True)
            shown = line
        if done(body):
            return 0
        await asyncio.sleep(WAIT_POLL_S)
    print(f"raftlog: not done after {args.timeout:g} s (it goes on in the background)", file=sys.stderr)
    return 1
