"""``RaftCore`` is one class per job (``core_*.py``) over their shared state (``core_base.CoreBase``). Two
rules keep that split as safe as the one class it was: no two of its classes define the same name (else the
order ``RaftCore`` inherits them in would silently decide which runs), and every override of pysyncobj is
``RaftCore``'s own (pysyncobj calls back into ``_SyncObj__*`` names and ``_onTick``: they stay in one class,
checked against one pysyncobj version, and delegate to the jobs)."""

from __future__ import annotations

from pysyncobj import SyncObj

from raftlog.consensus.core import RaftCore
from raftlog.consensus.core_base import CoreBase


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _jobs() -> list[type]:
    """The classes ``RaftCore`` is built from, ``CoreBase`` included, ``RaftCore`` itself not."""
    return [cls for cls in RaftCore.__mro__[1:] if issubclass(cls, CoreBase)]


def defined_twice(classes: list[type]) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for cls in classes:
        for name in vars(cls):
            if not _dunder(name):
                seen.setdefault(name, []).append(cls.__name__)
    return {name: owners for name, owners in seen.items() if len(owners) > 1}


def test_raftcore_is_built_from_its_jobs_over_their_shared_state() -> None:
    names = {cls.__name__ for cls in _jobs()}
    assert {"CoreBase", "Elections", "FollowerSide", "Replication", "Reads", "Quiescence"} <= names


def test_no_two_of_raftcores_classes_define_the_same_name() -> None:
    assert defined_twice([RaftCore, *_jobs()]) == {}


def test_the_rule_catches_a_name_defined_twice() -> None:
    class A:
        def _wake(self) -> None: ...

    class B:
        def _wake(self) -> None: ...

    assert defined_twice([A, B]) == {"_wake": ["A", "B"]}


def test_every_override_of_pysyncobj_is_raftcores_own() -> None:
    pysyncobj_names = {name for name in dir(SyncObj) if not _dunder(name)}
    overriding = {
        f"{cls.__name__}.{name}" for cls in _jobs() for name in vars(cls) if name in pysyncobj_names
    }
    assert overriding == set()
    own = {name for name in vars(RaftCore) if name in pysyncobj_names}
    assert {"_onTick", "_checkCommandsToApply", "_SyncObj__onMessageReceived"} <= own
