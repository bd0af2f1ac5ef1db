"""Scripted tests in the manner of etcd raft's datadriven files: a script is a text file of cases, each a
command line, a ``----`` line and the output expected of it, ended by a blank line::

    # a comment: lines starting with # (and blank lines) between cases are skipped
    vote from=n2 term=3 last=5/2
    ----
    step down to follower
    persist term 3, vote n2

:func:`run_script` hands each case to a handler (``handle(case) -> output``), which keeps whatever state
the script builds from one case to the next, and compares the output with the expected one, line by line
after stripping trailing spaces. Every mismatch of the file is reported at once, with its line number.
With ``RAFTLOG_REWRITE_SCRIPTS=1`` in the environment, the file is written back with the outputs the
handler gave instead (read the diff before committing it).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable
from dataclasses import dataclass, field

SEPARATOR = "----"
REWRITE_VARIABLE = "RAFTLOG_REWRITE_SCRIPTS"


@dataclass(frozen=True)
class Case:
    """One command of a script: ``name positional... key=value...`` at ``line`` of the file."""

    line: int
    text: str
    name: str
    positional: tuple[str, ...]
    arguments: dict[str, str]
    expected: str
    end: int = field(compare=False)  # the line after the expected output (its blank line or the file's end)

    def argument(self, key: str, default: str | None = None) -> str:
        value = self.arguments.get(key, default)
        if value is None:
            raise ScriptError(f"line {self.line}: {self.name} needs {key}=")
        return value


class ScriptError(Exception):
    """A script that cannot be read or run as written (not a wrong output: that is an AssertionError)."""


def parse(text: str) -> list[Case]:
    lines = text.splitlines()
    cases = []
    position = 0
    while position < len(lines):
        command = lines[position].strip()
        if not command or command.startswith("#"):
            position += 1
            continue
        line = position + 1
        if position + 1 >= len(lines) or lines[position + 1].strip() != SEPARATOR:
            raise ScriptError(f"line {line}: {command!r} is not followed by {SEPARATOR!r}")
        end = position + 2
        while end < len(lines) and lines[end].strip():
            end += 1
        name, *tokens = command.split()
        positional = tuple(token for token in tokens if "=" not in token)
        arguments = dict(token.split("=", 1) for token in tokens if "=" in token)
        expected = "\n".join(row.rstrip() for row in lines[position + 2 : end])
        cases.append(Case(line, command, name, positional, arguments, expected, end))
        position = end
    return cases


def run_script(path: pathlib.Path, handle: Callable[[Case], str]) -> None:
    """Run every case of the script at ``path`` through ``handle``; AssertionError naming each case whose
    output differs from the expected one (or, rewriting, the file written with the actual outputs)."""
    text = path.read_text(encoding="utf-8")
    cases = parse(text)
    if not cases:
        raise ScriptError(f"{path}: no cases")
    mismatches = []
    actual_outputs = []
    for case in cases:
        actual = "\n".join(row.rstrip() for row in handle(case).strip("\n").splitlines())
        actual_outputs.append(actual)
        if actual != case.expected:
            mismatches.append(
                f"{path.name}:{case.line}: {case.text}\n--- expected\n{case.expected}\n--- got\n{actual}"
            )
    if mismatches and os.environ.get(REWRITE_VARIABLE) == "1":
        path.write_text(_rewritten(text, cases, actual_outputs), encoding="utf-8")
        return
    assert not mismatches, "\n\n".join(mismatches)


def _rewritten(text: str, cases: list[Case], outputs: list[str]) -> str:
    lines = text.splitlines()
    for case, output in sorted(zip(cases, outputs, strict=True), key=lambda pair: -pair[0].line):
        lines[case.line + 1 : case.end] = output.splitlines()
    return "\n".join(lines) + "\n"
