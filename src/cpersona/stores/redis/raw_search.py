"""The forensic raw query over the raw journal's index (:class:`RedisRawJournal`, a base of the record
store), and the sealing of entries an older store kept in the clear.

A query's words become search terms exactly as the memory keyword index's are made (:mod:`.lexical`):
each word its ``@stems:`` term, each Chinese or Japanese run the phrase of its 3-grams (a shorter run its
tag), all of them required. No character of the caller's text reaches the query parser as syntax, so
the search can fail only on a bug; the parser's refusal still comes back as a 400 naming ``query``.

The filters are tags and a range (scope, session, visibility, secrecy, ``suppressed``, time) and the
order is chronological, so nothing is scored: an ``FT.AGGREGATE`` sorts the matches by time then id and
keeps the first ``limit``; an ``FT.SEARCH`` of no rows counts them, in the same ``MULTI``.

Sealed entries hold no word in the index. With ``include_sealed`` the newest
:data:`~cpersona.model.raw_query.SEALED_SCAN_MAX` sealed entries passing the filters are read, opened
with the store's key and matched in process by the same analysis of their text (every query stem among
the text's stems, every run a substring of it); without it no sealed document is read at all.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import redis.exceptions

from cpersona.errors import InvalidRequest
from cpersona.model.raw_query import SEALED_SCAN_MAX, RawPage
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.durable import commit, transaction
from cpersona.stores.redis.lexical import cjk_clause, cjk_runs, doc_stems
from cpersona.stores.redis.raw_docs import raw_from_doc, raw_to_doc
from cpersona.stores.redis.record_space import RecordRole
from cpersona.stores.redis.scope import scope_query, tag
from cpersona.stores.redis.sealing import SealedUnreadable
from cpersona.stores.redis.writes import Writer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.model.raw_query import RawFilter
    from cpersona.model.records import RawRecord
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.record_space import RecordSpace
    from cpersona.stores.redis.sealing import Sealer

__all__ = ["RedisRawJournal", "seal_plain_entries", "unsealed"]

log = logging.getLogger("cpersona")

_PAGE = 500


@dataclasses.dataclass(frozen=True, slots=True)
class _Needs:
    """What an entry's text must hold: these stems, and these CJK runs as substrings."""

    stems: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()

    def clauses(self) -> list[str]:
        runs = [cjk_clause(run, ranked=False) for run in self.runs]
        return [f"@stems:{stem}" for stem in self.stems] + runs

    def met_by(self, text: str) -> bool:
        if not all(run in text for run in self.runs):
            return False
        if not self.stems:
            return True
        held = set(doc_stems(text).split())
        return all(stem in held for stem in self.stems)


def needs_of(query: str | None) -> _Needs:
    """The terms of ``query``, or :class:`InvalidRequest` naming ``query`` when it has none to search."""
    if query is None:
        return _Needs()
    needs = _Needs(tuple(dict.fromkeys(doc_stems(query).split())), tuple(dict.fromkeys(cjk_runs(query))))
    if not needs.stems and not needs.runs:
        raise InvalidRequest("query", "holds no word to search (only stopwords, punctuation or symbols)")
    return needs


def _filters(flt: RawFilter) -> list[str]:
    """Every condition but visibility and the words, as query clauses."""
    parts = [scope_query(flt.scope, with_source=False), "@suppressed:{false}"]
    if flt.session_id is not None:
        parts.append(f"@session:{{{tag(flt.session_id)}}}")
    if flt.period is not None:
        start, end = flt.period
        parts.append(f"@ts:[{start!r} {end!r}]")
    parts.append("@secrecy:{" + "|".join(flt.secrecy_levels) + "}")
    return parts


def _visibility(values: Sequence[str]) -> str:
    return "@visibility:{" + "|".join(values) + "}"


def unsealed(query: str) -> str:
    """``query`` (a filter, or ``*``) without the sealed entries: what a listing or a count of raw entries
    reads, since only a raw query that asks for sealed entries may see they exist."""
    return ("" if query.strip() == "*" else query + " ") + "-@visibility:{sealed}"


def _order(record: RawRecord) -> tuple[float, str]:
    return record.created_at, record.id


class RedisRawJournal(RecordRole):
    """The Redis adapter of :class:`~cpersona.stores.raw_journal_store.RawJournalStore`, on one record
    space (raw entries are written by :class:`~.record_writes.RedisRecordWrites`)."""

    def __init__(self, space: RecordSpace) -> None:
        super().__init__(space)
        self._writer = Writer(space.client, space.keys)

    async def delete_sealed(self, agent_id: str, record_id: str) -> bool:
        key = self.keys.raw(record_id)
        found = await json_ops(self.client).get(key, "$.agent_id", "$.visibility") or {}
        if (found.get("$.agent_id"), found.get("$.visibility")) != ([agent_id], ["sealed"]):
            return False
        await self._writer.delete(key, record_id, ())
        return True

    async def raw_query(self, flt: RawFilter) -> RawPage:
        needs = needs_of(flt.query)
        base = _filters(flt)
        query = " ".join([*base, _visibility(flt.visibilities), *needs.clauses()])
        try:
            keys, total = await self._first(query, flt.limit)
            docs = await _documents(self.client, keys)
            sealed: list[RawRecord] = []
            scanned = 0
            if flt.include_sealed:
                sealed, scanned = await self._sealed(" ".join([*base, _visibility(["sealed"])]), needs)
        except redis.exceptions.ResponseError as exc:
            if "syntax error" not in str(exc).lower():
                raise
            raise InvalidRequest("query", f"could not be searched: {exc}") from None
        merged = sorted([*(raw_from_doc(doc) for doc in docs), *sealed], key=_order)[: flt.limit]
        return RawPage(tuple(merged), total + len(sealed), scanned)

    async def _first(self, query: str, limit: int) -> tuple[list[str], int]:
        """The keys of the first ``limit`` matches by (time, id), and how many match."""
        pipe: Any = self.client.pipeline(transaction=True)
        index = self.keys.raw_index
        pipe.execute_command(
            "FT.AGGREGATE",
            index,
            query,
            "VERBATIM",
            "SORTBY",
            "4",
            "@ts",
            "ASC",
            "@id",
            "ASC",
            "MAX",
            str(limit),
            "LOAD",
            "1",
            "@__key",
            "DIALECT",
            "2",
        )
        pipe.execute_command(
            "FT.SEARCH", index, query, "VERBATIM", "NOCONTENT", "LIMIT", "0", "0", "DIALECT", "2"
        )
        rows, counted = await pipe.execute()
        return _loaded_keys(rows), int(counted[0])

    async def _sealed(self, query: str, needs: _Needs) -> tuple[list[RawRecord], int]:
        """The newest sealed entries of ``query`` (at most the scan bound), opened, that meet ``needs``."""
        rows = await self.client.execute_command(  # type: ignore[no-untyped-call]
            "FT.AGGREGATE",
            self.keys.raw_index,
            query,
            "VERBATIM",
            "SORTBY",
            "4",
            "@ts",
            "DESC",
            "@id",
            "DESC",
            "MAX",
            str(SEALED_SCAN_MAX),
            "LOAD",
            "1",
            "@__key",
            "DIALECT",
            "2",
        )
        docs = await _documents(self.client, _loaded_keys(rows))
        found: list[RawRecord] = []
        for doc in docs:
            record = self._opened(doc)
            if needs.met_by(record.content):
                found.append(record)
        return found, len(docs)

    def _opened(self, doc: dict[str, Any]) -> RawRecord:
        record = raw_from_doc(doc)
        blob = doc.get("sealed") or ""
        if not blob:
            return record  # written in the clear by an older version and not sealed since (no key then)
        sealer = self.space.sealer
        if sealer is None:
            raise SealedUnreadable(record.id)
        return dataclasses.replace(record, content=sealer.open(record.id, blob))


def _loaded_keys(rows: Sequence[Any]) -> list[str]:
    """The ``__key`` of each row of an aggregation that loaded it."""
    out: list[str] = []
    for row in rows[1:]:
        pairs = dict(zip(row[::2], row[1::2], strict=False))
        key = pairs.get(b"__key")
        if key is not None:
            out.append(_text(key))
    return out


async def _documents(client: RedisClient, keys: Sequence[str]) -> list[dict[str, Any]]:
    if not keys:
        return []
    found = await json_ops(client).mget(list(keys), "$")
    return [values[0] for values in found if values]


async def seal_plain_entries(client: RedisClient, keys: Keys, sealer: Sealer | None) -> int:
    """Seal the sealed-visibility entries that an older version stored in the clear; how many it sealed.

    Runs at open, before the index is brought up to date (so their words never enter the new one). Without
    a key they stay as they are, with a warning, and the raw query still reads them only with
    ``include_sealed``.
    """
    sealed = 0
    try:
        reply = await client.execute_command(  # type: ignore[no-untyped-call]
            "FT.SEARCH", keys.raw_index, "@visibility:{sealed}", "NOCONTENT", "LIMIT", "0", "0"
        )
    except redis.exceptions.ResponseError:
        return 0  # no raw index yet: a new store, nothing written in the clear
    if sealer is None:
        if int(reply[0]):
            log.warning("%d sealed raw entries and no key to seal them: set CPERSONA_SEALED_KEY", reply[0])
        return 0
    for offset in range(0, int(reply[0]), _PAGE):
        page = await client.execute_command(  # type: ignore[no-untyped-call]
            "FT.SEARCH",
            keys.raw_index,
            "@visibility:{sealed}",
            "NOCONTENT",
            "SORTBY",
            "ts",
            "LIMIT",
            str(offset),
            str(_PAGE),
        )
        plain = [
            raw_from_doc(doc)
            for doc in await _documents(client, [_text(k) for k in page[1:]])
            if doc.get("content") and not doc.get("sealed")
        ]
        if plain:
            pipe = transaction(client)
            for record in plain:
                doc = raw_to_doc(record, sealer.seal(record.id, record.content))
                json_ops(pipe).set(keys.raw(record.id), "$", doc)
            await commit(pipe, client)
            sealed += len(plain)
    return sealed


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
