"""The transactional workload's negative control: a broken marker path, inside a node process.

    python -m jepsen.nodeshim TRACE CLOCK --break-markers=flip-abort --node-id ...

``run --break-markers flip-abort`` starts every node through the shim with this option, and the shim calls
``install`` before it hands over to the server. The server's code is not changed and has no switch for
this: the harness replaces, in the node's own process, the replicated state machine's apply of a
transaction marker (``TxnMarker``, docs/decisions/0019-transactions.md) by one that applies every abort
marker as a commit marker. Every replica runs the same replacement, so they stay identical, and wrong:
the control batch says commit, the log's aborted index never names the transaction, read_committed readers
get its records, and the consumer offsets it sent become the group's. A run with it must be invalid
(``aborted-read``, ``uncommitted-offset``); one that is not shows a checker that cannot see the fault.

This is the one module of the harness that names a server module and a method of it, and it runs only in
a node process: the harness's own process never imports it. If the method is not where it is looked for,
the node exits at once with the reason (the run then fails to start, loudly, rather than passing unbroken).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

MODES = ("flip-abort",)
STATE_MACHINE_MODULE = "partitions.replicas.state_machine"
MARKER_APPLY = "_txn_marker"  # (self, marker: TxnMarker, term: int) -> MarkerWritten | Refused


class MarkerFaultError(RuntimeError):
    """The state machine's marker apply is not where this fault expects it: nothing was broken."""


def flip_abort(apply: Callable[..., Any]) -> Callable[..., Any]:
    """``apply`` with every abort marker turned into a commit marker."""

    @functools.wraps(apply)
    def broken(self: Any, marker: Any, term: int) -> Any:
        if marker.commit is False:
            marker = dataclasses.replace(marker, commit=True)
        return apply(self, marker, term)

    return broken


def install(mode: str) -> str:
    """Replace the marker apply of the state machine class that has one; what was replaced, in words."""
    if mode not in MODES:
        raise MarkerFaultError(f"unknown marker fault {mode!r}: choose from {', '.join(MODES)}")
    from partitions.replicas import state_machine  # only ever in a node process: see the docstring

    owners = [
        value
        for value in vars(state_machine).values()
        if isinstance(value, type) and MARKER_APPLY in vars(value)
    ]
    if len(owners) != 1:
        raise MarkerFaultError(
            f"{STATE_MACHINE_MODULE}: expected one class defining {MARKER_APPLY}, found "
            f"{[owner.__name__ for owner in owners]}"
        )
    (owner,) = owners
    setattr(owner, MARKER_APPLY, flip_abort(getattr(owner, MARKER_APPLY)))
    return f"{STATE_MACHINE_MODULE}.{owner.__name__}.{MARKER_APPLY}: {mode}"
