"""Calls from this node to another: the one home of node-to-node requests (the Raft transport aside).

Every call is one of ``PEER_OPS``: a method of one of the node's local services that its protocol
declares ``@peer`` (a room's service protocol, ``partitions.peer_ops``), run on the node named, answered with
its typed result or its typed error (``peer_codec``). The server side (``api/internal.py``) serves exactly
this table under ``INTERNAL_PREFIX`` and answers only a caller that presents the cluster credential
(``internal_credential``). The stubs that call another node (``remote_data``, ``remote_admin``,
``remote_groups``, ``remote_peer``, ``remote_transactions``, ``remote_shares``) are made from the same
declarations: a method each, its signature and result type the protocol's; none is written by hand.

An argument a peer operation declares ``since`` a format (``partitions.peer_ops.peer``) is left out of a
call until the cluster's finalized feature level allows that format: a node of the previous release, which
refuses an argument it does not know, still serves the call (with the argument's default).

Every call carries the feature levels this node's code supports (``LEVELS_HEADER``) and every answer the
callee's: a callee refuses a caller whose code cannot read the cluster's finalized formats
(``features.kept_out``: ``NodeKeptOut``, a 409; a node of release 0.1.0 sends none), and a caller takes
no answer from such a callee (``PeerUnreachable``, as if it were down): a node of an earlier release
neither serves nor is served once the levels rose above it.

A call that could not be sent raises ``PeerUnreachable`` (safe to retry); a call that was sent but whose
answer never came raises ``PeerOutcomeUnknown`` when it writes, ``PeerUnreachable`` when it only reads.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import logging
import ssl
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import aiohttp

from partitions.consumers.protocol import GroupService
from partitions.data.service import DataService
from partitions.data.share_records import ShareService
from partitions.errors import PeerOutcomeUnknown, PeerProtocolError, PeerUnreachable
from partitions.features import SUPPORTED, Format
from partitions.metadata.service import AdminService
from partitions.peer_ops import PeerOp, declared_ops
from partitions.peers.codec import ErrorTypes, Registry, pack, unpack
from partitions.peers.service import RESULT_TYPES, PeerService
from partitions.registry.service import RegistryService
from partitions.transactions.service import TransactionService
from raftlog.errors import RaftlogError

log = logging.getLogger("raftlog.peer")

INTERNAL_PREFIX = "/internal/v1/"  # every node-to-node HTTP endpoint lives under it

MEDIA_TYPE = "application/vnd.raftlog.peer.v1+msgpack"
LEVELS_HEADER = "Raftlog-Levels"  # "raftlog.version=2, transaction.version=2": the sender's code supports
LEVELS_MAX = 32
CALL_TIMEOUT_S_DEFAULT = 15.0
INTERNAL_CREDENTIAL_CONTEXT = b"raftlog internal admin v1"

REGISTRY = Registry()
REGISTRY.extend(RESULT_TYPES)
ERRORS = ErrorTypes()


def internal_credential(cluster_secret: bytes) -> str:
    """The bearer token nodes present to each other's internal endpoints."""
    return hmac.new(cluster_secret, INTERNAL_CREDENTIAL_CONTEXT, hashlib.sha256).hexdigest()


def credential_matches(expected: str, presented: str) -> bool:
    return hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))


PEER_OPS: tuple[PeerOp, ...] = (
    declared_ops("data", DataService)
    + declared_ops("admin", AdminService)
    + declared_ops("groups", GroupService)
    + declared_ops("peer", PeerService)
    + declared_ops("transactions", TransactionService)
    + declared_ops("shares", ShareService)
    + declared_ops("registry", RegistryService)
)
OPS = {op.name: op for op in PEER_OPS}


def path_of(op: PeerOp) -> str:
    """The endpoint serving ``op`` on every node."""
    return f"{INTERNAL_PREFIX}{op.service}/{op.method}"


def encode_answer(value: object) -> bytes:
    """The callee's answer: ``{"ok": result}`` or ``{"error": typed error}``."""
    if isinstance(value, RaftlogError):
        return pack({"error": value}, REGISTRY)
    return pack({"ok": value}, REGISTRY)


def decode_arguments(body: bytes) -> dict[str, Any]:
    arguments = unpack(body, REGISTRY, ERRORS)
    if not isinstance(arguments, dict) or not all(isinstance(k, str) for k in arguments):
        raise PeerProtocolError("a peer call's body must be a map of argument names to values")
    return arguments


def encode_levels(levels: Mapping[str, int]) -> str:
    return ", ".join(f"{feature}={level}" for feature, level in sorted(levels.items()))


def parse_levels(header: str | None) -> dict[str, int] | None:
    """The levels a ``LEVELS_HEADER`` announces (None: no header, a node of release 0.1.0);
    PeerProtocolError when it is not a list of at most ``LEVELS_MAX`` ``name=level``."""
    if header is None:
        return None
    levels: dict[str, int] = {}
    for item in header.split(","):
        name, sep, level = item.strip().partition("=")
        if not sep or not name or not level.isdigit() or len(name) > 64 or len(levels) >= LEVELS_MAX:
            raise PeerProtocolError(f"malformed {LEVELS_HEADER} header {header[:200]!r}")
        levels[name] = int(level)
    return levels


class PeerClient:
    """Create on the node, use on its event loop, ``await close()``. ``address(node_id)`` is the node's
    HTTP base URL (None when unknown)."""

    def __init__(
        self,
        credential: str,
        address: Callable[[str], str | None],
        timeout_s: float = CALL_TIMEOUT_S_DEFAULT,
        ssl_context: ssl.SSLContext | None = None,
        allows: Callable[[Format], bool] = lambda fmt: True,
        levels: Mapping[str, int] | None = SUPPORTED,
        kept_out: Callable[[Mapping[str, int] | None], str | None] = lambda announced: None,
        node_kept_out: Callable[[str], str | None] = lambda node_id: None,
    ) -> None:
        """``allows``: the gate on the cluster's finalized feature levels (``Features.allows``);
        ``levels``: what this node's code supports, announced with every call (None: nothing, as release
        0.1.0);
        ``kept_out``: why a callee that announced its levels so may not answer (None: it may);
        ``node_kept_out``: why a node is kept out as this node knows it (never called)."""
        self._allows = allows
        self._kept_out = kept_out
        self._node_kept_out = node_kept_out
        self._ssl = ssl_context  # for https URLs: the certificates trusted, and the one presented
        self._headers = {"Authorization": f"Bearer {credential}", "Content-Type": MEDIA_TYPE}
        if levels is not None:
            self._headers[LEVELS_HEADER] = encode_levels(levels)
        self._address = address
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    async def close(self) -> None:
        """Later calls are refused ``PeerUnreachable``: a session opened after this would never close."""
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(auto_decompress=False, connector=connector)
        return self._session

    async def call(self, node_id: str, op: PeerOp, arguments: dict[str, Any]) -> object:
        """Run ``op`` on ``node_id``; its result, or its typed error raised here."""
        if self._closed:
            raise PeerUnreachable(node_id, f"{op.name}: this node is closing")
        base = self._address(node_id)
        if not base:
            raise PeerUnreachable(node_id, "no address known")
        kept_out = self._node_kept_out(node_id)
        if kept_out is not None:  # a stale leader hint may still name it: never sent
            raise PeerUnreachable(node_id, f"{op.name}: kept out of the cluster: {kept_out}")
        arguments = sendable(op, arguments, self._allows)
        timeout_s = call_timeout_s(op, arguments, self._timeout_s)
        body = pack(arguments, REGISTRY)
        try:
            async with self._client().post(
                base.rstrip("/") + path_of(op),
                data=body,
                headers=self._headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                payload = await response.read()
                status = response.status
                announced = response.headers.get(LEVELS_HEADER)
        except aiohttp.ClientConnectorError as exc:
            raise PeerUnreachable(node_id, f"{op.name}: {exc}") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            reason = f"{op.name}: {exc!r}"
            if op.write:
                raise PeerOutcomeUnknown(node_id, reason) from None
            raise PeerUnreachable(node_id, reason) from None
        kept_out = None if status == 401 else self._kept_out(parse_levels(announced))
        if kept_out is not None:  # its answer may come from a log that diverged: as if it were down
            raise PeerUnreachable(node_id, f"{op.name}: kept out of the cluster: {kept_out}")
        if status != 200:
            raise PeerProtocolError(f"node {node_id} answered {op.name} with {status}: {payload[:200]!r}")
        answer = unpack(payload, REGISTRY, ERRORS)
        if not isinstance(answer, dict) or len(answer) != 1:
            raise PeerProtocolError(f"node {node_id} answered {op.name} with {str(answer)[:200]}")
        if "error" in answer:
            error = answer["error"]
            if not isinstance(error, RaftlogError):
                raise PeerProtocolError(f"node {node_id} answered {op.name} with error {error!r:.200}")
            raise error
        return answer["ok"]


def call_timeout_s(op: PeerOp, arguments: dict[str, Any], timeout_s: float) -> float:
    """How long a call of ``op`` with ``arguments`` (as sent) is waited for: the client's ``timeout_s``, and
    what the callee may wait by the ``wait_arg`` (``wait_unset_ms`` when it is not sent, at most
    ``wait_max_ms``)."""
    if op.wait_arg is None:
        return timeout_s
    wait_ms = arguments.get(op.wait_arg)
    wait_ms = op.wait_unset_ms if wait_ms is None else int(wait_ms)
    if op.wait_max_ms is not None:
        wait_ms = min(wait_ms, op.wait_max_ms)
    return timeout_s + max(0, wait_ms) / 1000


def sendable(op: PeerOp, arguments: dict[str, Any], allows: Callable[[Format], bool]) -> dict[str, Any]:
    """``arguments`` without those ``op`` declares ``since`` a format the finalized levels do not allow yet
    (the callee, maybe of the previous release, applies their defaults)."""
    held = {argument for argument, fmt in op.since if argument in arguments and not allows(fmt)}
    return {name: value for name, value in arguments.items() if name not in held} if held else arguments


def _conforms(value: object, hint: Any) -> bool:
    """Whether a peer's answer is of the declared result type (a container: of its type; what it holds
    is the codec's to check)."""
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_conforms(value, option) for option in typing.get_args(hint))
    return isinstance(value, origin if origin is not None else hint)


def _stub(op: PeerOp, declared: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """A method that runs ``op`` on the stub's node with the arguments by name, as declared. An argument
    left at None, its declared default, is not sent: a node of the previous release, whose method lacks an
    argument added since with that default, still serves the call (the callee applies its defaults)."""
    signature = inspect.signature(declared)
    parameters = signature.parameters
    result = typing.get_type_hints(declared)["return"]

    async def call(self: _Stub, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = {
            name: value
            for name, value in bound.arguments.items()
            if name != "self" and not (value is None and parameters[name].default is None)
        }
        value = await self.client.call(self.node_id, op, arguments)
        if not _conforms(value, result):
            raise PeerProtocolError(f"node {self.node_id} answered {op.name} with {value!r:.200}")
        return value

    call.__name__ = call.__qualname__ = op.method
    call.__doc__ = declared.__doc__
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


class _Stub:
    """A service of another node: its declared peer operations (``peer_ops``), as methods."""

    service = ""

    def __init__(self, client: PeerClient, node_id: str) -> None:
        self.client = client
        self.node_id = node_id


_Service = TypeVar("_Service")
Remote = Callable[[PeerClient, str], _Service]  # a service of the node named, through the client


def _remote(service: str, protocol: type) -> Remote[Any]:
    """The class of ``protocol``'s stubs: called with a client and a node id, that node's service, whose
    methods are its declared peer operations (each name below gives it its protocol's type)."""
    methods = {op.method: _stub(op, vars(protocol)[op.method]) for op in declared_ops(service, protocol)}
    doc = f"``{protocol.__name__}`` of another node: its peer operations."
    return type(f"Remote{protocol.__name__}", (_Stub,), {"__doc__": doc, "service": service, **methods})


remote_data: Remote[DataService] = _remote("data", DataService)
remote_admin: Remote[AdminService] = _remote("admin", AdminService)
remote_groups: Remote[GroupService] = _remote("groups", GroupService)
remote_peer: Remote[PeerService] = _remote("peer", PeerService)
remote_transactions: Remote[TransactionService] = _remote("transactions", TransactionService)
remote_shares: Remote[ShareService] = _remote("shares", ShareService)
remote_registry: Remote[RegistryService] = _remote("registry", RegistryService)
