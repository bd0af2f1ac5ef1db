"""The ``raftlog`` command line. Subcommands grow with the product; each one is real or absent.

It sits above everything it starts or talks to: ``serve`` and ``dev`` run the server (``raftlog_node.serve``,
``raftlog_dev``), ``bench`` the benchmarks (``raftlog_bench``), the cluster commands the client
(``raftlog_client``); ``log`` reads a partition's directory, compares replicas, or migrates a stopped
node's logs, with the storage engine (``log_command``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import raftlog
from raftlog_cli import acls as cli_acls
from raftlog_cli import admin as cli_admin
from raftlog_cli import completion, log_command, profile, records, topics
from raftlog_cli import groups as cli_groups
from raftlog_cli import shares as cli_shares
from raftlog_cli import transactions as cli_transactions
from raftlog_cli import users as cli_users
from raftlog_cli.arguments import header_pair, non_negative, positive
from raftlog_client.client import GroupConsumer, Message, ProduceFailed, RaftlogClient
from raftlog_client.errors import ClientError, RequestFailed, Unavailable
from raftlog_contract import FENCED_CODES
from raftlog_node import logs


def _dev(args: argparse.Namespace) -> int:
    from raftlog_dev import dev

    return dev.main(args)


def _serve(args: argparse.Namespace) -> int:
    from raftlog_node import serve

    return serve.main(args)


# -- commands that talk to a running cluster over HTTP --------------------------------------------------


def _client(args: argparse.Namespace, target: profile.Target) -> RaftlogClient:
    servers = [s.strip() for s in target.server.split(",") if s.strip()]
    # a command fails at once when no server accepts a connection (two rounds), not after seconds of backoff
    return RaftlogClient(
        servers,
        admin_token=target.token,
        user=target.user,
        user_token=target.user_token,
        retries=args.retries,
        unreachable_rounds=2,
        ca=target.ca,
    )


def _with_client(args: argparse.Namespace, work: Callable[[RaftlogClient], Awaitable[int]]) -> int:
    try:
        target = profile.resolve(args)
    except profile.ProfileError as exc:
        print(f"raftlog: {exc}", file=sys.stderr)
        return 2

    async def run() -> int:
        async with _client(args, target) as client:
            return await work(client)

    try:
        return asyncio.run(run())
    except ProduceFailed as exc:
        for result in exc.results:
            print(_produced_line(args, result))
        print(f"raftlog: {exc}", file=sys.stderr)
        return 1
    except RequestFailed as exc:
        print(f"raftlog: {exc.message} (HTTP {exc.status}, error_code {exc.error_code})", file=sys.stderr)
        return 1
    except Unavailable as exc:
        print(
            f"raftlog: {exc}\n  is a cluster running at {target.server}? (raftlog dev status; --server or "
            "$RAFTLOG_SERVER name another)",
            file=sys.stderr,
        )
        return 2
    except ClientError as exc:
        print(f"raftlog: {exc}", file=sys.stderr)
        return 2


def _produced_line(args: argparse.Namespace, result: Any) -> str:
    """One produced record: ``TOPIC/PARTITION offset N`` (or its error), a JSON object with ``--json``."""
    if isinstance(result, RequestFailed):
        if args.json:
            return json.dumps({"error_code": result.error_code, "error": result.message})
        return f"{args.topic}: not produced: {result.message} (error_code {result.error_code})"
    if args.json:
        return json.dumps({"partition": result.partition, "offset": result.offset})
    return f"{args.topic}/{result.partition} offset {result.offset}"


def _produce(args: argparse.Namespace) -> int:
    """One record per ``--value``, one tombstone (null value) with ``--tombstone``, or one per line of
    stdin as lines come (``records.produce_stdin``); each with ``--key`` (or the key before ``-K``'s
    separator), the ``--header`` pairs and ``--timestamp``."""
    headers = [(name, None if value is None else value) for name, value in args.header]
    if args.tombstone and (args.value or args.key is None):
        raise SystemExit("raftlog: --tombstone produces one null value for --key (and takes no --value)")
    if args.key_separator == "":
        raise SystemExit("raftlog: -K/--key-separator needs at least one character")

    def emit(produced: Any) -> None:
        print(_produced_line(args, produced), flush=True)

    async def work(client: RaftlogClient) -> int:
        if not args.tombstone and not args.value:
            await records.produce_stdin(client, args, headers, emit)
            return 0
        values: list[str | None] = [None] if args.tombstone else list(args.value)
        messages = [
            Message(v, key=args.key, headers=headers, partition=args.partition, timestamp_ms=args.timestamp)
            for v in values
        ]
        for start in range(0, len(messages), args.batch):
            for produced in await client.produce(args.topic, messages[start : start + args.batch]):
                emit(produced)
        return 0

    return _with_client(args, work)


def _consume(args: argparse.Namespace) -> int:
    """Records of one partition (``--partition``) or of all, as JSON lines or ``--format``; from the
    beginning unless told (``--offset``, ``--timestamp``), as kcat. Stops at the end unless ``--follow``
    (then at ``--max`` records, or on Ctrl-C)."""
    if args.json and args.format is not None:
        raise SystemExit("raftlog: consume prints JSON lines (--json) or --format, not both")
    if args.group is not None:
        return _consume_group(args)
    start = records.Start("beginning") if args.from_beginning or args.offset is None else args.offset
    emit = records.printer(args.format)

    async def work(client: RaftlogClient) -> int:
        if args.partition is not None:
            partitions = [args.partition]
        else:
            partitions = [p["partition"] for p in await client.partitions(args.topic)]  # DESCRIBE is enough
        starts = {}
        for partition in partitions:
            if args.timestamp is not None:
                found = await client.offset_for_timestamp(args.topic, partition, args.timestamp)
                end = (await client.offsets(args.topic, partition))[1]
                starts[partition] = end if found is None else found[0]
            else:
                starts[partition] = await records.start_offset(client, args.topic, partition, start)
        await records.consume_partitions(
            client, args.topic, starts, follow=args.follow, max_records=args.max, emit=emit
        )
        return 0

    return _with_client(args, work)


def _consume_group(args: argparse.Namespace) -> int:
    """As a member of a consumer group: the partitions the group assigns, from the group's committed
    offsets (else the log start with --from-beginning, else the end); each printed batch is committed.
    Without --follow it stops at the first empty poll."""

    emit = records.printer(args.format)

    async def work(client: RaftlogClient) -> int:
        reset = "earliest" if args.from_beginning else "latest"
        consumer = GroupConsumer(client, args.group, offset_reset=reset, name_prefix="cli")
        await consumer.start([args.topic])
        printed = 0
        try:
            while args.max is None or printed < args.max:
                records = await consumer.poll(timeout_ms=1000 if args.follow else 500)
                if not records and not args.follow:
                    break
                wanted = records if args.max is None else records[: args.max - printed]
                for record in wanted:
                    emit(record)
                printed += len(wanted)
                done = {(r.topic, r.partition): r.offset + 1 for r in wanted}
                try:
                    await consumer.commit(done)
                except RequestFailed as exc:
                    if exc.error_code not in FENCED_CODES:
                        raise
        finally:
            await consumer.close()
        return 0

    return _with_client(args, work)


def _server_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    profile.add_options(options)
    options.add_argument(
        "--retries",
        type=non_negative,
        default=8,
        help="retries on 503 or an unreachable server, with backoff (default 8)",
    )
    return options


def _add_cluster_commands(commands: Any) -> None:
    server = _server_options()
    topic = commands.add_parser("topic", help="create, list, describe, delete and configure topics")
    topic_sub = topic.add_subparsers(dest="topic_command", required=True)
    common = [server, cli_admin.output_options()]
    topics.add_commands(commands, topic_sub, common, _with_client)

    produce = commands.add_parser(
        "produce",
        parents=common,
        help="produce --value V (repeatable) or one record per stdin line; prints each record's offset",
    )
    produce.add_argument("topic")
    produce.add_argument("--value", action="append", help="a record value (repeat for several)")
    produce.add_argument("--key", help="record key (UTF-8); records with a key go to murmur2(key)")
    produce.add_argument("--partition", type=non_negative, help="send every record to this partition")
    produce.add_argument("--batch", type=positive, default=500, help="records per request (default 500)")
    produce.add_argument("--tombstone", action="store_true", help="produce one null value for --key")
    produce.add_argument(
        "--header", action="append", type=header_pair, default=[], metavar="NAME[=VALUE]",
        help="a header on every record (repeatable); NAME alone: a null value",
    )  # fmt: skip
    produce.add_argument(
        "--timestamp", type=non_negative, metavar="MS", help="CreateTime of every record (default: now)"
    )
    produce.add_argument(
        "-K", "--key-separator", metavar="SEP",
        help="stdin: each line is KEY SEP VALUE, split at the first SEP (a line without it has no key)",
    )  # fmt: skip
    produce.add_argument(
        "--linger-ms", type=non_negative, default=records.LINGER_MS_DEFAULT,
        help="stdin: send a line at most this long after it came, with those after it "
        f"(default {records.LINGER_MS_DEFAULT})",
    )  # fmt: skip
    produce.set_defaults(run=_produce)

    consume = commands.add_parser(
        "consume",
        parents=common,
        help="print a partition's (or a group member's) records as JSON lines (--json), or as --format",
    )
    consume.add_argument("topic")
    consume.add_argument("--partition", type=non_negative, help="one partition (default: all of them)")
    consume.add_argument("--group", help="consume as a member of this consumer group (commits as it prints)")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start offset")
    start.add_argument(
        "--offset", type=records.parse_start, metavar="N|-N|beginning|end",
        help="start at offset N, N records before the end (-N), the beginning (default) or the end",
    )  # fmt: skip
    start.add_argument(
        "--timestamp", type=non_negative, metavar="MS",
        help="start at the first record whose timestamp is at or after MS (the end when none is)",
    )  # fmt: skip
    consume.add_argument("--max", type=positive, help="stop after this many records")
    consume.add_argument("--follow", action="store_true", help="wait for new records (until --max or Ctrl-C)")
    consume.add_argument(
        "--format", type=records.check_format, metavar="FMT",
        help="print each record as FMT (kcat's -f): %%t topic, %%p partition, %%o offset, %%T timestamp, "
        "%%k key, %%s value, %%K/%%S their lengths, %%h headers; \\n \\t (default: JSON lines)",
    )  # fmt: skip
    consume.set_defaults(run=_consume)

    cli_admin.add_commands(commands, topic_sub, server, _with_client)
    cli_groups.add_commands(commands, server, _with_client)
    cli_shares.add_commands(commands, server, _with_client)
    cli_users.add_commands(commands, server, _with_client)
    cli_acls.add_commands(commands, server, _with_client)
    cli_transactions.add_commands(commands, server, _with_client)


# Commands whose arguments come from the server or the benchmarks, which take long to import: a parser
# built for another command only names them (``raftlog --help`` lists them all).
HEAVY_COMMANDS = {
    "dev": "run a local cluster on 127.0.0.1, one process per node; or stop, start or restart one of its "
    "nodes (raftlog dev restart n3)",
    "serve": "run one node (HTTP API, Raft groups, storage)",
    "format": "prepare a new node's data directory to form a cluster at a release's feature levels "
    "(kafka-storage format --release-version)",
    "bench": "benchmarks that print numbers",
}
EVERY_COMMAND = "*"  # build_parser's command for a parser with every command's arguments (completion)


def build_parser(command: str = EVERY_COMMAND) -> argparse.ArgumentParser:
    """The parser of every command; with ``command``, one whose heavy commands other than that one are
    named without their arguments (they are not imported)."""
    parser = argparse.ArgumentParser(
        prog="raftlog", description="A Raft-replicated, Kafka-style log service."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument("--version", action="version", version=f"raftlog {raftlog.version()}")
    before = parser.add_argument_group("where the cluster commands connect (before or after the command)")
    for name in CONNECTION_OPTIONS:
        before.add_argument(
            f"--{name}", dest=f"{name}_before", metavar=name.upper(), help=f"see --{name} of a command"
        )
    commands = parser.add_subparsers(dest="command", required=True)

    log_command.add_commands(commands)
    builders = {"dev": _add_dev, "serve": _add_serve, "format": _add_format, "bench": _add_bench}
    for name, help_text in HEAVY_COMMANDS.items():
        subparser = commands.add_parser(name, help=help_text)
        if command in (EVERY_COMMAND, name):
            builders[name](subparser)
    _add_cluster_commands(commands)
    completion.add_command(commands, parser)
    return parser


def _add_dev(dev: argparse.ArgumentParser) -> None:
    from raftlog_dev import dev as dev_module

    dev_module.add_arguments(dev)
    dev.set_defaults(run=_dev)


def _add_serve(serve: argparse.ArgumentParser) -> None:
    from raftlog_node import options

    options.add_arguments(serve)
    serve.set_defaults(run=_serve)


def _add_format(format_parser: argparse.ArgumentParser) -> None:
    from raftlog_node import format as format_module

    format_module.add_arguments(format_parser)
    format_parser.set_defaults(run=format_module.main)


def _add_bench(bench: argparse.ArgumentParser) -> None:
    from raftlog_bench import (
        cluster,
        codec,
        compaction,
        curve,
        fetches,
        gossip,
        kafka_tools,
        leaders,
        perf,
        scale,
        storage,
    )

    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    for module in (
        storage,
        codec,
        compaction,
        cluster,
        perf,
        scale,
        curve,
        gossip,
        leaders,
        fetches,
        kafka_tools,
    ):  # each: DESCRIPTION, options, run; a module's underscores are the command's dashes (kafka-tools)
        name = module.__name__.rpartition(".")[2].replace("_", "-")
        command = bench_sub.add_parser(name, help=module.DESCRIPTION)
        module.add_arguments(command)
        command.set_defaults(run=module.run_from_args)


# a cluster command's connection options, taken before the command too (``raftlog --server URL topic list``)
CONNECTION_OPTIONS = ("server", "profile", "user", "ca")


def _connection_before(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """An option given before the command is the command's own, unless given after it as well (the
    later wins, as for any repeated option); refused before a command that connects nowhere."""
    for name in CONNECTION_OPTIONS:
        value = getattr(args, f"{name}_before")
        delattr(args, f"{name}_before")
        if value is None:
            continue
        if not hasattr(args, name):
            parser.error(f"--{name} goes with a command that connects to a cluster, not {args.command}")
        if getattr(args, name) is None:
            setattr(args, name, value)


def _command_of(argv: Sequence[str]) -> str:
    """The command a command line names (its first word that is not an option), or EVERY_COMMAND for
    ``completion``, which writes every command's options. A line naming none (``raftlog --help``) builds
    no heavy command's arguments: the list of commands imports neither the server nor the benchmarks."""
    words = [word for word in argv if not word.startswith("-")]
    if not words:
        return ""
    return words[0] if words[0] != "completion" else EVERY_COMMAND


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_of(words))
    args = parser.parse_args(words)
    _connection_before(parser, args)
    logs.configure(args.verbose)
    try:
        result: int = args.run(args)
    except KeyboardInterrupt:  # Ctrl-C: stop quietly, as a shell command does
        return 130
    except BrokenPipeError:
        return 0
    except FileNotFoundError as exc:
        print(f"raftlog: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
