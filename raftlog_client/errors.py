"""The client's errors, and the one decoder of the server's error answers (``{"error_code", "message",
...}``) that every client of this package uses."""

from __future__ import annotations

import json
from typing import Any

from raftlog_contract import OFFSET_OUT_OF_RANGE


class ClientError(Exception):
    """Base of the client's errors."""


class RequestFailed(ClientError):
    """The server answered with an error (after any retries). ``request`` ("GET /topics/t") is named in
    the message when known, ``body`` is the decoded answer."""

    def __init__(
        self, status: int, error_code: int | None, message: str, body: Any = None, *, request: str = ""
    ) -> None:
        where = f"{request}: " if request else ""
        super().__init__(f"{where}HTTP {status} (error_code {error_code}): {message}")
        self.status = status
        self.error_code = error_code
        self.message = message
        self.body = body
        self.request = request


class OffsetOutOfRange(RequestFailed):
    """HTTP 416: the offset asked for is below the log start or beyond the end."""

    def __init__(
        self, message: str, body: Any, log_start_offset: int, end_offset: int, *, request: str = ""
    ) -> None:
        super().__init__(416, OFFSET_OUT_OF_RANGE, message, body, request=request)
        self.log_start_offset = log_start_offset
        self.end_offset = end_offset


class Unavailable(ClientError):
    """No server gave a usable answer within the retry budget (unreachable, or the answer was lost)."""


def decode_error(status: int, data: bytes, request: str = "") -> RequestFailed:
    """The error an answer of ``status`` >= 400 with body ``data`` stands for."""
    try:
        body: Any = json.loads(data) if data else None
    except ValueError:  # not JSON: a proxy's page, say
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("error_code"), int):
        text = data[:200].decode("utf-8", "replace")
        return RequestFailed(status, None, text, body, request=request)
    message = str(body.get("message", ""))
    if (
        status == 416
        and isinstance(body.get("log_start_offset"), int)
        and isinstance(body.get("end_offset"), int)
    ):
        return OffsetOutOfRange(message, body, body["log_start_offset"], body["end_offset"], request=request)
    return RequestFailed(status, body["error_code"], message, body, request=request)
