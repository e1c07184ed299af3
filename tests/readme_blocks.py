"""The README read the way a reader runs it: its sections, its fenced blocks, the commands of a
``console`` block with the output shown under each, and whether what a command printed matches what
the README shows where that is stable.

In a ``console`` block a command starts at ``$ `` and runs on over the lines that its quotes or a
trailing backslash leave open; the lines after it, up to the next ``$ ``, are what it prints. In shown
output ``…`` stands for anything within a line, and a line that is only ``…`` for any number of lines.
Ids and clock times differ from run to run, so both sides have them replaced before the comparison.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache

__all__ = ["Block", "Step", "blocks", "normalized", "section", "shown_matches", "steps"]

ELLIPSIS = "…"

_FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# An id the README cut short: eight hex digits, maybe more groups, then the ellipsis.
_CUT_UUID = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{1,12})*-?" + ELLIPSIS)
# A clock time standing alone (a trace's header), not the time inside an ISO 8601 timestamp.
_CLOCK = re.compile(r"(?<![\dT:])\d{2}:\d{2}:\d{2}(?![\d:.])")
_ARMS = "   arms     "
_ARM_MORE = " " * len(_ARMS)


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, the rest of its info string and its lines."""

    lang: str
    info: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    """One command of a ``console`` block and the output the README shows under it."""

    command: str
    shown: tuple[str, ...]


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole line such as ``## Python``) up to the next heading of its level
    or above; empty when the README has no such heading."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    if heading not in lines:
        return ""
    start = lines.index(heading) + 1
    inside = False
    for end in range(start, len(lines)):
        if lines[end].startswith("```"):
            inside = not inside
        marks = len(lines[end]) - len(lines[end].lstrip("#"))
        if not inside and 0 < marks <= level and lines[end][marks : marks + 1] == " ":
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text`` in order."""
    return [Block(lang, info.strip(), tuple(body.splitlines())) for lang, info, body in _FENCE.findall(text)]


def _complete(command: str) -> bool:
    """Whether a shell would run ``command`` as it stands: no quote left open, no trailing backslash."""
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command)
    except ValueError:
        return False
    return True


def steps(block: Block) -> list[Step]:
    """The commands of a ``console`` block, each with the output shown under it."""
    found: list[Step] = []
    command: list[str] = []
    shown: list[str] = []
    for line in block.lines:
        if command and not _complete("\n".join(command)):
            command.append(line)
        elif line.startswith("$ "):
            if command:
                found.append(Step("\n".join(command), tuple(shown)))
            command, shown = [line[2:]], []
        elif command:
            shown.append(line)
    if command:
        found.append(Step("\n".join(command), tuple(shown)))
    return found


def _arms_in_name_order(lines: list[str]) -> list[str]:
    """A trace's arms under their names' order: ``trace tail`` lists them in the order they finished."""
    if not any(line.startswith(_ARMS) for line in lines):
        return lines
    first = next(i for i, line in enumerate(lines) if line.startswith(_ARMS))
    end = first + 1
    while end < len(lines) and lines[end].startswith(_ARM_MORE) and lines[end][len(_ARM_MORE) :].strip():
        end += 1
    arms = sorted(line[len(_ARMS) :] for line in lines[first:end])
    ordered = [_ARMS + arms[0], *(_ARM_MORE + arm for arm in arms[1:])]
    return [*lines[:first], *ordered, *_arms_in_name_order(lines[end:])]


def normalized(text: str | tuple[str, ...], replacements: dict[str, str] | None = None) -> list[str]:
    """``text`` as lines, with ``replacements`` made (this run's port and data dir into the README's),
    ids and clock times made alike, and a trace's arms in name order."""
    joined = text if isinstance(text, str) else "\n".join(text)
    for old, new in (replacements or {}).items():
        joined = joined.replace(old, new)
    joined = _CLOCK.sub("<clock>", _CUT_UUID.sub("<uuid>", _UUID.sub("<uuid>", joined)))
    return _arms_in_name_order(joined.splitlines())


def _pattern(shown_line: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in shown_line.split(ELLIPSIS)), re.DOTALL)


def shown_matches(shown: list[str], printed: list[str], *, open_end: bool = False) -> bool:
    """Whether ``printed`` is what ``shown`` shows: line by line, a ``…`` line standing for any number of
    lines; with ``open_end`` the output may go on after the shown lines (a server that keeps logging)."""
    patterns = [None if line == ELLIPSIS else _pattern(line) for line in shown]

    @cache
    def from_(i: int, j: int) -> bool:
        if i == len(patterns):
            return open_end or j == len(printed)
        pattern = patterns[i]
        if pattern is None:
            return any(from_(i + 1, k) for k in range(j, len(printed) + 1))
        return j < len(printed) and pattern.fullmatch(printed[j]) is not None and from_(i + 1, j + 1)

    return from_(0, 0)
