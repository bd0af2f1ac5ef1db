"""Sending a request on to the leader (the only outgoing HTTP of a node's API).

A connection that could not be opened means the request was never sent: safe to retry (503). A request
that was sent but whose answer never came back is "outcome unknown" for a write (504) and plain
unavailability for a read (503).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from api import errors
from api.errors import BadRequest, ForwardOutcomeUnknown, LeaderUnreachable
from api.routing import HOPS_HEADER, ForwardTo
from api.schemas import parse_json
from raftlog_client.contract import HIGH_WATERMARK_HEADER, LEADER_HEADER

REQUEST_HEADERS = ("Content-Type", "Accept", "Authorization")
RESPONSE_HEADERS = (
    "Content-Type",
    "Retry-After",
    "WWW-Authenticate",
    "Allow",
    LEADER_HEADER,
    HIGH_WATERMARK_HEADER,
)


@dataclass(frozen=True, slots=True)
class Forwarded:
    status: int
    headers: dict[str, str]
    body: bytes

    def error_payload(self) -> dict[str, Any]:
        """The leader's error body, or an internal error naming its status when it sent none we can use."""
        try:
            payload = parse_json(self.body)
        except BadRequest:
            payload = None
        if isinstance(payload, dict) and isinstance(payload.get("error_code"), int):
            return payload
        return {
            "error_code": errors.INTERNAL.error_code,
            "message": f"leader answered {self.status} without an error body",
        }


class Forwarder:
    """Owns one ``aiohttp.ClientSession``, opened on first use and closed with the app."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        return self._session

    async def send(
        self,
        target: ForwardTo,
        method: str,
        path_qs: str,
        headers: Mapping[str, str],
        body: bytes,
        timeout_s: float,
        *,
        write: bool,
    ) -> Forwarded:
        """``headers``: the incoming request's (a case-insensitive multidict); only the content type,
        accept and authorization headers travel on, with the incremented hop count."""
        outgoing = {name: headers[name] for name in REQUEST_HEADERS if name in headers}
        outgoing[HOPS_HEADER] = str(target.hops)
        url = target.url + path_qs
        try:
            async with self._client().request(
                method,
                url,
                data=body if body else None,
                headers=outgoing,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                payload = await response.read()
                kept = {name: response.headers[name] for name in RESPONSE_HEADERS if name in response.headers}
                return Forwarded(response.status, kept, payload)
        except aiohttp.ClientConnectorError as exc:
            raise LeaderUnreachable(f"leader {target.node} at {target.url} unreachable: {exc}") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            reason = f"forwarded to leader {target.node} at {target.url}, no answer: {exc!r}"
            if write:
                raise ForwardOutcomeUnknown(reason + "; the write may or may not be applied") from None
            raise LeaderUnreachable(reason) from None
