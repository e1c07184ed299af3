"""cpersona: an asynchronous recall engine for agent memory on Redis and Qdrant.

The library API is what this module exports; everything else lives in private modules. Use it as::

    import cpersona

    async with cpersona.open() as memory:
        await memory.store("The deploy key rotates on Fridays", agent_id="ops-bot")
"""

from __future__ import annotations

from cpersona.engine.facade import Engine, open
from cpersona.errors import (
    BackendUnavailable,
    ContentTooLarge,
    CpersonaError,
    DataDirLocked,
    EmbedderUnavailable,
    EngineClosed,
    GraphError,
    InvalidRequest,
    InvalidSetting,
    RecordNotFound,
    RedisUnavailable,
    VectorStoreUnavailable,
)
from cpersona.model.records import (
    Association,
    EmotionVector,
    EpisodeRecord,
    Fidelity,
    MemoryRecord,
    MetaMemory,
    ProfileRecord,
    RawRecord,
    Scope,
    Source,
)
from cpersona.model.results import BatchResult, DeleteResult, StoreResult
from cpersona.recall.request import RecallResult, RecallRow
from cpersona.settings import Settings
from cpersona.version import __version__

__all__ = (
    "Association",
    "BackendUnavailable",
    "BatchResult",
    "ContentTooLarge",
    "CpersonaError",
    "DataDirLocked",
    "DeleteResult",
    "EmbedderUnavailable",
    "EmotionVector",
    "Engine",
    "EngineClosed",
    "EpisodeRecord",
    "Fidelity",
    "GraphError",
    "InvalidRequest",
    "InvalidSetting",
    "MemoryRecord",
    "MetaMemory",
    "ProfileRecord",
    "RawRecord",
    "RecallResult",
    "RecallRow",
    "RecordNotFound",
    "RedisUnavailable",
    "Scope",
    "Settings",
    "Source",
    "StoreResult",
    "VectorStoreUnavailable",
    "__version__",
    "open",
)
