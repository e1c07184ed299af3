"""The request bodies of the lifecycle operations (Cerememory §6, §7): decay tick, decay forecast,
forget, consolidate, export and import. One model per operation, shared by HTTP, Python and the CLI.

Every one is scoped to one agent (``agent_id``, like every route here). A record id is accepted as
Cerememory sends it (a bare UUID, which can only mean a memory) or as our ref (``mem:<uuid>``).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, WithJsonSchema, model_validator

from cpersona.errors import InvalidRequest
from cpersona.model.epoch_time import EpochTime
from cpersona.model.fields import WHOLE, AgentId, Before, Count, Header, KeyText, RequestModel, refusal
from cpersona.model.records import StoreKind
from cpersona.model.time_cue import MAX_TS
from cpersona.model.wording import pattern_in_words

__all__ = [
    "MAX_AGE_SECONDS",
    "MAX_ARCHIVE_BYTES",
    "MEMORY_ID_PATTERN",
    "MAX_LIFECYCLE_IDS",
    "MAX_TICK_SECONDS",
    "ConflictRule",
    "ConsolidateRequest",
    "DecayForecastRequest",
    "DecayTickRequest",
    "ExportRequest",
    "ForgetRequest",
    "ImportRequest",
    "ImportStrategy",
    "MemoryId",
    "TemporalRange",
]

MAX_LIFECYCLE_IDS = 1_000
"""The most record ids one forget or forecast names."""
MAX_TICK_SECONDS = 100 * 365 * 86_400
"""The longest a single decay tick ages the memories: a century (any longer reads as gone anyway)."""
MAX_AGE_SECONDS = int(MAX_TS)
"""The greatest age a selector names: a memory's time lies between 1970 and 9999, so none is older."""
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
"""The largest archive an HTTP import carries (the request cap of the reference server)."""

ImportStrategy = Literal["merge", "replace"]
ConflictRule = Literal["keep_newer", "keep_existing", "keep_imported"]


def _memory_id(value: object) -> object:
    """``mem:<uuid>`` or a bare ``<uuid>`` as the canonical lowercase UUID of a memory."""
    if not isinstance(value, str):
        return value
    text = value.removeprefix("mem:")
    try:
        canonical = str(uuid.UUID(text))
    except ValueError:
        raise refusal("memory_id", f"is not a memory id (a UUID, or mem:<uuid>): {value!r}") from None
    if canonical != text.lower() or len(text) != 36:
        raise refusal("memory_id", f"is not a memory id (a UUID, or mem:<uuid>): {value!r}")
    return canonical


_HEX = "[0-9A-Fa-f]"
MEMORY_ID_PATTERN = pattern_in_words(
    f"^(mem:)?{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}$",
    "a memory id: a UUID, or mem:<uuid>",
)
"""What :func:`_memory_id` accepts, as the schema says it."""

MemoryId = Annotated[
    str,
    Before(_memory_id),
    # The schema states the pattern; the validator before it reads the value (and names it when wrong).
    WithJsonSchema(
        {
            "type": "string",
            "pattern": MEMORY_ID_PATTERN,
            "description": "A memory: its bare UUID (as Cerememory sends it) or mem:<uuid>",
        }
    ),
]
Passphrase = Annotated[
    KeyText, Field(min_length=8, description="A passphrase of at least 8 characters (no control characters)")
]
MemoryIds = Annotated[Sequence[MemoryId], Field(min_length=1, max_length=MAX_LIFECYCLE_IDS)]


class TemporalRange(RequestModel):
    """``start`` to ``end``, both inclusive, over each memory's own ``timestamp``."""

    model_config = ConfigDict(title="TemporalRange")

    start: EpochTime
    end: EpochTime

    @model_validator(mode="after")
    def _ordered(self) -> TemporalRange:
        if self.end < self.start:
            raise refusal("range_order", "ends before it starts")
        return self


class DecayTickRequest(RequestModel):
    """A decay sweep over one agent's memories (``POST /v1/lifecycle/decay-tick``)."""

    model_config = ConfigDict(title="DecayTickRequest")

    agent_id: AgentId
    tick_duration_seconds: Annotated[int, Field(ge=0, le=MAX_TICK_SECONDS), WHOLE] | None = Field(
        default=None,
        description="Seconds by which the tick ages every memory beyond the wall clock (default 0: the "
        "sweep only reads the fidelity the elapsed time gives). Ageing adds up: N ticks of d/N age as "
        "much as one tick of d.",
    )
    header: Header = None


class DecayForecastRequest(RequestModel):
    """What each memory's fidelity will be at ``forecast_at`` (``POST /v1/introspect/decay-forecast``)."""

    model_config = ConfigDict(title="DecayForecastRequest")

    agent_id: AgentId
    record_ids: MemoryIds
    forecast_at: EpochTime
    header: Header = None


class ForgetRequest(RequestModel):
    """Delete memories of one agent (``DELETE /v1/lifecycle/forget``): the union of what each selector
    names. ``confirm`` must be true."""

    model_config = ConfigDict(title="ForgetRequest")

    agent_id: AgentId
    record_ids: MemoryIds | None = None
    store: StoreKind | None = Field(default=None, description="Every memory of this store")
    temporal_range: TemporalRange | None = Field(
        default=None, description="Every memory whose own timestamp lies in the range (inclusive)"
    )
    older_than_seconds: Annotated[int, Field(ge=0, le=MAX_AGE_SECONDS), WHOLE] | None = Field(
        default=None, description="Every memory whose own timestamp is more than this many seconds ago"
    )
    cascade: bool = Field(
        default=False, description="With record_ids: also the memories their typed edges point to (one hop)"
    )
    confirm: bool = Field(description="Must be true; false is a 400 FORGET_UNCONFIRMED")
    header: Header = None

    @model_validator(mode="after")
    def _selects(self) -> ForgetRequest:
        chosen = (self.record_ids, self.store, self.temporal_range, self.older_than_seconds)
        if all(c is None for c in chosen):
            raise refusal(
                "forget_nothing",
                "names nothing to forget: give record_ids, store, temporal_range or older_than_seconds",
            )
        return self


class ConsolidateRequest(RequestModel):
    """Episodic → semantic consolidation of one agent (``POST /v1/lifecycle/consolidate``)."""

    model_config = ConfigDict(title="ConsolidateRequest")

    agent_id: AgentId
    strategy: Literal["full", "incremental", "selective"] = Field(
        default="incremental",
        description="Accepted for Cerememory's clients; every strategy runs the same idempotent pass",
    )
    min_age_hours: Annotated[int, Field(ge=0, le=MAX_AGE_SECONDS // 3600), WHOLE] = 0
    min_access_count: Count = 0
    dry_run: bool = Field(default=False, description="Count what would change; change nothing")
    header: Header = None


class ExportRequest(RequestModel):
    """One agent's memories as a JSON Lines archive (``POST /v1/lifecycle/export``)."""

    model_config = ConfigDict(title="ExportRequest")

    agent_id: AgentId
    format: Literal["cma", "jsonl"] = Field(default="cma", description="Both name the one JSON Lines form")
    stores: Annotated[Sequence[StoreKind], Field(min_length=1)] | None = Field(
        default=None, description="Only memories of these stores (default all); episodes and profile always"
    )
    include_raw_journal: bool = False
    encrypt: bool = Field(
        default=False, description="Encrypt the archive (AES-256-GCM, key from encryption_key by scrypt)"
    )
    encryption_key: Passphrase | None = None
    header: Header = None

    @model_validator(mode="after")
    def _keyed(self) -> ExportRequest:
        if self.encrypt and self.encryption_key is None:
            raise InvalidRequest("encryption_key", "is required with encrypt: true")
        if not self.encrypt and self.encryption_key is not None:
            raise InvalidRequest("encryption_key", "is given without encrypt: true; nothing would use it")
        return self


def _archive_bytes(value: object) -> object:
    """The archive as Cerememory sends it (an array of byte values) or as base64 text."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise refusal("archive_base64", "is text but not base64") from None
    if isinstance(value, list):
        for i, byte in enumerate(value):
            if not (isinstance(byte, int) and not isinstance(byte, bool) and 0 <= byte <= 255):
                # Named by its place, as the schema's items are (``archive_data[3]``).
                raise InvalidRequest(f"archive_data[{i}]", "must be a byte value 0-255")
        return bytes(value)
    raise refusal("archive_type", "must be an array of byte values 0-255 or base64 text")


ArchiveData = Annotated[
    bytes,
    Before(_archive_bytes),
    Field(max_length=MAX_ARCHIVE_BYTES),
    # The schema says what a caller sends (pydantic would call it a binary string, which no JSON body holds).
    WithJsonSchema(
        {
            "anyOf": [
                {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": 255},
                    "maxItems": MAX_ARCHIVE_BYTES,
                },
                {"type": "string", "contentEncoding": "base64", "maxLength": -(-MAX_ARCHIVE_BYTES // 3) * 4},
            ],
            "description": "The archive: an array of byte values (as export answers it), or base64 text",
        }
    ),
]


class ImportRequest(RequestModel):
    """An archive written by export, into one agent (``POST /v1/lifecycle/import``)."""

    model_config = ConfigDict(title="ImportRequest")

    agent_id: AgentId
    archive_data: ArchiveData
    archive_id: KeyText | None = Field(default=None, description="Informational (Cerememory sends it)")
    strategy: ImportStrategy = Field(
        default="merge", description="merge: add to what the agent holds; replace: delete it all first"
    )
    conflict_resolution: ConflictRule = Field(
        default="keep_newer",
        description="merge, same id already held by the agent: keep the later updated_at, the held one, "
        "or the archive's",
    )
    decryption_key: Passphrase | None = Field(
        default=None, description="The key an encrypted archive was made with"
    )
    header: Header = None
