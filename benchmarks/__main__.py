"""``python -m benchmarks NAME [args...]`` runs benchmark NAME; ``python -m benchmarks`` alone lists them.

A benchmark is a module of this package (``quality`` and its own ``__main__`` count as one) that runs
when executed as ``__main__``. They are found by reading the sources, not by importing them, so listing
them costs nothing and a benchmark whose optional extras are missing is still listed. NAME is the
module's path under ``benchmarks`` (``recall_speed``, ``quality``, ``quality.reconstruct_bench``); the
benchmark runs exactly as ``python -m benchmarks.NAME`` would run it, with ``args`` as its arguments.
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path
from typing import Final

__all__ = ["HERE", "benchmarks", "main", "summary"]

HERE: Final = Path(__file__).resolve().parent


def _runs_as_main(tree: ast.Module) -> bool:
    """Whether the module has an ``if __name__ == "__main__":`` block at its top level."""
    for node in tree.body:
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            continue
        test = node.test
        if (
            isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
            and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__"
        ):
            return True
    return False


def _name(path: Path) -> str:
    parts = path.relative_to(HERE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__main__" else parts)


def benchmarks() -> dict[str, Path]:
    """Each benchmark's NAME and its source file, by name.

    Private modules (a leading ``_``, such as the peers' worker scripts that run inside another venv) and
    this module are not benchmarks.
    """
    found: dict[str, Path] = {}
    for path in sorted(HERE.rglob("*.py")):
        relative = path.relative_to(HERE)
        if relative == Path("__main__.py") or any(p.startswith((".", "_")) for p in relative.parent.parts):
            continue
        if path.name.startswith("_") and path.name != "__main__.py":
            continue
        if _runs_as_main(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            found[_name(path)] = path
    return found


def summary(path: Path) -> str:
    """The first line of a benchmark's docstring (the package's, for a package's ``__main__``)."""
    source = path.parent / "__init__.py" if path.name == "__main__.py" else path
    doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
    return doc.strip().split("\n", 1)[0]


def main(argv: list[str]) -> int:
    found = benchmarks()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m benchmarks NAME [args...]\n\nbenchmarks:")
        width = max(map(len, found))
        for name, path in found.items():
            print(f"  {name:<{width}}  {summary(path)}")
        return 0
    name, args = argv[0], argv[1:]
    if name not in found:
        print(f"no benchmark named {name!r}; `python -m benchmarks` lists them", file=sys.stderr)
        return 2
    # The benchmark sees the arguments as if it had been started on its own (``sys.argv[1:]``).
    sys.argv = [str(found[name]), *args]
    runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
