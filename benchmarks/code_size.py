"""The longest functions and the largest modules of a source tree, for a review of the code's shape.

A function does one step and a module holds one concept (DESIGN.md, "Layout"). No number says when either
is too long, so this only lists where to look first, the longest of each kind first::

    .venv/bin/python -m benchmarks code_size [src] [--top 10]

A function's length runs from its ``def`` line to its last line (decorators left out, docstring and
comments in), and a nested function or a method counts on its own as well as inside its parent; it is
named ``file:Class.method`` or ``file:outer.inner``. A module's size is its number of lines.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence


@dataclasses.dataclass(frozen=True, slots=True)
class Sized:
    lines: int
    where: str


def functions(path: Path) -> Iterator[Sized]:
    """Every function and method in one file, with its length in lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    yield from _walk(tree, path, ())


def _walk(node: ast.AST, path: Path, outer: tuple[str, ...]) -> Iterator[Sized]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = (*outer, child.name)
            end = child.end_lineno if child.end_lineno is not None else child.lineno
            yield Sized(end - child.lineno + 1, f"{path}:{'.'.join(name)}")
            yield from _walk(child, path, name)
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, path, (*outer, child.name))
        else:
            yield from _walk(child, path, outer)


def measure(root: Path) -> tuple[list[Sized], list[Sized]]:
    """The functions and the modules under ``root``, each list longest first (ties by name)."""
    funcs: list[Sized] = []
    modules: list[Sized] = []
    for path in sorted(root.rglob("*.py")):
        modules.append(Sized(len(path.read_text(encoding="utf-8").splitlines()), str(path)))
        funcs.extend(functions(path))
    return sorted(funcs, key=_longest_first), sorted(modules, key=_longest_first)


def _longest_first(item: Sized) -> tuple[int, str]:
    return -item.lines, item.where


def report(funcs: Sequence[Sized], modules: Sequence[Sized], *, top: int) -> list[str]:
    lines: list[str] = []
    for title, items in ((f"{top} longest functions", funcs), (f"{top} largest modules", modules)):
        lines += ["", f"{title}:"] if lines else [f"{title}:"]
        lines += [f"  {s.lines:5d}  {s.where}" for s in items[:top]]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("root", nargs="?", type=Path, default=Path("src"), help="the tree to read (src)")
    parser.add_argument("--top", type=int, default=10, help="how many of each to list (10)")
    args = parser.parse_args(argv)
    root: Path = args.root
    if not root.is_dir():
        parser.error(f"{root} is not a folder")
    funcs, modules = measure(root)
    print("\n".join(report(funcs, modules, top=args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
