"""What every benchmark prints: its table for people, or with ``--json`` its results as JSON, the CLI's one
convention (``raftlog ... --json`` prints the machine-readable answer on stdout). ``--json FILE`` keeps the
table on stdout and writes the JSON to FILE as well (a results file for later comparison)."""

from __future__ import annotations

import json
import sys
from typing import Any

STDOUT = "-"


def say(message: str) -> None:
    """A progress line, on stderr: stdout carries only the table or the JSON."""
    print(message, file=sys.stderr, flush=True)


def emit(json_option: str | None, table: str, results: Any) -> None:
    """The table on stdout, or the JSON (``--json``: the table goes to stderr, so a pipe gets JSON only),
    and the JSON to a file (``--json FILE``)."""
    if json_option == STDOUT:
        print(table, file=sys.stderr, flush=True)
        print(json.dumps(results, indent=2), flush=True)
        return
    print(table, flush=True)
    if json_option is not None:
        with open(json_option, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
            out.write("\n")
