"""Every search the adapter sends, as typed calls built with redis-py's search API.

Each function builds its request with :class:`~redis.commands.search.query.Query` or
:class:`~redis.commands.search.aggregation.AggregateRequest` and returns the reply read once by
:mod:`.replies`. Aggregations go through ``client.ft(index)``; searches are sent as the query built
them and read by :func:`~.replies.search_page` (why: see :mod:`.replies`). The query strings come from
the callers (:mod:`.lexical`, :mod:`.scope`); this module decides only the options, which are those
the engine has always sent: the same scorer, ``VERBATIM`` wherever words are searched, dialect 2 (3 to
read exact JSON numbers), the same sort fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

from redis.commands.search.aggregation import AggregateRequest, Desc
from redis.commands.search.query import Query

from cpersona.stores.redis.replies import Page, aggregate_keys, search_page

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.replies import Hit

__all__ = [
    "count",
    "documents",
    "every_key",
    "key_pages_in_order",
    "keys_page",
    "nearest",
    "newest_by_time",
    "newest_field",
    "newest_keys",
    "ranked",
    "seq_at",
    "time_span",
]

SortField = Literal["seq", "ts"]


def _query(text: str) -> Any:
    # Some of Query's builder methods are unannotated; typed as Any, the chains below type-check.
    return Query(text)


async def _search(
    client: RedisClient, index: str, query: Any, *, content: bool = True, scores: bool = False
) -> Page:
    # The type stubs leave execute_command untyped.
    reply = await cast("Any", client).execute_command("FT.SEARCH", index, *query.get_args())
    return search_page(reply, content=content, scores=scores)


async def ranked(
    client: RedisClient, index: str, query: str, fetch: int, scorer: str, *, fields: Sequence[str] = ("seq",)
) -> list[Hit]:
    """The best ``fetch`` hits of a word query by ``scorer``, each with its score and ``fields``."""
    q = _query(query).verbatim().with_scores().scorer(scorer).return_fields(*fields).paging(0, fetch)
    return list((await _search(client, index, q.dialect(2), scores=True)).hits)


async def newest_keys(client: RedisClient, index: str, query: str, fetch: int) -> list[str]:
    """The keys of the ``fetch`` newest matches by insertion ``seq`` (words matched ``VERBATIM``)."""
    q = _query(query).verbatim().no_content().sort_by("seq", asc=False).paging(0, fetch).dialect(2)
    return (await _search(client, index, q, content=False)).keys


class _SortThenLoad(AggregateRequest):
    """An aggregation that loads each kept row's key after sorting, so only the kept rows load it.

    redis-py places ``LOAD`` before every step of the plan (every matching row would load its key), and
    adds ``SCORER TFIDF``, which an aggregation without scores has no use for; this request sends
    neither, as the engine always has.
    """

    def __init__(self, query: str) -> None:
        super().__init__(query)
        self._scorer = ""

    def build_args(self) -> list[str]:
        args: list[str] = cast("Any", super()).build_args()
        return [*args, "LOAD", "1", "@__key"]


async def newest_by_time(client: RedisClient, index: str, query: str, fetch: int) -> list[str]:
    """The keys of the ``fetch`` newest matches by record time, ties by insertion ``seq``.

    ``FT.SEARCH`` sorts by one field only, so this aggregates (both fields are sortable).
    """
    request = cast("Any", _SortThenLoad(query)).verbatim()
    request = request.sort_by(Desc("@ts"), Desc("@seq"), max=fetch).dialect(2)
    return aggregate_keys(await cast("Any", client).ft(index).aggregate(request))


async def seq_at(client: RedisClient, index: str, query: str, rank: int) -> tuple[int, int | None]:
    """How many rows match, and the ``seq`` of the row at 0-based ``rank`` from the newest."""
    q = _query(query).sort_by("seq", asc=False).paging(rank, 1).return_fields("seq").dialect(2)
    found = await _search(client, index, q)
    return found.total, found.hits[0].integer("seq") if found.hits else None


async def time_span(client: RedisClient, index: str, query: str) -> tuple[float, float] | None:
    """``(oldest, newest)`` record time of the matches, or ``None`` when nothing matches.

    The two sorted one-row searches go in one ``MULTI``, so they read the same state of the store. The
    times are read as JSON (dialect 3): the search engine prints numbers with 12 significant digits,
    which would move a microsecond-precise time by up to ten milliseconds.
    """
    pipe: Any = client.pipeline(transaction=True)
    for asc in (True, False):
        q = _query(query).sort_by("ts", asc=asc).paging(0, 1).return_fields("$.ts").dialect(3)
        pipe.execute_command("FT.SEARCH", index, *q.get_args())
    oldest, newest = (search_page(reply, content=True) for reply in await pipe.execute())
    low, high = _hit_time(oldest), _hit_time(newest)
    return None if low is None or high is None else (low, high)


def _hit_time(found: Page) -> float | None:
    if found.total == 0 or not found.hits:
        return None
    values = found.hits[0].json_values("$.ts")
    return float(values[0]) if values else None


async def keys_page(client: RedisClient, index: str, query: str, offset: int, num: int) -> list[str]:
    """The keys of one page of matches, unsorted (in order: :func:`key_pages_in_order`)."""
    q = _query(query).no_content().paging(offset, num).dialect(2)
    return (await _search(client, index, q, content=False)).keys


async def key_pages_in_order(
    client: RedisClient, index: str, query: str, page: int
) -> AsyncIterator[list[str]]:
    """The keys of every match in insertion order, ``page`` at a time.

    Each page is the matches after the last one's sequence number, not those at an offset: an offset
    makes the engine rank that many rows again, and on 100,000 memories a page at offset 90,000 missed
    the search's 500 ms limit (55 ms at offset 0). So every page is as cheap as the first."""
    last: int | None = None
    while True:
        found = await _keys_after_seq(client, index, query, last, page)
        if found:
            yield [key for key, _ in found]
        if len(found) < page:
            return
        last = found[-1][1]


async def _keys_after_seq(
    client: RedisClient, index: str, query: str, after: int | None, num: int
) -> list[tuple[str, int]]:
    """Up to ``num`` matches in insertion order whose sequence number is above ``after`` (any, for
    ``None``): each one's key and number."""
    if after is not None:
        seq = f"@seq:[({after} +inf]"
        query = seq if query.strip() == "*" else f"({query}) {seq}"
    q = _query(query).sort_by("seq", asc=True).paging(0, num).return_fields("seq").dialect(2)
    out: list[tuple[str, int]] = []
    for hit in (await _search(client, index, q)).hits:
        number = hit.integer("seq")
        if number is None:
            raise ValueError(f"{hit.key} has no sequence number")
        out.append((hit.key, number))
    return out


async def every_key(
    client: RedisClient, index: str, query: str, page: int, *, oldest_first: bool
) -> list[str]:
    """The keys of every match, ``page`` at a time: in insertion order when ``oldest_first`` (paged by
    sequence number, :func:`key_pages_in_order`), else unsorted."""
    if oldest_first:
        return [key async for keys in key_pages_in_order(client, index, query, page) for key in keys]
    out: list[str] = []
    while True:
        found = await keys_page(client, index, query, len(out), page)
        out.extend(found)
        if len(found) < page:
            return out


async def documents(
    client: RedisClient, index: str, query: str, sort: SortField, num: int
) -> list[dict[str, Any]]:
    """The whole documents of the ``num`` newest matches by ``sort``."""
    q = _query(query).sort_by(sort, asc=False).paging(0, num).dialect(2)
    return [doc for hit in (await _search(client, index, q)).hits if (doc := hit.document()) is not None]


async def newest_field(
    client: RedisClient, index: str, query: str, sort: SortField, field: str
) -> str | None:
    """One returned field of the newest match by ``sort``, as the search engine prints it (``None`` when
    nothing matches or the match lacks the field)."""
    q = _query(query).sort_by(sort, asc=False).paging(0, 1).return_fields(field).dialect(2)
    found = await _search(client, index, q)
    return found.hits[0].fields.get(field) if found.hits else None


async def count(client: RedisClient, index: str, query: str) -> int:
    """How many documents match."""
    return (await _search(client, index, _query(query).paging(0, 0).dialect(2), content=False)).total


async def nearest(
    client: RedisClient, index: str, query: str, field: str, vector: bytes, fetch: int
) -> list[tuple[str, float]]:
    """The keys of the ``fetch`` matches nearest ``vector`` in the vector ``field``, with their distance,
    nearest first (ties by key). A document whose vector is all zeros is never returned."""
    knn = f"({query})=>[KNN {fetch} @{field} $vector AS distance]"
    q = _query(knn).sort_by("distance", asc=True).return_fields("distance").paging(0, fetch).dialect(2)
    args = [*q.get_args(), "PARAMS", "2", "vector", vector]
    reply = await cast("Any", client).execute_command("FT.SEARCH", index, *args)
    hits = search_page(reply, content=True).hits
    return sorted(((hit.key, float(hit.fields["distance"])) for hit in hits), key=lambda kd: (kd[1], kd[0]))
