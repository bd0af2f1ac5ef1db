"""Each test file's CPU seconds: the worker's own (exact: the tests' own code, in-process nodes, property
tests) and its reaped children's (nodes, JVMs, browsers, the fault harness: every process a test starts
and waits for, with their own children), summed over the file's tests. The suite's time on two cores is
its CPU over two, so this says what a file costs the suite where ``file_costs.py`` (wall time, on a
shared machine) cannot:

    .venv/bin/python -m pytest -n 6 --dist loadfile --no-loadscope-reorder --cpu-costs /tmp/cpu
    .venv/bin/python tests/cpu_costs.py /tmp/cpu [--most 40]

A child still running when its test ends is counted with the test that reaps it (a session fixture's
cluster: the file that ends the session; the worker's node fork server, with every node it forked: the
file during which it is reaped), one never reaped not at all: the reaped column is a lower bound for
most files and a lump for a few; ``scripts/suite_cpu.py --json`` names each process's CPU instead."""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import resource
import sys

import pytest

_state: dict[str, object] = {}


def _cpu_s() -> tuple[float, float]:
    """(the worker's own CPU seconds, those of the children it reaped)."""
    own, reaped = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-costs",
        default=None,
        metavar="PREFIX",
        help="write each test file's CPU seconds (worker and reaped children) to PREFIX.<worker>.json",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    prefix = session.config.getoption("--cpu-costs", None)
    if prefix:
        _state.update(
            prefix=prefix, last=_cpu_s(), worker=collections.Counter(), reaped=collections.Counter()
        )


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    if "prefix" not in _state:
        return
    now, last = _cpu_s(), _state["last"]
    assert isinstance(last, tuple)
    path = nodeid.split("::", 1)[0]
    for kind, used in (("worker", now[0] - last[0]), ("reaped", now[1] - last[1])):
        files = _state[kind]
        assert isinstance(files, collections.Counter)
        files[path] += used
    _state["last"] = now


def pytest_sessionfinish(session: pytest.Session) -> None:
    if "prefix" not in _state:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = pathlib.Path(f"{_state['prefix']}.{worker}.json")
    path.write_text(json.dumps({kind: dict(_state[kind]) for kind in ("worker", "reaped")}, indent=1))  # type: ignore[call-overload]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prefix")
    parser.add_argument("--most", type=int, default=40)
    args = parser.parse_args(argv)
    prefix = pathlib.Path(args.prefix)
    worker: collections.Counter[str] = collections.Counter()
    reaped: collections.Counter[str] = collections.Counter()
    for part in sorted(prefix.parent.glob(prefix.name + ".*.json")):
        written = json.loads(part.read_text())
        worker.update(written["worker"])
        reaped.update(written["reaped"])
    files = worker + reaped
    total = sum(files.values())
    print(
        f"{total:,.0f} CPU s in {len(files)} files: the workers' own {sum(worker.values()):,.0f}, reaped "
        f"children {sum(reaped.values()):,.0f}"
    )
    print("   total share   worker   reaped  file")
    for path, seconds in files.most_common(args.most):
        print(f"{seconds:8.1f} {100 * seconds / total:5.1f}% {worker[path]:8.1f} {reaped[path]:8.1f}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
