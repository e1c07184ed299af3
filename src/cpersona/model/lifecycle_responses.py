"""What the lifecycle operations answer: one frozen result per operation, its own response schema
(:mod:`cpersona.model.result_model`). The field names are Cerememory's, so its SDK's models parse each
answer; fields it does not know (``ok``, ``pruning``…) are extra, which it ignores."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, model_validator

from cpersona.model.epoch_time import ShownTime
from cpersona.model.result_model import ResultModel

__all__ = [
    "ConsolidateResult",
    "DecayForecast",
    "DecayForecastResult",
    "DecayTickResult",
    "ExportResult",
    "ForgetResult",
    "ImportResult",
]


def _bytes_of(value: object) -> object:
    # An answer read back holds the byte values as a list.
    return bytes(value) if isinstance(value, list) else value


# Byte values, as Cerememory's server sends them (its SDK also reads base64, but not every client).
ByteValues = Annotated[bytes, BeforeValidator(_bytes_of), PlainSerializer(list, return_type=list[int])]


class DecayTickResult(ResultModel):
    """``records_below_threshold`` have faded below the prune threshold (they are *decayed*: the recall
    operations hide them unless ``include_decayed``); they are deleted only when pruning is on."""

    ok: Literal[True] = True
    records_updated: int = Field(description="Memories the sweep read (aged, when aged_seconds > 0)")
    records_below_threshold: int
    records_pruned: int = Field(description="Deleted: 0 unless CPERSONA_DECAY_PRUNE is on")
    pruning: bool = Field(description="Whether this server deletes decayed memories (CPERSONA_DECAY_PRUNE)")
    aged_seconds: int = Field(description="How far the tick aged every memory beyond the wall clock")


class DecayForecast(ResultModel):
    record_id: str = Field(description="The memory's bare UUID")
    ref: str = Field(default="", description="mem:<uuid>")  # filled from record_id
    current_fidelity: float
    forecasted_fidelity: float
    estimated_threshold_date: ShownTime | None = Field(
        description="When it falls below the prune threshold (RFC 3339); null if already below or never"
    )

    @model_validator(mode="before")
    @classmethod
    def _ref(cls, data: Any) -> Any:
        if isinstance(data, dict) and "ref" not in data:
            return {**data, "ref": f"mem:{data.get('record_id')}"}
        return data


class DecayForecastResult(ResultModel):
    ok: Literal[True] = True
    forecasts: tuple[DecayForecast, ...]


class ForgetResult(ResultModel):
    ok: Literal[True] = True
    records_deleted: int


class ConsolidateResult(ResultModel):
    ok: Literal[True] = True
    records_processed: int = Field(description="Episodic memories considered")
    records_migrated: int = Field(description="Episodic memories that got their semantic copy")
    records_compressed: int = Field(description="Near-duplicate episodic memories merged into another")
    records_pruned: int = Field(description="Always 0: consolidation deletes only merged duplicates")
    semantic_nodes_created: int
    dry_run: bool


class ExportResult(ResultModel):
    ok: Literal[True] = True
    archive_id: str = Field(description="A UUID derived from the checksum: the same archive, the same id")
    size_bytes: int
    record_count: int
    checksum: str = Field(description="SHA-256 (lowercase hex) of the lines before the footer")
    archive_data: ByteValues = Field(description="The JSON Lines archive as byte values")


class ImportResult(ResultModel):
    ok: Literal[True] = True
    records_imported: int
    records_skipped: int = Field(description="Kept as held by the conflict rule, or duplicates by content")
    strategy: str
    copied: bool = Field(
        default=False,
        description="The archive came from another agent of this store: its records were written as a "
        "copy, under new ids derived from this agent and their ids, every reference among them following",
    )
