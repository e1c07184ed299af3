"""Every Python example of the docs is a program that compiles as written: no top-level ``await`` or
``async with``, no fragment a reader cannot paste and run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _examples() -> list[tuple[str, str]]:
    return [
        (f"{page.relative_to(DOCS)}#{n}", code)
        for page in sorted(DOCS.rglob("*.md"))
        for n, code in enumerate(_BLOCK.findall(page.read_text(encoding="utf-8")))
    ]


def test_the_docs_have_python_examples() -> None:
    assert len(_examples()) >= 3


@pytest.mark.parametrize(("where", "code"), _examples(), ids=[where for where, _ in _examples()])
def test_a_python_example_compiles_as_a_program(where: str, code: str) -> None:
    compile(code, where, "exec")


def test_top_level_await_is_what_this_catches() -> None:
    with pytest.raises(SyntaxError):
        compile("import cpersona\nasync with cpersona.open() as memory:\n    pass\n", "x", "exec")
