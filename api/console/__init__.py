"""The web console: one page (``/console``) that every node serves, and the files it loads.

The console is a client of the node's own HTTP API and nothing else: its script calls the same routes a
program would (``/v1`` for the admin work, the client routes for records and offsets, ``/metrics`` for the
charts), with the credentials the person gave it, so every answer, refusal and ACL is the API's. This module
only hands out files: the page, its scripts and style (``static/``, ours) and the chart library (uPlot, from
the npm registry through ``scripts/bootstrap.sh``, which runs ``npm ci`` on this folder's
``package-lock.json``). Nothing is fetched from elsewhere at run time: the Content-Security-Policy below lets
the page load and call only its own node.

The files are listed once, when the app is built: a path outside that list is 404 whatever it spells
(no traversal, no listing). The page and its files carry no data and need no credential; the page asks for
one where the node requires it.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from api.errors import RouteNotFound

PREFIX = "/console"
HERE = Path(__file__).parent
STATIC = HERE / "static"
# the third-party files the page loads, from the npm packages of package.json (installed into node_modules)
VENDOR = {
    "vendor/uPlot.iife.min.js": HERE / "node_modules" / "uplot" / "dist" / "uPlot.iife.min.js",
    "vendor/uPlot.min.css": HERE / "node_modules" / "uplot" / "dist" / "uPlot.min.css",
}
# the page may load and call only its own node; no inline script or style, no frames
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # a node upgraded in place serves its new files at the next load
}
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}


def is_console(path: str) -> bool:
    """Whether a request path is the console's (open: it carries no data)."""
    return path == PREFIX or path.startswith(PREFIX + "/")


@dataclass(frozen=True, slots=True)
class Assets:
    """The files the console serves, by their path under ``/console/``."""

    files: dict[str, Path]

    @classmethod
    def found(cls) -> Assets:
        files = {str(path.relative_to(STATIC)): path for path in STATIC.rglob("*") if path.is_file()}
        files.update(VENDOR)
        return cls(files)

    async def page(self, request: web.Request) -> web.StreamResponse:
        return self._file("index.html")

    async def asset(self, request: web.Request) -> web.StreamResponse:
        return self._file(request.match_info["name"])

    def _file(self, name: str) -> web.StreamResponse:
        path = self.files.get(name)
        if path is None:
            raise RouteNotFound(f"no console file {name!r}")
        if not path.is_file():  # a vendor file before the set-up ran
            raise RouteNotFound(f"console file {name!r} is not installed: run scripts/bootstrap.sh (npm ci)")
        kind = TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return web.FileResponse(path, headers={**HEADERS, "Content-Type": f"{kind}; charset=utf-8"})


def add_routes(app: web.Application) -> None:
    assets = Assets.found()
    app.router.add_get(PREFIX, assets.page)
    app.router.add_get(PREFIX + "/", assets.page)
    app.router.add_get(PREFIX + "/{name:.+}", assets.asset)
