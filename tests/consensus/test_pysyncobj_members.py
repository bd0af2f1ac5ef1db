"""The consensus adapter reaches into pysyncobj's private members (``RaftCore`` subclasses ``SyncObj`` and
overrides and reads its name-mangled internals; the transport reads its nodes and connections). A newer
pysyncobj may rename any of them without notice, and an override of a renamed method would silently never be
called. ``pyproject.toml`` pins the exact version ``raftlog.consensus.core`` supports; these tests name every
private member the adapter uses that pysyncobj defines, so an upgrade that renames one fails here, naming it,
a new reach-in must be listed here to pass, and a name the adapter no longer uses must leave the list (it
shrinks as our own code replaces reaches)."""

from __future__ import annotations

import ast
import pathlib
import re

import pysyncobj

from raftlog.consensus.core import PYSYNCOBJ_VERSION, SUPPORTED_PYSYNCOBJ_VERSION

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "raftlog" / "consensus"

REACHED = frozenset(
    {
        "_FastQueue__queue",
        "_SyncObj__applyLogEntries",
        "_SyncObj__commandsQueue",
        "_SyncObj__commandsWaitingCommit",
        "_SyncObj__connectedNodes",
        "_SyncObj__connectedToAnyone",
        "_SyncObj__forceLogCompaction",
        "_SyncObj__getEntries",
        "_SyncObj__lastSerializedEntry",
        "_SyncObj__lastSerializedTime",
        "_SyncObj__leaderCommitIndex",
        "_SyncObj__needLoadDumpFile",
        "_SyncObj__newAppendEntriesTime",
        "_SyncObj__nodeClass",
        "_SyncObj__noopIDx",
        "_SyncObj__onBecomeLeader",
        "_SyncObj__onLeaderChanged",
        "_SyncObj__onMessageReceived",
        "_SyncObj__onNodeConnected",
        "_SyncObj__onNodeDisconnected",
        "_SyncObj__onReadyCalled",
        "_SyncObj__onTickCallbacks",
        "_SyncObj__onTickCallbacksLock",
        "_SyncObj__otherNodes",
        "_SyncObj__raftCommitIndex",
        "_SyncObj__raftCurrentTerm",
        "_SyncObj__raftElectionDeadline",
        "_SyncObj__raftLastApplied",
        "_SyncObj__raftLeader",
        "_SyncObj__raftLog",
        "_SyncObj__raftMatchIndex",
        "_SyncObj__raftNextIndex",
        "_SyncObj__raftState",
        "_SyncObj__readonlyNodes",
        "_SyncObj__sendAppendEntries",
        "_SyncObj__serializer",
        "_SyncObj__setCurrentTerm",
        "_SyncObj__setState",
        "_SyncObj__transferInProgress",
        "_SyncObj__transport",
        "_SyncObj__tryLogCompaction",
        "_applyCommand",
        "_checkCommandsToApply",
        "_connections",
        "_destroy",
        "_nodes",
        "_onMessageReceived",
        "_onNodeConnected",
        "_onNodeDisconnected",
        "_onTick",
        "_poller",
        "_ready",
        "_syncObj",
    }
)
"""pysyncobj's private members the adapter uses (mangled names as Python sees them)."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _defined_by_pysyncobj() -> set[str]:
    """Every private method and ``self`` attribute a class of the installed pysyncobj defines, mangled."""
    names: set[str] = set()
    for source in pathlib.Path(pysyncobj.__file__).parent.glob("*.py"):
        for cls in (n for n in ast.walk(ast.parse(source.read_text())) if isinstance(n, ast.ClassDef)):
            prefix = "_" + cls.name.lstrip("_")
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef):
                    name = node.name
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                ):
                    name = node.attr
                else:
                    continue
                if _private(name):
                    names.add(prefix + name if name.startswith("__") else name)
    return names


def _used_by_adapter() -> set[str]:
    names: set[str] = set()
    for source in ADAPTER.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                names.add(node.attr)
            elif isinstance(node, ast.FunctionDef) and _private(node.name):
                names.add(node.name)
    return names


def test_the_installed_pysyncobj_is_the_pinned_one() -> None:
    pinned = re.search(r'"pysyncobj==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert pinned is not None, "pyproject.toml must pin pysyncobj to one exact version"
    assert pinned.group(1) == SUPPORTED_PYSYNCOBJ_VERSION == PYSYNCOBJ_VERSION


def test_every_private_member_the_adapter_reaches_still_exists_in_pysyncobj() -> None:
    missing = sorted(REACHED - _defined_by_pysyncobj())
    assert not missing, f"pysyncobj {PYSYNCOBJ_VERSION} no longer defines {missing}: the adapter uses them"


def test_every_reach_into_pysyncobj_is_listed() -> None:
    unlisted = sorted((_used_by_adapter() & _defined_by_pysyncobj()) - REACHED)
    assert not unlisted, f"the adapter uses pysyncobj's private {unlisted}: list them in REACHED"


def test_every_listed_reach_is_still_used() -> None:
    """The list shrinks with the reach: a name the adapter no longer uses leaves it."""
    stale = sorted(REACHED - _used_by_adapter())
    assert not stale, f"the adapter no longer uses pysyncobj's private {stale}: remove them from REACHED"
