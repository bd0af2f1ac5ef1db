"""Parallel test workers (``pytest -n 2`` or more, pytest-xdist) choose ports side by side: each worker, and
every process it starts, takes its own part of the range ``raftlog_dev.layout.free_port`` chooses from, so
two workers' clusters never pick the same port between the check and the bind.

The files run dearest first (``file_costs.py``; with ``--dist loadfile --no-loadscope-reorder`` the workers
take them in that order, so all end together on short files; the folders whose tests share a costly
session fixture go to one worker whole), and ``--files-under SECONDS`` keeps only
the files that cost less (``make unit-fast``).

Each worker runs a node fork server (``node_forks.py``), so its nodes start without importing the node."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import cpu_costs
import file_costs  # tests/ is on the path: pytest puts a conftest's folder there
import node_forks
import pytest
from cpu_costs import pytest_runtest_logfinish, pytest_sessionfinish, pytest_sessionstart  # noqa: F401  (hooks)
from hang_report import pytest_runtest_protocol  # noqa: F401  (a hook: what a hung test awaits)
from hypothesis import settings
from required_tools import pytest_configure, pytest_runtest_setup  # noqa: F401  (hooks: @pytest.mark.needs)

from raftlog_dev import layout

# No time limit on a property test's example (hypothesis's default is 200 ms): a timed assertion, which a
# loaded machine fails (an example of tests/spark/test_spark_units.py took 576 ms once, 2.6 ms again).
# What a property bounds is its own input, never the machine's speed.
settings.register_profile("raftlog", deadline=None)
settings.load_profile("raftlog")

# What is loaded by now (pytest, its plugins, the libraries the conftests import) and, once collected, the
# suite's tests stay for the whole session: frozen out of the collector's way, a worker's full collections
# skip them (collection 5.9 -> 4.7 CPU s; the OpenAPI fuzz and two API files 53-54 -> 50-51 CPU s)
gc.freeze()

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under pytest-xdist
if _worker.startswith("gw"):  # each worker its own part of the ports (of $RAFTLOG_FREE_PORTS, when given)
    _index, _count = int(_worker[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ[layout.PORTS_ENV] = layout.worker_ports(_index, _count, layout.port_range())


@pytest.fixture(scope="session", autouse=True)
def node_fork_server() -> Iterator[None]:
    """The worker's node fork server (``node_forks.py``), for every node its tests start."""
    node_forks.start()
    yield
    node_forks.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--files-under",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run only the test files that cost less than SECONDS in tests/file_costs.json (make unit-fast)",
    )
    cpu_costs.add_option(parser)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def path_of(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    kept, dropped = file_costs.schedule(items, path_of, file_costs.load(), config.getoption("--files-under"))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()  # the collected tests, as above


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which answers loadfile too
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, but a folder of ``file_costs.SHARED_SESSION_FOLDERS`` is one unit, and so are
    the files of a ``file_costs.SHARED_FIXTURE_FILES`` folder that ask for its shared fixture."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class SharedFolderScheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return file_costs.scope_of(nodeid)

    log("scheduling: loadfile, with these folders whole:", *file_costs.SHARED_SESSION_FOLDERS)
    log(
        "and together, the files of a folder asking for its shared fixture:", *file_costs.SHARED_FIXTURE_FILES
    )

    return SharedFolderScheduling(config, log)
