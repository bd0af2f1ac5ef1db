"""How a service operation is declared once: the ``@peer`` decorator on its method in the service's
protocol (``partitions.services``) says that other nodes may call it, and how (``PeerOp``). From those
declarations come the table of node-to-node calls (``peer_client.PEER_OPS``), the endpoints that serve
them (``api/internal.py``) and the stubs that call them (``peer_client.remote``); a method of a service
protocol without ``@peer`` is this node's alone (``DataService.produce``, which a caller encodes into
``produce_batch`` before it travels).

Pure: no I/O, nothing here knows how a call travels.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class PeerOp:
    service: str  # "data" | "admin" | "groups" | "peer": the attribute of ``LocalServices``
    method: str  # the service's method, called with the arguments by name
    summary: str
    write: bool = False  # a lost answer is "outcome unknown"
    wait_arg: str | None = None  # an argument (ms) the callee may wait for: it extends the call's timeout
    wait_unset_ms: int = 0  # how long the callee may wait when that argument is None

    @property
    def name(self) -> str:
        return f"{self.service}.{self.method}"


@dataclass(frozen=True, slots=True)
class _Declared:
    summary: str
    write: bool
    wait_arg: str | None
    wait_unset_ms: int


def peer(
    summary: str, *, write: bool = False, wait_arg: str | None = None, wait_unset_ms: int = 0
) -> Callable[[F], F]:
    """Declares a protocol method callable by other nodes: ``summary`` (its endpoint's), ``write`` (a lost
    answer is "outcome unknown"), ``wait_arg`` (an argument in ms the callee may wait, which extends the
    caller's timeout; ``wait_unset_ms`` when it is None)."""

    def declare(method: F) -> F:
        if wait_arg is not None and wait_arg not in inspect.signature(method).parameters:
            raise TypeError(f"{method.__qualname__}: no parameter {wait_arg!r} to wait for")
        method.__peer_op__ = _Declared(summary, write, wait_arg, wait_unset_ms)  # type: ignore[attr-defined]
        return method

    return declare


def declared_ops(service: str, protocol: type) -> tuple[PeerOp, ...]:
    """The peer operations a service protocol declares, in the protocol's order."""
    found = []
    for name, member in vars(protocol).items():
        declared = getattr(member, "__peer_op__", None)
        if isinstance(declared, _Declared):
            found.append(
                PeerOp(
                    service, name, declared.summary, declared.write, declared.wait_arg, declared.wait_unset_ms
                )
            )
    return tuple(found)
