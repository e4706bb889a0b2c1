"""The playground: one static page (HTML, JavaScript, CSS shipped in the package) that talks to
this API from the browser, so people can see what an agent does without writing a client.

The page holds no data and needs no tenant: it is served without a key. Every call it makes to
the API carries the key the user types (Bearer), which it keeps in sessionStorage only. The
Content-Security-Policy lets the page reach its own origin and nothing else.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, Response

from ..errors import NotFound

router = APIRouter(include_in_schema=False)

#: The files a request may name, and their content types: nothing else under the folder is served.
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "playground.js": "text/javascript; charset=utf-8",
    "playground.css": "text/css; charset=utf-8",
}

#: Only this origin: no CDN, no outside request, no inline script, no framing.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
        " img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _read(name: str) -> bytes:
    """A file of the page, read once per container (they ship with the code)."""
    return resources.files(__package__).joinpath("playground", name).read_bytes()


def _asset(name: str) -> Response:
    return Response(_read(name), media_type=ASSETS[name], headers=HEADERS)


@router.get("/playground")
def playground() -> Response:
    return _asset("index.html")


@router.get("/playground/{asset}")
def playground_asset(asset: str) -> Response:
    if asset not in ASSETS or asset == "index.html":
        raise NotFound(f"No playground file {asset!r}")
    return _asset(asset)
