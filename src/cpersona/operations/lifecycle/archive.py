"""One agent's memory as a JSON Lines archive: a header line, one record per line, a footer.

Every line is one JSON object with sorted keys and a ``kind`` (``header``, ``memory``, ``episode``,
``raw``, ``profile``, ``associations``, ``footer``); a record line holds the record under ``data``. An
``associations`` line holds all that the agent declared in one scope of its associative layer (an
:class:`~cpersona.stores.association_values.AssociationGraph`: entities, aliases, entity relations,
mentions, record relations, in their stored folded form, sorted); it is no record and not counted as
one. The footer carries the number of record lines and the SHA-256 (lowercase hex) of every byte before
it, so an import refuses an archive that was cut short or changed.

The archive holds no agent id, no insertion sequence, no vector state and no time of export: they belong
to the store it was taken from, not to what was remembered. So exporting, importing into an agent of
another store (or a fresh data dir) and exporting again gives the same bytes; records keep their ids, and
their order (insertion order, which the import reproduces) keeps their sequence's meaning. Into another
agent of the store it came from, an archive is a copy under new ids
(:mod:`~cpersona.operations.lifecycle.copying`).

Times are RFC 3339 text in UTC to the microsecond (as every read shows them), other numbers are written
to 15 significant digits: the record store may read a number back one unit in its last place off what
was written, and at that precision the archive's text does not change, so a round trip is exact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

import orjson

from cpersona.errors import InvalidRequest
from cpersona.model.records import (
    EPISODE,
    MEMORY,
    PROFILE,
    RAW,
    TIMES_AS_TEXT,
    EpisodeRecord,
    MemoryRecord,
    ProfileRecord,
    RawRecord,
    format_time,
)
from cpersona.operations.lifecycle.sealing import MAGIC
from cpersona.stores.association_values import AssociationGraph

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "ARCHIVE_FORMAT",
    "ArchiveReader",
    "Checksum",
    "LineKind",
    "archive_id",
    "archived_time",
    "encode_line",
    "footer_line",
    "graph_line",
    "header_line",
    "is_record_line",
    "record_line",
]

ARCHIVE_FORMAT = "cpersona-archive"
ARCHIVE_VERSION = 1
LineKind = Literal["memory", "episode", "raw", "profile"]
ArchivedRecord = MemoryRecord | EpisodeRecord | RawRecord | ProfileRecord

# Belong to the store a record was read from: seq is renumbered on import, the vector written again.
_LOCAL = {"seq", "embedded", "embedding_model", "vector_pending"}


def encode_line(obj: Mapping[str, Any]) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) + b"\n"


def header_line(*, include_raw_journal: bool, stores: Sequence[str] | None) -> bytes:
    return encode_line(
        {
            "kind": "header",
            "format": ARCHIVE_FORMAT,
            "version": ARCHIVE_VERSION,
            "include_raw_journal": include_raw_journal,
            "stores": stores,
        }
    )


def _quantised(value: float) -> float:
    """``value`` to 15 significant digits. The record store may read a number back one unit in the last
    place off what was written (RedisJSON's parser); at 15 digits that never changes the text, so a
    record written by an import exports as the archive it came from."""
    return float(f"{value:.15g}")


def _quantised_tree(value: object) -> Any:
    """JSON data with every number that is not an integer to 15 significant digits (caller metadata's
    too); the record's times are text by then."""
    if isinstance(value, dict):
        return {k: _quantised_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_quantised_tree(v) for v in value]
    if isinstance(value, float):
        return _quantised(value)
    return value


def _data(record: ArchivedRecord) -> dict[str, Any]:
    """A record as archive JSON: its schema's JSON form without what belongs to the store, times as
    RFC 3339 text (to the microsecond), other numbers to 15 digits, its scope without the agent."""
    if isinstance(record, MemoryRecord):
        dumped = MEMORY.dump_python(record, mode="json", context=TIMES_AS_TEXT, exclude=_LOCAL)
    elif isinstance(record, EpisodeRecord):
        dumped = EPISODE.dump_python(record, mode="json", context=TIMES_AS_TEXT, exclude=_LOCAL)
    elif isinstance(record, RawRecord):
        dumped = RAW.dump_python(record, mode="json", context=TIMES_AS_TEXT)
    else:
        dumped = PROFILE.dump_python(record, mode="json", context=TIMES_AS_TEXT)
    out: dict[str, Any] = _quantised_tree(dumped)
    out.pop("agent_id", None)
    scope = out.pop("scope", None)
    if scope is not None:
        out["project_id"], out["channel"] = scope["project_id"], scope["channel"]
    return out


def _epoch(value: object) -> Any:
    """A time of the archive (RFC 3339 text; a number is read as epoch seconds) as epoch seconds."""
    if isinstance(value, str):
        return datetime.fromisoformat(value.removesuffix("Z")).replace(tzinfo=UTC).timestamp()
    return value


def archived_time(epoch: float) -> float:
    """``epoch`` as it comes back from an archive (to the microsecond): what an imported time is compared
    with, so a record is never newer than itself."""
    return float(_epoch(format_time(epoch)))


def record_line(record: ArchivedRecord) -> bytes:
    kind: LineKind = (
        "memory"
        if isinstance(record, MemoryRecord)
        else "episode"
        if isinstance(record, EpisodeRecord)
        else "raw"
        if isinstance(record, RawRecord)
        else "profile"
    )
    return encode_line({"kind": kind, "data": _data(record)})


# A record line as encode_line writes it: keys sorted, so the record's kind is the last thing on the line.
_RECORD_ENDS = tuple(f',"kind":"{kind}"}}\n'.encode() for kind in get_args(LineKind))


def is_record_line(line: bytes) -> bool:
    """Whether ``line``, as the export writes it, is a record line (what the footer counts), without
    reading the record: the header, an ``associations`` line and the footer are not."""
    return line.startswith(b'{"data":') and line.endswith(_RECORD_ENDS)


def graph_line(graph: AssociationGraph) -> bytes:
    """One scope's associative layer as an archive line (not a record: the checksum counts no record)."""
    return encode_line({"kind": "associations", "data": dataclasses.asdict(graph)})


_GRAPH_ROWS = {"entities": 2, "aliases": 3, "relations": 3, "mentions": 2, "record_relations": 3}


def _graph(d: dict[str, Any]) -> AssociationGraph:
    rows: dict[str, tuple[tuple[str, ...], ...]] = {}
    for name, width in _GRAPH_ROWS.items():
        found = d[name]
        if not isinstance(found, list) or any(
            not isinstance(row, list) or len(row) != width or not all(isinstance(v, str) for v in row)
            for row in found
        ):
            raise ValueError(f"{name} must be a list of {width} strings each")
        rows[name] = tuple(tuple(row) for row in found)
    if not isinstance(d["project_id"], str) or not isinstance(d["channel"], str):
        raise TypeError("project_id and channel must be strings")
    return AssociationGraph(d["project_id"], d["channel"], **rows)  # type: ignore[arg-type]


def footer_line(count: int, checksum: str) -> bytes:
    return encode_line({"kind": "footer", "record_count": count, "checksum": checksum})


def archive_id(checksum: str) -> str:
    """A UUID named by the checksum: the same archive always has the same id."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"cpersona-archive:{checksum}"))


class Checksum:
    """The running SHA-256 of the lines before the footer."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.records = 0

    def add(self, line: bytes, *, record: bool = True) -> bytes:
        self._hash.update(line)
        self.records += record
        return line

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def _scoped(d: dict[str, Any], agent_id: str) -> dict[str, Any]:
    # The archive's scope is the agent it is imported into; seq is renumbered on import.
    return {
        **d,
        "scope": {"agent_id": agent_id, "project_id": d["project_id"], "channel": d["channel"]},
        "seq": 0,
    }


def _memory(d: dict[str, Any], agent_id: str) -> MemoryRecord:
    return MEMORY.validate_python(_scoped(d, agent_id))


def _episode(d: dict[str, Any], agent_id: str) -> EpisodeRecord:
    return EPISODE.validate_python(_scoped(d, agent_id))


def _raw(d: dict[str, Any], agent_id: str) -> RawRecord:
    return RAW.validate_python(_scoped(d, agent_id))


def _profile(d: dict[str, Any], agent_id: str) -> ProfileRecord:
    return PROFILE.validate_python({**d, "agent_id": agent_id})


_BUILD: dict[str, Callable[[dict[str, Any], str], ArchivedRecord]] = {
    "memory": _memory,
    "episode": _episode,
    "raw": _raw,
    "profile": _profile,
}


class ArchiveReader:
    """Reads an archive line by line into records of ``agent_id``; :meth:`finish` checks the footer.

    A line that is not what export writes is refused naming ``archive_data`` and the line's number; a
    checksum or count that does not match names ``checksum``.
    """

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.checksum = Checksum()
        self.line_no = 0
        self._footer: Mapping[str, Any] | None = None

    def _bad(self, problem: str) -> InvalidRequest:
        return InvalidRequest("archive_data", f"line {self.line_no}: {problem}")

    def _parse(self, line: bytes) -> dict[str, Any]:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise self._bad("is not JSON") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            raise self._bad("is not an archive line (an object with a kind)")
        return obj

    def read(self, line: bytes) -> ArchivedRecord | AssociationGraph | None:
        """The record or the scope's graph on ``line`` (``None`` for the header and the footer)."""
        self.line_no += 1
        if self._footer is not None:
            raise self._bad("follows the footer")
        if self.line_no == 1 and line.startswith(MAGIC):
            raise InvalidRequest("decryption_key", "is required: the archive is encrypted (import its bytes)")
        obj = self._parse(line)
        kind = obj["kind"]
        if self.line_no == 1:
            if (
                kind != "header"
                or obj.get("format") != ARCHIVE_FORMAT
                or obj.get("version") != ARCHIVE_VERSION
            ):
                raise self._bad(f"is not a {ARCHIVE_FORMAT} version {ARCHIVE_VERSION} header")
            self.checksum.add(line, record=False)
            return None
        if kind == "footer":
            self._footer = obj
            return None
        build = _BUILD.get(kind)
        data = obj.get("data")
        if (build is None and kind != "associations") or not isinstance(data, dict):
            raise self._bad(f"has an unknown kind {kind!r} or no data")
        self.checksum.add(line, record=build is not None)
        try:
            return _graph(data) if build is None else build(data, self.agent_id)
        except (KeyError, TypeError, ValueError) as exc:
            raise self._bad(f"is not a {kind} record ({type(exc).__name__}: {exc})") from None

    def finish(self) -> int:
        """Check the footer against what was read; the number of record lines."""
        footer = self._footer
        if footer is None:
            raise InvalidRequest("archive_data", "ends without its footer: the archive was cut short")
        if footer.get("checksum") != self.checksum.hexdigest():
            raise InvalidRequest(
                "checksum",
                f"the footer's checksum {footer.get('checksum')!r} does not match the archive's "
                f"lines ({self.checksum.hexdigest()}): it was changed or damaged",
            )
        if footer.get("record_count") != self.checksum.records:
            raise InvalidRequest(
                "record_count",
                f"the footer says {footer.get('record_count')!r} records; the archive has "
                f"{self.checksum.records}",
            )
        return self.checksum.records
