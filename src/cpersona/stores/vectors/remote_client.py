"""qdrant-client in the store's terms: the client for a URL, the URL as labels show it, and a
:class:`~cpersona.stores.protocols.VectorFilter` and a payload index kind as the client's models.
"""

from __future__ import annotations

import math
import urllib.parse
from typing import TYPE_CHECKING

from qdrant_client import AsyncQdrantClient, models

from cpersona.errors import VectorStoreUnavailable
from cpersona.stores.vectors.common import IndexKind, MatchClause, filter_clauses

if TYPE_CHECKING:
    from cpersona.stores.protocols import VectorFilter

__all__ = ["display_url", "index_schema", "new_client", "remote_filter"]


def index_schema(kind: IndexKind) -> models.PayloadSchemaType | models.KeywordIndexParams:
    if kind == "tenant":
        return models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
    if kind == "keyword":
        return models.PayloadSchemaType.KEYWORD
    if kind == "float":
        return models.PayloadSchemaType.FLOAT
    return models.PayloadSchemaType.INTEGER


def remote_filter(flt: VectorFilter) -> models.Filter:
    must: list[models.Condition] = []
    for clause in filter_clauses(flt):
        if isinstance(clause, MatchClause):
            values = list(clause.values)
            match: models.Match = (
                models.MatchValue(value=values[0]) if len(values) == 1 else models.MatchAny(any=values)
            )
            must.append(models.FieldCondition(key=clause.key, match=match))
        else:
            must.append(
                models.FieldCondition(key=clause.key, range=models.Range(gte=clause.gte, lt=clause.lt))
            )
    return models.Filter(must=must)


def display_url(url: str) -> str:
    """The URL without credentials, for labels and error messages."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def new_client(url: str, api_key: str | None, timeout: float) -> AsyncQdrantClient:
    try:
        if url == ":memory:":
            return AsyncQdrantClient(location=":memory:")
        return AsyncQdrantClient(
            url=url,
            api_key=api_key,
            # The client takes whole seconds; the anyio deadline keeps the exact value.
            timeout=max(1, math.ceil(timeout)),
            # The compatibility check is a blocking request from a thread of its own that can only
            # warn; the server's version is read asynchronously, under the deadline, when opening.
            check_compatibility=False,
        )
    except Exception as exc:
        raise VectorStoreUnavailable(f"cannot use the Qdrant URL {display_url(url)!r}: {exc}") from exc
