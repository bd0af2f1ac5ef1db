"""What the fault tests need of the machine: a test marked ``@pytest.mark.needs("lazyfs")`` (or calling
``require``) fails at its set-up, naming what is missing, when the machine lacks it. ``make test``'s set-up
(``scripts/bootstrap.sh test``) installs the tools; root gives network namespaces and loop devices.

On a developer's machine ``RAFTLOG_ALLOW_MISSING_TOOLS=1`` turns those failures into skips that still name
what is missing. CI never has it: ``.ci/run`` unsets it before ``make test``."""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from typing import NoReturn

import pytest

ALLOW_ENV = "RAFTLOG_ALLOW_MISSING_TOOLS"


def _netns() -> str | None:
    from jepsen import control

    usable, why = control.netns_available()
    return None if usable else f"network namespaces: {why}"


def _lazyfs() -> str | None:
    from jepsen import lazyfs

    why = lazyfs.unavailable()
    return None if why is None else f"lazy file systems: {why}"


def _small_disks() -> str | None:
    from jepsen import disks

    why = disks.unavailable()
    return None if why is None else f"small disks of their own: {why}"


def _ip_link() -> str | None:
    if os.geteuid() != 0:
        return "an interface in the root network namespace: root"
    if shutil.which("ip") is None:
        return "an interface in the root network namespace: the ip command (iproute2) is missing"
    return None


# what each name stands for, and why the machine lacks it (None: it has it)
TOOLS: dict[str, Callable[[], str | None]] = {
    "netns": _netns,  # partitions, delay, loss (jepsen.control)
    "lazyfs": _lazyfs,  # power losses that take unsynced writes (jepsen.lazyfs)
    "small-disks": _small_disks,  # full disks (jepsen.disks: loop-mounted ext4)
    "ip-link": _ip_link,  # a network change seen by a browser (tests/console)
}


@functools.cache
def missing(name: str) -> str | None:
    """Why the machine lacks the tool ``name`` (None: it has it); probed once per test process."""
    return TOOLS[name]()


def unusable(why: str) -> NoReturn:
    """Fail the test naming what is missing, or skip it where ``RAFTLOG_ALLOW_MISSING_TOOLS=1``."""
    if os.environ.get(ALLOW_ENV) == "1":
        pytest.skip(f"missing {why} (allowed by {ALLOW_ENV}=1)")
    pytest.fail(
        f"this test needs {why}. `make bootstrap` (scripts/bootstrap.sh test) installs the tools, root gives "
        f"network namespaces and loop devices; {ALLOW_ENV}=1 skips such tests on a developer's machine "
        "(never in CI)",
        pytrace=False,
    )


def require(*names: str) -> None:
    for name in names:
        why = missing(name)
        if why is not None:
            unusable(why)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"needs(*tools): the test fails naming what is missing when the machine lacks one of {sorted(TOOLS)}"
        f" ({ALLOW_ENV}=1: skipped instead)",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        unknown = sorted(set(mark.args) - set(TOOLS))
        if unknown:
            raise ValueError(f"{item.nodeid}: needs{unknown}: not one of {sorted(TOOLS)}")
        require(*mark.args)
