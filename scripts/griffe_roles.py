"""A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): the docstrings' reST as Markdown.

The package's docstrings cross-reference with Sphinx roles (:class:`~cpersona.InvalidRequest`) and open
literal blocks with ``::``, which Markdown would print as written; the reference shows the name as code
instead (the short name where the role asks for it with ``~``) and the block after a plain colon.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import griffe

if TYPE_CHECKING:
    import ast

__all__ = ["SphinxRoles"]

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj|const|ref):`(~?)([^`]+)`")
# reST's "Use it as::" before an indented block; in Markdown the block is code already.
_LITERAL = re.compile(r"::$", re.MULTILINE)


def _as_code(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target.lstrip('.')}`"


class SphinxRoles(griffe.Extension):
    def on_instance(
        self,
        *,
        node: ast.AST | griffe.ObjectNode,
        obj: griffe.Object,
        agent: griffe.Visitor | griffe.Inspector,
        **kwargs: Any,
    ) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _LITERAL.sub(":", _ROLE.sub(_as_code, obj.docstring.value))
