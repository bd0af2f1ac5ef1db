"""The command line every benchmark shares: each runs on its own (``python -m raftlog_bench.NAME``) with
the parser ``standalone_parser`` builds from its ``add_arguments``, which ``raftlog_cli`` registers too;
the options several benchmarks take (``--json``, ``--dir``, ``--wait-quiet``, lists of sizes) are
declared here once."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from raftlog_bench.output import STDOUT

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Config = TypeVar("Config", bound="DataclassInstance")


def standalone_parser(
    name: str, description: str, add_arguments: Callable[[argparse.ArgumentParser], None]
) -> argparse.ArgumentParser:
    """The parser of ``raftlog bench NAME`` run without the ``raftlog`` command: the benchmark's
    ``add_arguments``, the options ``raftlog_cli`` registers for it."""
    parser = argparse.ArgumentParser(prog=f"raftlog bench {name}", description=description)
    add_arguments(parser)
    return parser


def refused(name: str, problem: str) -> int:
    """``raftlog bench NAME``'s options refused: why, on stderr, and the exit status of a usage error (2)."""
    print(f"raftlog bench {name}: {problem}", file=sys.stderr)
    return 2


def config_of(cls: type[Config], args: argparse.Namespace, **computed: object) -> Config:
    """``cls`` (a dataclass) from the parsed options: a field takes the option whose ``dest`` is its name,
    unless ``computed`` gives it (renamed, converted or derived); a field neither gives keeps its default."""
    given = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if f.init and hasattr(args, f.name)
    }
    return cls(**(given | computed))


def add_json_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--json", nargs="?", const=STDOUT, default=None, metavar="FILE",
        help=f"print {what} as JSON instead of the table; with FILE: the table, and the JSON to FILE too",
    )  # fmt: skip


def add_dir_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--dir``: where the benchmark creates ``what``; ``args.dir`` is an absolute path, the current
    directory unless given."""
    parser.add_argument(
        "--dir", type=os.path.abspath, default=os.curdir,
        help=f"where to create {what} (default: the current directory)",
    )  # fmt: skip


def add_wait_quiet_argument(parser: argparse.ArgumentParser, when: str) -> None:
    """``--wait-quiet S``: ``when`` (before each cell, each phase...) the benchmark calls
    ``raftlog_bench.cpu.wait_quiet(S)``; 0, the default, skips it."""
    parser.add_argument(
        "--wait-quiet", type=float, default=0.0, metavar="S",
        help=f"{when} write out dirty pages (sync) and wait up to S seconds until other processes use"
        " < 25%% of a core (default 0)",
    )  # fmt: skip


def add_grid_arguments(
    parser: argparse.ArgumentParser, record_sizes: tuple[int, ...], batch_sizes: tuple[int, ...], batch: str
) -> None:
    """``--record-sizes`` and ``--batch-sizes``: the grid of cells a benchmark measures, bytes per record
    by records per ``batch`` (an append, a request), with their defaults."""
    parser.add_argument(
        "--record-sizes", type=positive_ints, default=record_sizes,
        help=f"bytes per record (default {_listed(record_sizes)})",
    )  # fmt: skip
    parser.add_argument(
        "--batch-sizes", type=positive_ints, default=batch_sizes,
        help=f"records per {batch} (default {_listed(batch_sizes)})",
    )  # fmt: skip


def _listed(values: tuple[int, ...]) -> str:
    return ",".join(str(value) for value in values)


def positive_ints(text: str, maximum: int | None = None) -> tuple[int, ...]:
    """A comma-separated list of integers >= 1, and <= ``maximum`` if given (an argparse type shared by
    the benchmarks)."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be >= 1")
    if maximum is not None and any(value > maximum for value in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be <= {maximum}")
    return values
