"""Each test file's cost in seconds (its tests' set-up, call and tear-down summed), kept in
``file_costs.json`` beside this file, from a JUnit report of a whole run:

    .venv/bin/python -m pytest -n 4 --dist loadfile --no-loadscope-reorder --junitxml=run.xml
    .venv/bin/python tests/file_costs.py run.xml

``tests/conftest.py`` hands the files to the workers dearest first (so the last ones to finish are
short and the workers end together; a folder of SHARED_SESSION_FOLDERS goes to one worker whole), and
``--files-under SECONDS`` (``make unit-fast``) keeps the cheap files only. A file the table does not know
yet counts as ``UNKNOWN_S`` in the order, and stays in the cheap tier (it is likely the one being worked
on)."""

from __future__ import annotations

import functools
import json
import pathlib
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

TABLE = pathlib.Path(__file__).with_name("file_costs.json")
UNKNOWN_S = 10.0


def load() -> dict[str, float]:
    """``tests/x/test_y.py`` -> seconds; empty when the table is missing or unreadable."""
    try:
        table = json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(path): float(seconds) for path, seconds in table.items()}


# Folders whose tests share session fixtures that cost much to start (Apache Kafka's cluster beside
# raftlog's, the SparkSession and its cluster, the console's two clusters, the registry's cluster): one
# worker takes each folder whole, so those start once per run instead of once on each worker, and end when
# the worker leaves the folder (``folder_scope.py``).
SHARED_SESSION_FOLDERS = ("tests/kafka_reference/", "tests/spark/", "tests/console/", "tests/registry/")


# A folder's files that ask for a fixture it shares (``folder_scope``) but not all its files: one worker
# takes those files together, so the shared cluster starts once per run and ends when they are done, where
# it started on every worker that ran one of them and idled there until the run's end (the Kafka tests'
# cluster: six clusters, 4,200 node-seconds of a run). The folder's other files go with their own file.
SHARED_FIXTURE_FILES = {"tests/kafka_api/": "kafka_cluster"}
ROOT = TABLE.parent.parent


@functools.cache
def _asks_for(path: str, fixture: str) -> bool:
    """Whether the test file at ``path`` (from the checkout's root) names ``fixture``."""
    try:
        return re.search(rf"\b{re.escape(fixture)}\b", (ROOT / path).read_text(encoding="utf-8")) is not None
    except OSError:
        return False


def scope_of(nodeid: str) -> str:
    """The unit a worker takes whole: the test's folder when it is one of SHARED_SESSION_FOLDERS, the files
    of a SHARED_FIXTURE_FILES folder that ask for its fixture (named ``FOLDER[FIXTURE]``), else its file
    (``--dist loadfile``)."""
    path = nodeid.split("::", 1)[0]
    folder = next((folder for folder in SHARED_SESSION_FOLDERS if path.startswith(folder)), None)
    if folder is not None:
        return folder
    for folder, fixture in SHARED_FIXTURE_FILES.items():
        if path.startswith(folder) and _asks_for(path, fixture):
            return f"{folder}[{fixture}]"
    return path


def schedule(
    items: list[T], path_of: Callable[[T], str], costs: dict[str, float], under: float | None = None
) -> tuple[list[T], list[T]]:
    """The items to run, the units a worker takes whole dearest first (a shared folder costs what its files
    cost together, and its files go dearest first within it; a file's items keep their order), and those
    left out: the items of units that cost ``under`` seconds or more in the table, when ``under`` is given.
    (A folder that ran at the place of its dearest file could start late and end the run alone.)"""

    def cost(item: T) -> float:
        return costs.get(path_of(item), UNKNOWN_S)

    units: defaultdict[str, float] = defaultdict(float)  # a unit of several files costs what they do
    for path, seconds in costs.items():
        units[scope_of(path)] += seconds

    def measured(item: T) -> float:
        return units.get(scope_of(path_of(item)), 0.0)

    def order(item: T) -> tuple[float, float]:
        return -max(measured(item), cost(item)), -cost(item)

    def dear(item: T) -> bool:  # a file not measured yet stays: it is likely the one being worked on
        if under is None:
            return False
        # a shared folder's cheap file still starts its dear neighbours' cluster (Kafka's, Spark's); a
        # file sharing a raftlog cluster with others stays in the fast tier by its own cost
        path = path_of(item)
        return (measured(item) if scope_of(path).endswith("/") else costs.get(path, 0.0)) >= under

    kept = [item for item in items if not dear(item)]
    dropped = [item for item in items if dear(item)]
    return sorted(kept, key=order), dropped  # sorted is stable


def from_junit(report: pathlib.Path) -> dict[str, float]:
    """Seconds per test file of a pytest JUnit report (classname ``tests.x.test_y[.Class]``)."""
    costs: defaultdict[str, float] = defaultdict(float)
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        parts = [part for part in case.get("classname", "").split(".") if not part[:1].isupper()]
        costs["/".join(parts) + ".py"] += float(case.get("time") or 0.0)
    return {path: round(seconds, 1) for path, seconds in sorted(costs.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/file_costs.py JUNIT.xml", file=sys.stderr)
        return 2
    costs = from_junit(pathlib.Path(argv[0]))
    TABLE.write_text(json.dumps(costs, indent=1) + "\n", encoding="utf-8")
    print(f"{len(costs)} files, {sum(costs.values()):.0f} s summed -> {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
