"""What a ``cpersona`` command ends with: its exit codes, and the error for a bad command line."""

from __future__ import annotations

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "BadInput",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130
# 128 + SIGPIPE, as a shell reports a command whose reader closed the pipe.
EXIT_BROKEN_PIPE = 141


class BadInput(Exception):
    """A command-line problem found before or outside the engine (printed as ``error: <message>``)."""
