"""The Kafka listener's sender when its client is gone or the node stops: a write to a transport already
closed ends the connection quietly ("done"), as a reset does, and so does a handler cancelled by the node's
stop; before, both escaped as exceptions that asyncio logged as unhandled tracebacks (seen in every node's
log of a franz-go suite run)."""

from __future__ import annotations

import asyncio
import types

import pytest

import kafka_api.server as server_module
from kafka_api.connections import READ_CHUNK_BYTES, Answer, read_frame
from kafka_api.limits import Limits
from kafka_api.server import KafkaServer


class ClosedWriter:
    """A stream writer over a transport the client closed: the event loop refuses every write."""

    def __init__(self) -> None:
        self.transport = types.SimpleNamespace(is_closing=lambda: True)

    def write(self, data: object) -> None:
        raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed")

    async def drain(self) -> None:
        raise AssertionError("never reached")


async def _send(answer: Answer) -> str:
    answers: asyncio.Queue[Answer | None] = asyncio.Queue()
    answers.put_nowait(answer)
    answers.put_nowait(None)
    slots = asyncio.Semaphore(0)
    server = types.SimpleNamespace(limits=Limits())
    connection = types.SimpleNamespace(answers_read=asyncio.Event())
    return await KafkaServer._send(server, ClosedWriter(), answers, slots, connection)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_an_answer_to_a_closed_transport_ends_the_connection_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_module.encoding, "encode", lambda correlation_id, response: [b"frame"])
    future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    future.set_result(object())
    assert await _send(Answer(1, future)) == "done"


@pytest.mark.asyncio
async def test_a_handler_cancelled_at_the_nodes_stop_ends_the_connection_quietly() -> None:
    future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    future.cancel()
    assert await _send(Answer(1, future)) == "done"


def test_a_large_frame_broken_off_gives_its_buffer_back_though_its_traceback_is_kept() -> None:
    """A frame cut mid-way (its connection closed by a bound, or by the client) raises out of
    ``read_frame``; the traceback refers to that call, and a caught error kept anywhere (a task, a log
    record, a cycle) would hold the frame's whole buffer until a collection, which large buffers do not
    set off: 846 MiB of a node in a hostile run. The buffer is emptied before the error leaves."""
    import tracemalloc

    from kafka_api.limits import Clock

    size = 64 * 1024 * 1024

    async def broken() -> BaseException:
        reader = asyncio.StreamReader()
        reader.feed_data(b"x" * (2 * READ_CHUNK_BYTES))
        reader.feed_eof()
        try:
            await read_frame(reader, size, Clock(opened_s=0.0))
        except asyncio.IncompleteReadError as error:
            return error
        raise AssertionError("a frame broken off was read whole")

    tracemalloc.start()
    try:
        kept = asyncio.run(broken())  # held, with its traceback, as a stored exception would be
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept.__traceback__ is not None
    assert held < size // 8, f"{held} bytes held by a frame broken off"
