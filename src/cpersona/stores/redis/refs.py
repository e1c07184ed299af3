"""Record refs (``mem:<id>``, ``ep:<id>``) and the Redis keys of their documents, both ways."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpersona.keys import Keys

__all__ = ["key_of_ref", "ref_of_key"]


def ref_of_key(keys: Keys, key: str) -> str | None:
    """The ref of a memory or episode key (``None`` for any other key)."""
    if key.startswith(keys.memory_prefix):
        return "mem:" + key.removeprefix(keys.memory_prefix)
    if key.startswith(keys.episode_prefix):
        return "ep:" + key.removeprefix(keys.episode_prefix)
    return None


def key_of_ref(keys: Keys, ref: str) -> str:
    """The key of a memory or episode ref; ``ValueError`` for any other text."""
    kind, _, record_id = ref.partition(":")
    if kind == "mem":
        return keys.memory(record_id)
    if kind == "ep":
        return keys.episode(record_id)
    raise ValueError(f"not a memory or episode ref: {ref!r}")
