"""How a read scope reads as a RediSearch filter. Scope values are indexed as tags in hex, so no
character of a caller's id can change the query's meaning."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpersona.model.scope import ReadScope

__all__ = ["scope_query", "tag", "tag_prefix"]


def tag(value: str) -> str:
    """The tag form of a scope value: hex of its UTF-8 bytes, or ``x`` (not a hex digit) for ``''``."""
    return value.encode().hex() or "x"


def tag_prefix(value: str) -> str:
    """The tag form of a prefix, for ``{...*}`` prefix queries (hex keeps prefixes prefixes)."""
    return value.encode().hex()


def scope_query(scope: ReadScope, *, with_source: bool) -> str:
    """The RediSearch filter clause for ``scope``.

    ``with_source`` is false for indexes that have no source (episodes, raw entries).
    """
    parts = [f"@agent:{{{tag(scope.agent_id)}}}"]
    projects = scope.projects
    if projects is not None:
        parts.append("@project:{" + "|".join(tag(p) for p in projects) + "}")
    channels = scope.channels
    if channels is not None:
        parts.append("@channel:{" + "|".join(tag(c) for c in channels) + "}")
    if with_source and scope.source_id:
        if scope.source_is_prefix:
            parts.append(f"@source:{{{tag_prefix(scope.source_id)}*}}")
        else:
            parts.append(f"@source:{{{tag(scope.source_id)}}}")
    return " ".join(parts)
