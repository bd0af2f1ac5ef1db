"""One HTTP exchange with a server over aiohttp, and the ``Answer`` every transport of this package
returns. One attempt, no retries: ``RaftlogClient`` adds the retry rule (``retry.py``); callers that
judge every attempt themselves (the fault harness, the benchmarks' measured requests) use it as it is.

Failures are typed by what they say about the request: ``NotSent`` (the connection failed before the
request left: nothing was done) and ``NoAnswer`` (it left but no answer came: done or not)."""

from __future__ import annotations

import ssl as ssl_module
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raftlog_client.errors import ClientError

if TYPE_CHECKING:
    import aiohttp


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class NotSent(ClientError):
    """The connection failed before the request was sent: nothing was done."""


class NotTrusted(NotSent):
    """The server's certificate was not trusted (not signed by the CA given, or made out to another host):
    nothing was sent. Waiting does not change it, as it may a server that is down."""


class NoAnswer(ClientError):
    """The request was sent, but no answer came (``timed_out``, or the connection was lost): its outcome
    is unknown."""

    def __init__(self, message: str, *, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class Session:
    """Keep-alive connections to any number of servers (aiohttp), at most ``limit`` open at once
    (0: no limit). Opened on first use; ``close`` ends them. ``ssl``: how https servers are checked
    (None: against the system's trusted roots)."""

    def __init__(self, limit: int = 100, ssl: ssl_module.SSLContext | None = None) -> None:
        self.limit = limit
        self.ssl = ssl
        self._session: aiohttp.ClientSession | None = None

    async def exchange(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str | int] | None = None,
        timeout_s: float,
    ) -> Answer:
        """One request to ``url`` and its whole answer; raises ``NotSent`` or ``NoAnswer``."""
        # imported at the first request, not with the package: aiohttp's import (with the TLS context its
        # connector module makes) is ~0.5 s of CPU, which every command line that never sends a request
        # (``raftlog dev``, ``--help``, the local ``log`` commands) would pay
        import aiohttp

        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.limit, ssl=True if self.ssl is None else self.ssl)
            self._session = aiohttp.ClientSession(connector=connector)
        try:
            async with self._session.request(
                method,
                url,
                data=body,
                params=params,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                data = await response.read()
                return Answer(response.status, {k.lower(): v for k, v in response.headers.items()}, data)
        except aiohttp.ClientConnectorCertificateError as exc:
            raise NotTrusted(f"{url}: {exc.certificate_error}") from None
        except aiohttp.ClientConnectorError as exc:
            raise NotSent(f"{url}: {exc.strerror or exc}") from None
        except TimeoutError:
            raise NoAnswer(f"{url}: no answer within {timeout_s:g} s", timed_out=True) from None
        except aiohttp.ClientError as exc:
            raise NoAnswer(f"{url}: {exc!r}", timed_out=False) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
