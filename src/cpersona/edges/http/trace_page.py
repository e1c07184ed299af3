"""``GET /traces``: the live trace page, one self-contained HTML file that follows the trace stream.

The page (``trace_page.html`` beside this module, package data) is HTML, CSS and vanilla JavaScript in
one file: no CDN, no build step. It reads ``GET /v1/traces/stream``
(:mod:`~cpersona.edges.http.trace_stream`) with ``fetch`` rather than ``EventSource`` so that it can send
``Authorization: Bearer`` (a key typed into the page, kept in the tab's session storage only), and shows
each recall and reconstruct as a card: the arms and what each found, the gate's drops and their reasons,
what autocut and the count cut, the cue's move and seats, the coverage summary and a stage-by-stage
timing waterfall. A trace holds refs, ranks, scores and reasons and never stored text, and the page
inserts everything as text (``textContent``), never as markup: an agent id or a ref cannot inject HTML.

The page holds no data itself; its filters (``agent_id``, ``project_id``) are checked here as the stream
checks them, so a bad one is a 400 naming it, and are read by the script from the address. The answer
carries a Content-Security-Policy that allows only the page's own inline style and script (by hash) and
connections to this server.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.resources
import re
from typing import TYPE_CHECKING

import anyio
from starlette.responses import HTMLResponse

from cpersona.edges.http.operation import Operation
from cpersona.edges.http.reading import read_query
from cpersona.edges.http.trace_stream import TRACE_STREAM_OPERATIONS, TraceStreamQuery

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["PAGE_PATH", "TRACE_OPERATIONS", "page_html"]

PAGE_PATH = "/traces"
_ASSET = "trace_page.html"


@functools.cache
def page_html() -> str:
    """The page's HTML, read once from the package."""
    return importlib.resources.files(__package__ or "cpersona.edges.http").joinpath(_ASSET).read_text("utf-8")


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


@functools.cache
def _policy() -> str:
    html = page_html()
    scripts = [_digest(m) for m in re.findall(r"<script>(.*?)</script>", html, re.DOTALL)]
    styles = [_digest(m) for m in re.findall(r"<style>(.*?)</style>", html, re.DOTALL)]
    return "; ".join(
        (
            "default-src 'none'",
            "script-src " + " ".join(scripts),
            "style-src " + " ".join(styles),
            "connect-src 'self'",
            # The page's empty icon (a data URL) keeps the browser from asking for /favicon.ico.
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )


async def _page(request: Request) -> Response:
    read_query(request, TraceStreamQuery)
    # The first request reads the page from the package (``_policy`` reads it through ``page_html``), in a
    # worker thread rather than on the loop; later ones find both cached.
    policy = await anyio.to_thread.run_sync(_policy)
    headers = {
        "Content-Security-Policy": policy,
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    return HTMLResponse(page_html(), headers=headers)


TRACE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        PAGE_PATH,
        _page,
        "The live trace page (HTML): each recall and reconstruct as it happens",
        None,
        query=TraceStreamQuery,
        errors=(400,),
        media_type="text/html",
        description="A self-contained page (no external resource) that follows `GET /v1/traces/stream` "
        "with the same filters, read from its address.",
    ),
    *TRACE_STREAM_OPERATIONS,
)
"""The page's and the stream's routes (routes.py adds them to the table)."""
