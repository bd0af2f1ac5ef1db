"""How a service operation is declared once: the ``@peer`` decorator on its method in the service's protocol
(``partitions.data.service``, ``partitions.metadata.service``, ...) says that other nodes may call it, and
how (``PeerOp``), and how a call is routed to the node that must serve it (``Routing``). From those
declarations come the table of node-to-node calls (``peers.client.PEER_OPS``), the endpoints that serve them
(``api/internal.py``), the stubs that call them (``peers.client.remote_*``) and the cluster-wide call
(``peers.cluster.Routed.run``).

Pure: no I/O, nothing here knows how a call travels.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from partitions.features import Format

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class PeerOp:
    # "data" | "admin" | "groups" | "peer" | "transactions" | "shares": the attribute of ``LocalServices``
    service: str
    method: str  # the service's method, called with the arguments by name
    summary: str
    write: bool = False  # a lost answer is "outcome unknown"
    wait_arg: str | None = None  # an argument (ms) the callee may wait for: it extends the call's timeout
    wait_unset_ms: int = 0  # how long the callee may wait when that argument is None
    wait_max_ms: int | None = None  # the longest the callee waits, whatever the argument says (None: as said)
    # arguments the previous release's callee does not take, each with the format that allows it: left out
    # of a call until the cluster's finalized level allows it (the callee applies its default)
    since: tuple[tuple[str, Format], ...] = ()

    @property
    def name(self) -> str:
        return f"{self.service}.{self.method}"


@dataclass(frozen=True, slots=True)
class Routing:
    """Where a cluster-wide call runs: on this node first, then where ``NotLeader`` hints point."""

    topic_arg: str | None = None  # the argument naming the topic: unknown here, the controller is asked
    waits_for_leader: bool = True  # while none is known, try again for a while (False: answer what is seen)


@dataclass(frozen=True, slots=True)
class _Declared:
    summary: str
    write: bool
    wait_arg: str | None
    wait_unset_ms: int
    routing: Routing
    since: tuple[tuple[str, Format], ...] = ()
    wait_max_ms: int | None = None


def peer(
    summary: str,
    *,
    write: bool = False,
    wait_arg: str | None = None,
    wait_unset_ms: int = 0,
    wait_max_ms: int | None = None,
    topic_arg: str | None = None,
    waits_for_leader: bool = True,
    since: Mapping[str, Format] | None = None,
) -> Callable[[F], F]:
    """Declares a protocol method callable by other nodes: ``summary`` (its endpoint's), ``write`` (a lost
    answer is "outcome unknown"), ``wait_arg`` (an argument in ms the callee may wait, which extends the
    caller's timeout; ``wait_unset_ms`` when it is None, at most ``wait_max_ms`` when the callee bounds
    it); and its ``Routing``: ``topic_arg``, the argument naming the topic it is about,
    ``waits_for_leader``. ``since``: arguments added since the previous release, each with the ``Format``
    (``partitions.features``) that allows sending it; each needs a default, which the callee applies while
    the argument is left out."""
    routing = Routing(topic_arg, waits_for_leader)
    gated = tuple(sorted((since or {}).items()))
    return _declare(_Declared(summary, write, wait_arg, wait_unset_ms, routing, gated, wait_max_ms))


def _declare(declared: _Declared) -> Callable[[F], F]:
    def declare(method: F) -> F:
        parameters = inspect.signature(method).parameters
        for argument in (declared.wait_arg, declared.routing.topic_arg):
            if argument is not None and argument not in parameters:
                raise TypeError(f"{method.__qualname__}: no parameter {argument!r}")
        for argument, _ in declared.since:
            if argument not in parameters or parameters[argument].default is inspect.Parameter.empty:
                raise TypeError(f"{method.__qualname__}: no parameter {argument!r} with a default")
        method.__peer_op__ = declared  # type: ignore[attr-defined]
        return method

    return declare


def routing_of(method: Callable[..., Any]) -> Routing:
    """The routing a protocol method declares (TypeError for a method declared neither way)."""
    declared = getattr(method, "__peer_op__", None)
    if not isinstance(declared, _Declared):
        raise TypeError(f"{getattr(method, '__qualname__', method)!r} is not a declared service operation")
    return declared.routing


def declared_ops(service: str, protocol: type) -> tuple[PeerOp, ...]:
    """The peer operations a service protocol declares, in the protocol's order."""
    found = []
    for name, member in vars(protocol).items():
        how = getattr(member, "__peer_op__", None)
        if isinstance(how, _Declared):
            found.append(
                PeerOp(
                    service,
                    name,
                    how.summary,
                    how.write,
                    how.wait_arg,
                    how.wait_unset_ms,
                    how.wait_max_ms,
                    how.since,
                )
            )
    return tuple(found)
