"""What the test files of one folder share (the folders of ``file_costs.SHARED_SESSION_FOLDERS``, which a
parallel run gives to one worker whole): made when a test of the folder first asks for it, ended when the
run leaves the folder.

As session fixtures these outlived the folder's last test until the worker's end: three idle nodes (about
1 % of a CPU each) for most of a whole run, twice for the console's two clusters. pytest has no such
scope for a folder without ``__init__.py`` (its "package" scope is the session's there), but it sets up
the folder's collector before the folder's first test and tears it down when the next test is outside
the folder: what is made here hangs on that collector (``Node.addfinalizer``), reached from the
module-scoped fixture that asks. A run that comes back to the folder later (``-n 0`` orders files by
cost, not by folder) makes it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

_MADE = pytest.StashKey[dict[str, Any]]()


class _Failed:
    """A make that raised: every later module of the visit gets the same error, not a second attempt (the
    next visit tries again)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def shared(request: pytest.FixtureRequest, make: Callable[[], Iterator[T]]) -> T:
    """What ``make`` (a fixture's body: set up, ``yield`` the value, tear down) yields, made once per
    visit of the folder that the module of ``request`` (a module-scoped fixture's) is in, under the
    fixture's name, and torn down when the run leaves that folder."""
    folder = request.node.parent
    assert isinstance(folder, pytest.Directory), f"{request.node.nodeid}: not a module in a folder"
    made = folder.stash.setdefault(_MADE, {})
    name = request.fixturename
    if name not in made:
        steps = make()
        try:
            made[name] = next(steps)
        except BaseException as error:
            made[name] = _Failed(error)
            folder.addfinalizer(lambda: made.pop(name, None))  # a later visit tries again
            raise

        def end() -> None:
            made.pop(name, None)
            try:
                next(steps)
            except StopIteration:
                return
            raise RuntimeError(f"{name}: its fixture yielded more than once")

        folder.addfinalizer(end)
    value = made[name]
    if isinstance(value, _Failed):
        raise value.error
    return value  # type: ignore[no-any-return]
