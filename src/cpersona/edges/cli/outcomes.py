"""What a ``cpersona`` command ends with: its output, its exit codes, and the error for a bad command line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "BadInput",
    "show",
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


def show(
    result: Mapping[str, Any], *, as_json: bool, render: Callable[[Mapping[str, Any]], Iterable[str]]
) -> int:
    """Print a command's answer: the JSON as the server sent it, or ``render``'s lines for a person."""
    if as_json:
        print(orjson.dumps(result).decode())
    else:
        for line in render(result):
            print(line)
    return EXIT_OK
