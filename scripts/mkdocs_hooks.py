"""mkdocs hooks (mkdocs.yml ``hooks:``): the site carries the full OpenAPI document of this version.

It is made at build time from the same function the server answers ``GET /openapi.json`` with, so the
download is never stale and the repository keeps no copy of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from cpersona.edges.http.app import openapi_document
from cpersona.settings import Settings

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

from mkdocs.structure.files import File

__all__ = ["on_files"]


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    document = orjson.dumps(openapi_document(Settings()), option=orjson.OPT_INDENT_2)
    files.append(File.generated(config, "reference/openapi.json", content=document))
    return files
