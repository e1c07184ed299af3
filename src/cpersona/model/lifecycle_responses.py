"""What the lifecycle operations answer: one frozen result per operation, with ``to_json`` for the edges,
and its response model (the OpenAPI document is generated from those). The field names are Cerememory's,
so its SDK's models parse each answer; fields it does not know (``ok``, ``pruning``…) are extra, which it
ignores."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cpersona.model.records import format_time

__all__ = [
    "ConsolidateResponse",
    "ConsolidateResult",
    "DecayForecast",
    "DecayForecastResponse",
    "DecayForecastResult",
    "DecayTickResponse",
    "DecayTickResult",
    "ExportResponse",
    "ExportResult",
    "ForgetResponse",
    "ForgetResult",
    "ImportResponse",
    "ImportResult",
]


@dataclasses.dataclass(frozen=True, slots=True)
class DecayTickResult:
    records_updated: int
    records_below_threshold: int
    records_pruned: int
    pruning: bool
    aged_seconds: int

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True, slots=True)
class DecayForecast:
    record_id: str
    current_fidelity: float
    forecasted_fidelity: float
    estimated_threshold_date: float | None

    def to_json(self) -> dict[str, Any]:
        when = self.estimated_threshold_date
        return {
            "record_id": self.record_id,
            "ref": f"mem:{self.record_id}",
            "current_fidelity": self.current_fidelity,
            "forecasted_fidelity": self.forecasted_fidelity,
            "estimated_threshold_date": None if when is None else format_time(when),
        }


@dataclasses.dataclass(frozen=True, slots=True)
class DecayForecastResult:
    forecasts: tuple[DecayForecast, ...]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "forecasts": [f.to_json() for f in self.forecasts]}


@dataclasses.dataclass(frozen=True, slots=True)
class ForgetResult:
    records_deleted: int

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "records_deleted": self.records_deleted}


@dataclasses.dataclass(frozen=True, slots=True)
class ConsolidateResult:
    records_processed: int
    records_migrated: int
    records_compressed: int
    records_pruned: int
    semantic_nodes_created: int
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True, slots=True)
class ExportResult:
    archive_id: str
    size_bytes: int
    record_count: int
    checksum: str
    archive_data: bytes

    def to_json(self) -> dict[str, Any]:
        # Byte values, as Cerememory's server sends them (its SDK also reads base64, but not every client).
        return {
            "ok": True,
            "archive_id": self.archive_id,
            "size_bytes": self.size_bytes,
            "record_count": self.record_count,
            "checksum": self.checksum,
            "archive_data": list(self.archive_data),
        }


@dataclasses.dataclass(frozen=True, slots=True)
class ImportResult:
    records_imported: int
    records_skipped: int
    strategy: str

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **dataclasses.asdict(self)}


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DecayTickResponse(_Response):
    """``records_below_threshold`` have faded below the prune threshold (they are *decayed*: the recall
    operations hide them unless ``include_decayed``); they are deleted only when pruning is on."""

    model_config = ConfigDict(title="DecayTickResult")

    ok: Literal[True]
    records_updated: int = Field(description="Memories the sweep read (aged, when aged_seconds > 0)")
    records_below_threshold: int
    records_pruned: int = Field(description="Deleted: 0 unless CPERSONA_DECAY_PRUNE is on")
    pruning: bool = Field(description="Whether this server deletes decayed memories (CPERSONA_DECAY_PRUNE)")
    aged_seconds: int = Field(description="How far the tick aged every memory beyond the wall clock")


class ForecastBody(_Response):
    model_config = ConfigDict(title="DecayForecast")

    record_id: str = Field(description="The memory's bare UUID")
    ref: str = Field(description="mem:<uuid>")
    current_fidelity: float
    forecasted_fidelity: float
    estimated_threshold_date: str | None = Field(
        description="When it falls below the prune threshold (RFC 3339); null if already below or never"
    )


class DecayForecastResponse(_Response):
    model_config = ConfigDict(title="DecayForecastResult")

    ok: Literal[True]
    forecasts: list[ForecastBody]


class ForgetResponse(_Response):
    model_config = ConfigDict(title="ForgetResult")

    ok: Literal[True]
    records_deleted: int


class ConsolidateResponse(_Response):
    model_config = ConfigDict(title="ConsolidateResult")

    ok: Literal[True]
    records_processed: int = Field(description="Episodic memories considered")
    records_migrated: int = Field(description="Episodic memories that got their semantic copy")
    records_compressed: int = Field(description="Near-duplicate episodic memories merged into another")
    records_pruned: int = Field(description="Always 0: consolidation deletes only merged duplicates")
    semantic_nodes_created: int
    dry_run: bool


class ExportResponse(_Response):
    model_config = ConfigDict(title="ExportResult")

    ok: Literal[True]
    archive_id: str = Field(description="A UUID derived from the checksum: the same archive, the same id")
    size_bytes: int
    record_count: int
    checksum: str = Field(description="SHA-256 (lowercase hex) of the lines before the footer")
    archive_data: list[int] = Field(description="The JSON Lines archive as byte values")


class ImportResponse(_Response):
    model_config = ConfigDict(title="ImportResult")

    ok: Literal[True]
    records_imported: int
    records_skipped: int = Field(description="Kept as held by the conflict rule, or duplicates by content")
    strategy: str
