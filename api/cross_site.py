"""Cross-site request forgery: a page of another origin must not drive a state-changing route with the
credentials a browser holds for this node (HTTP Basic credentials it remembers for the node's address).

A browser sends a cross-origin request without asking the server first (a CORS "simple" request) only for
GET, HEAD and POST with no ``Content-Type`` or one of ``application/x-www-form-urlencoded``,
``multipart/form-data`` and ``text/plain``; the node serves no CORS headers, so everything else is asked
first and refused by the browser. So on every state-changing route (any method but GET, HEAD, OPTIONS):

- a body or ``Content-Type`` a page could send that way is refused 415 before anything is done: the three
  simple types (even with an empty body: an empty form is a request too) and a body without a
  ``Content-Type``. A route's body is JSON or one of its own vendor types, never one of these (a route that
  reads a body refused them already; those that read none, or none when it is empty, took them); any
  other type goes on to the route, which checks its own;
- a request without a body whose ``Origin`` header (which browsers send on every cross-origin POST, and
  other clients do not) names another host than the request's ``Host`` is refused 403/40303: the one
  simple request left, a POST with neither body nor type (``transfer_leadership``, a share acquire, a
  token made with its defaults).

Pure: it looks at the request's headers only, before any handler or body read.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import hdrs, web

from api.errors import CrossOrigin, UnsupportedMediaType

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# what a browser sends cross-site without asking first (the Fetch standard's CORS-safelisted types)
SIMPLE_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data", "text/plain"})


def check(request: web.Request) -> None:
    """Raises ``UnsupportedMediaType`` or ``CrossOrigin`` for a state-changing request that a page of another
    site could have sent."""
    if request.method in SAFE_METHODS:
        return
    if hdrs.CONTENT_TYPE in request.headers:
        if request.content_type.lower() in SIMPLE_TYPES:
            raise UnsupportedMediaType(
                request.content_type, "a state-changing endpoint takes JSON (or its own vendor types)"
            )
        return
    if request.body_exists:
        raise UnsupportedMediaType("", "a body needs its Content-Type (JSON, or the endpoint's vendor types)")
    origin = request.headers.get(hdrs.ORIGIN)
    if origin is not None and not same_origin(origin, request.host):
        raise CrossOrigin(f"a request from {origin[:100]!r}, a page of another origin than this node's")


def same_origin(origin: str, host: str) -> bool:
    """Whether the ``Origin`` header names the host (and port) the request was sent to; ``null`` (a sandboxed
    page, a file) never does."""
    try:
        netloc = urlsplit(origin.strip()).netloc
    except ValueError:
        return False
    return bool(netloc) and netloc.lower() == host.strip().lower()
