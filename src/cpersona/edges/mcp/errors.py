"""A tool's failure, in the one shape every tool answers with: ``{"ok": false, "error": {...}}``.

The reference server answers a failed tool with ``ok: false`` and ``error`` (and a caller is told to
treat any answer carrying ``error`` as a failure); here ``error`` is the same object the HTTP envelope
carries, ``{code, message, field}``, so a caller of either edge reads one code for one failure and the
field a bad argument names. The exception tree is mapped here once, as the HTTP edge maps it: bad input
names its field, a missing record names ``ref``, a backend outage says which backend without a file
name, a key that may not act for the agent is ``FORBIDDEN``; anything else is an opaque
``INTERNAL_ERROR`` whose detail goes to the log only. The tool result is also marked ``isError``.
"""

from __future__ import annotations

import logging
from typing import Any

from cpersona.edges.http.errors import backend_failure, backend_message, single_error
from cpersona.errors import (
    BackendUnavailable,
    CpersonaError,
    InsufficientStorage,
    InvalidRequest,
    RecordNotFound,
)

__all__ = ["failure", "tool_error"]

log = logging.getLogger("cpersona.mcp")

_OPAQUE = "An internal error occurred"


def tool_error(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The body of a failed tool call."""
    return {"ok": False, "error": {"code": code, "message": message, "field": field}}


def failure(exc: Exception, tool: str) -> dict[str, Any]:
    """The body a call of ``tool`` that raised ``exc`` answers with."""
    inner = single_error(exc)
    outage = backend_failure(inner)
    if outage is not None:
        if not isinstance(outage, InsufficientStorage):
            log.warning("tool %s: %s", tool, outage)
        return tool_error(outage.code, backend_message(outage))
    if isinstance(inner, InvalidRequest):
        return tool_error(inner.code, str(inner), inner.field)
    if isinstance(inner, RecordNotFound):
        return tool_error(inner.code, str(inner), inner.field)
    if isinstance(inner, CpersonaError) and not isinstance(inner, BackendUnavailable) and inner.status < 500:
        # The caller's to fix (FORBIDDEN: a key that may not act for the agent): its words are for the caller.
        return tool_error(inner.code, str(inner), getattr(inner, "field", None))
    # Engine-state errors and anything unexpected are server faults: logged whole, answered opaquely.
    log.error("tool %s failed: %s", tool, inner, exc_info=inner)
    return tool_error("INTERNAL_ERROR", _OPAQUE)
