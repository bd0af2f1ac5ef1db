"""``raftlog produce``, ``consume`` and ``offsets``: records in and out, as kcat users expect them.

- ``produce`` sends stdin as it comes: a line is sent once ``--batch`` lines are waiting or ``--linger-ms``
  after the first of them, so ``tail -f app.log | raftlog produce logs`` sends each line at once;
  ``-K SEP`` splits each line into key and value at the first SEP (a line without it has no key).
- ``consume`` reads one partition (``--partition``) or all of the topic's at once; it starts at
  ``--offset`` (N, ``-N``: N before the end, ``beginning``, ``end``), ``--from-beginning`` or
  ``--timestamp``; prints JSON lines, or ``--format`` with kcat's tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TextIO

from raftlog_client.client import FetchedRecord, Message, RaftlogClient

LINGER_MS_DEFAULT = 50
_EOF = None


@dataclass(frozen=True, slots=True)
class Start:
    """Where a partition read starts: ``beginning``, ``end``, an absolute offset, or N before the end."""

    kind: str  # "beginning" | "end" | "offset" | "from_end"
    value: int = 0


def parse_start(text: str) -> Start:
    """kcat's ``-o``: ``beginning``, ``end``, N (absolute) or -N (N records before the end)."""
    lowered = text.strip().lower()
    if lowered in ("beginning", "end"):
        return Start(lowered)
    try:
        number = int(lowered)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: an offset N, -N (N before the end), beginning or end"
        ) from None
    return Start("from_end", -number) if number < 0 else Start("offset", number)


async def start_offset(client: RaftlogClient, topic: str, partition: int, start: Start) -> int:
    if start.kind == "offset":
        return start.value
    beginning, end = await client.offsets(topic, partition)
    if start.kind == "beginning":
        return beginning
    if start.kind == "end":
        return end
    return max(beginning, end - start.value)


# -- output --------------------------------------------------------------------------------------------

_TOKENS: dict[str, Callable[[FetchedRecord], str]] = {
    "t": lambda r: r.topic,
    "p": lambda r: str(r.partition),
    "o": lambda r: str(r.offset),
    "T": lambda r: str(r.timestamp_ms),
    "k": lambda r: _text(r.key, ""),
    "s": lambda r: _text(r.value, ""),
    "K": lambda r: "-1" if r.key is None else str(len(r.key)),
    "S": lambda r: "-1" if r.value is None else str(len(r.value)),
    "h": lambda r: ",".join(f"{k}={_text(v, '')}" for k, v in r.headers),
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


def text(data: bytes | None) -> str | None:
    """Bytes as UTF-8 text, else ``base64:`` and their base64; None stays None (JSON null)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")


def _text(data: bytes | None, null: str | None) -> Any:
    """``text`` (UTF-8, else ``base64:``...), with what a null becomes."""
    return null if data is None else text(data)


def check_format(fmt: str) -> str:
    """kcat's ``-f`` tokens: %t topic, %p partition, %o offset, %T timestamp, %k key, %s value, %K and %S
    their lengths (-1: null), %h headers (k=v,...), %% a percent sign; \\n \\t \\r \\\\ escapes."""
    render(fmt, FetchedRecord("t", 0, 0, 0, None, None))
    return fmt


def render(fmt: str, record: FetchedRecord) -> str:
    out: list[str] = []
    i = 0
    while i < len(fmt):
        char = fmt[i]
        if char in "%\\" and i + 1 < len(fmt):
            following = fmt[i + 1]
            if char == "%" and following == "%":
                out.append("%")
            elif char == "%" and following in _TOKENS:
                out.append(_TOKENS[following](record))
            elif char == "\\" and following in _ESCAPES:
                out.append(_ESCAPES[following])
            else:
                raise argparse.ArgumentTypeError(f"--format: {char}{following} is not a known token")
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def record_row(record: FetchedRecord) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp_ms,
        "timestamp_type": record.timestamp_type,
        "key": _text(record.key, None),
        "value": _text(record.value, None),
        "headers": [{"key": k, "value": _text(v, None)} for k, v in record.headers],
    }


def printer(fmt: str | None) -> Callable[[FetchedRecord], None]:
    if fmt is None:
        return lambda record: print(json.dumps(record_row(record)), flush=True)
    return lambda record: print(render(fmt, record), end="", flush=True)


# -- consume -------------------------------------------------------------------------------------------


async def consume_partitions(
    client: RaftlogClient,
    topic: str,
    starts: dict[int, int],
    *,
    follow: bool,
    max_records: int | None,
    emit: Callable[[FetchedRecord], None],
) -> None:
    """Every partition of ``starts`` read at once, records printed as they come (in offset order within a
    partition); without ``follow`` each stops at its end; ``max_records`` counts all of them."""
    printed = 0
    enough = asyncio.Event()

    async def one(partition: int) -> None:
        nonlocal printed
        async for record in client.consume(topic, partition, starts[partition], follow=follow):
            if max_records is not None and printed >= max_records:
                return  # another partition printed the last one wanted
            emit(record)
            printed += 1
            if max_records is not None and printed >= max_records:
                enough.set()
                return

    every = asyncio.gather(*(one(p) for p in sorted(starts)))
    stop = asyncio.ensure_future(enough.wait())
    try:
        waiting: list[asyncio.Future[Any]] = [every, stop]
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if every in done:
            every.result()  # a partition's failure is the command's
    finally:
        every.cancel()
        stop.cancel()
        await asyncio.gather(every, stop, return_exceptions=True)


# -- produce -------------------------------------------------------------------------------------------


async def stdin_batches(stream: TextIO, size: int, linger_s: float) -> AsyncIterator[list[str]]:
    """The lines of ``stream`` as they come (read on a thread: a pipe may stay open and quiet for long),
    in groups of at most ``size``: a group goes once full, or ``linger_s`` after its first line."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        for line in iter(stream.readline, ""):
            loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\r\n"))
        loop.call_soon_threadsafe(queue.put_nowait, _EOF)

    threading.Thread(target=read, name="raftlog-stdin", daemon=True).start()
    ended = False
    while not ended:
        first = await queue.get()
        if first is _EOF:
            return
        batch = [first]
        deadline = loop.time() + linger_s
        while len(batch) < size:
            try:
                line = await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                break
            if line is _EOF:
                ended = True
                break
            batch.append(line)
        yield batch


def line_message(line: str, separator: str | None, args: argparse.Namespace, headers: Any) -> Message:
    key = args.key
    value = line
    if separator is not None and separator in line:
        key, value = line.split(separator, 1)
    return Message(value, key=key, headers=headers, partition=args.partition, timestamp_ms=args.timestamp)


async def produce_stdin(
    client: RaftlogClient,
    args: argparse.Namespace,
    headers: Any,
    emit: Callable[[Any], None],
    stream: TextIO | None = None,
) -> None:
    lines = stream if stream is not None else sys.stdin
    async for group in stdin_batches(lines, args.batch, args.linger_ms / 1000):
        messages = [line_message(line, args.key_separator, args, headers) for line in group]
        for produced in await client.produce(args.topic, messages):
            emit(produced)
