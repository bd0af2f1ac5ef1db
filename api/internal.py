"""The server side of peer calls: one endpoint per ``partitions.peers.client.PEER_OPS`` entry, under
``INTERNAL_PREFIX``, answered only to a caller presenting the cluster credential (checked once, by the
app's error middleware, before any handler runs).

Each endpoint decodes the arguments (msgpack, ``partitions.peers.codec``), runs the method on this node's
own service (never passing the call further: the caller follows leader hints itself) and answers 200
with the result or the typed error it raised. A body that is not a peer message is a 400.

A node that has not caught up with the controller's metadata since it started (``catch_up``) answers from
its view of before the restart: a topic or partition it does not know may exist. It says so as
``NoLeader``, which every caller (this release's and the previous one's ``Router``) asks again, never as
``UnknownTopic``/``UnknownPartition``, which a caller takes as final.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from api import state
from api.errors import BadRequest, UnsupportedMediaType
from api.openapi import Handler, Operation
from partitions.errors import PeerProtocolError, UnknownPartition, UnknownTopic
from partitions.peer_ops import PeerOp
from partitions.peers.client import MEDIA_TYPE, PEER_OPS, decode_arguments, encode_answer, path_of
from raftlog.consensus.errors import NoLeader
from raftlog.errors import RaftlogError


def _handler(op: PeerOp) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        if request.content_type != MEDIA_TYPE:
            raise UnsupportedMediaType(request.content_type, f"peer calls are {MEDIA_TYPE}")
        try:
            arguments = decode_arguments(await state.body(request))
        except PeerProtocolError as exc:
            raise BadRequest(f"{op.name}: {exc}") from None
        service = getattr(state.node(request).local, op.service)
        method: Callable[..., Awaitable[Any]] = getattr(service, op.method)
        try:
            inspect.signature(method).bind(**arguments)
        except TypeError as exc:
            raise BadRequest(f"{op.name}: arguments {sorted(arguments)} do not fit: {exc}") from None
        node = state.node(request)
        try:
            result = await method(**arguments)
        except (UnknownTopic, UnknownPartition) as exc:
            result = exc if node.metadata.caught_up() else NoLeader(exc.topic)
        except RaftlogError as exc:
            result = exc
        return web.Response(body=encode_answer(result), content_type=MEDIA_TYPE)  # levels: api.app

    handle.__name__ = op.method
    handle.__doc__ = op.summary
    return handle


ROUTES: tuple[Operation, ...] = tuple(
    Operation(
        "POST",
        path_of(op),
        _handler(op),
        f"peer.{op.service}.{op.method}",
        f"Internal: {op.summary} (cluster credential)",
        "internal",
        body_alternatives=((MEDIA_TYPE, None),),
        ok_type=MEDIA_TYPE,
        errors=(401, 413, 415),
        local=True,
        write=op.write,
        long_poll=op.wait_arg is not None and not op.write,
    )
    for op in PEER_OPS
)
