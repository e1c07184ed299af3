"""How a read scope reads as a RediSearch filter. Scope values are indexed as tags in hex, so no
character of a caller's id can change the query's meaning.

A ``source_id`` prefix read (:attr:`~cpersona.model.scope.ReadScope.source_is_prefix`) is an exact tag
match too: each memory carries, besides its source, every prefix of its source id that a prefix read
could name (:func:`source_prefix_tags`). A tag prefix query (``{abc*}``) would not do: the search module
expands a prefix to at most ``MAXPREFIXEXPANSIONS`` (200) values counted over the whole index, so one
agent's many sources would silently empty another agent's read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpersona.model.scope import ReadScope

__all__ = ["scope_query", "source_prefix_tags", "tag"]


def tag(value: str) -> str:
    """The tag form of a scope value: hex of its UTF-8 bytes, or ``x`` (not a hex digit) for ``''``."""
    return value.encode().hex() or "x"


def source_prefix_tags(source_id: str) -> list[str]:
    """The tags of every prefix of ``source_id`` that ends in a character other than a letter or digit:
    exactly the prefix reads that see this source (``ReadScope.sees_source``), one tag each."""
    return [tag(source_id[: i + 1]) for i, ch in enumerate(source_id) if not ch.isalnum()]


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
            parts.append(f"@source_prefix:{{{tag(scope.source_id)}}}")
        else:
            parts.append(f"@source:{{{tag(scope.source_id)}}}")
    return " ".join(parts)
