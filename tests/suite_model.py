"""The embedding model the suite's engines run unless a test names one."""

from __future__ import annotations

from typing import Final

SUITE_MODEL: Final = "all-MiniLM-L6-v2"
"""all-MiniLM-L6-v2, not the default (multilingual-e5-small): it costs half the default's work per text, so
the suite keeps within its time, and the cosines the tests reason about were written in it. The default
model is what the goldens, the README walk-through, the MCP guide's transcripts, ``test_e5_engine``,
``test_e5``, every engine opened from the environment and every server or CLI child process run."""
