"""cpersona: an asynchronous recall engine for agent memory on Redis and Qdrant.

The library API is what this module exports; everything else lives in private modules. Use it as::

    import anyio

    import cpersona


    async def main() -> None:
        async with cpersona.open() as memory:
            await memory.store("The deploy key rotates on Fridays", agent_id="ops-bot")
            result = await memory.recall("when does the deploy key rotate?", agent_id="ops-bot", limit=5)


    anyio.run(main)

Every public method takes typed keyword parameters (a misspelled one is a type error); the request
models (``StoreRequest``, ``RecallQuery``…) are the one schema that the HTTP API and the CLI validate with.
"""

from __future__ import annotations

from cpersona.engine.facade import Engine, open
from cpersona.errors import (
    AgentBeingDeleted,
    BackendUnavailable,
    ContentTooLarge,
    CpersonaError,
    DataDirLocked,
    EmbedderUnavailable,
    EmbeddingModelMismatch,
    EngineClosed,
    ForgetUnconfirmed,
    GraphError,
    ImportConflict,
    InsufficientStorage,
    InvalidRequest,
    InvalidSetting,
    ModalityUnsupported,
    RecordNotFound,
    RedisUnavailable,
    VectorStoreUnavailable,
)
from cpersona.model.association_results import DeclareResult, Reached, TraverseResult
from cpersona.model.associations import DeclareRequest, TraverseRequest
from cpersona.model.cue_query import CueQueryRequest, RecallCue
from cpersona.model.cue_query_associate import AssociateRequest
from cpersona.model.cue_query_response import AssociateResult, CueQueryResult, RecalledMemory
from cpersona.model.entity_match import EntityMatch
from cpersona.model.episode_request import EpisodeRequest
from cpersona.model.graph_request import GraphRequest
from cpersona.model.graph_response import GraphResult
from cpersona.model.lifecycle_requests import (
    ConsolidateRequest,
    DecayForecastRequest,
    DecayTickRequest,
    ExportRequest,
    ForgetRequest,
    ImportRequest,
)
from cpersona.model.lifecycle_responses import (
    ConsolidateResult,
    DecayForecast,
    DecayForecastResult,
    DecayTickResult,
    ExportResult,
    ForgetResult,
    ImportResult,
)
from cpersona.model.memory_parts import MemoryContent
from cpersona.model.memory_request import StoreRequest
from cpersona.model.raw_query import RawEntry, RawQueryRequest, RawQueryResult
from cpersona.model.raw_request import RawRequest
from cpersona.model.recall_query import RecallQuery
from cpersona.model.reconstruct_request import ReconstructRequest
from cpersona.model.reconstruct_response import ReconstructResult
from cpersona.model.records import (
    Association,
    EmotionVector,
    EpisodeRecord,
    Fidelity,
    MemoryRecord,
    MetaEdge,
    MetaMemory,
    ProfileRecord,
    RawRecord,
    Scope,
    Source,
)
from cpersona.model.results import BatchResult, DeleteResult, StoreResult
from cpersona.model.time_cue_request import TimeCueBody
from cpersona.model.timeline_request import TimelineRequest
from cpersona.model.timeline_response import TimelineResult
from cpersona.model.update_request import UpdateRequest
from cpersona.recall.request import RecallResult, RecallRow
from cpersona.settings import Settings
from cpersona.version import __version__

__all__ = (
    "AgentBeingDeleted",
    "AssociateRequest",
    "AssociateResult",
    "Association",
    "BackendUnavailable",
    "BatchResult",
    "ConsolidateRequest",
    "ConsolidateResult",
    "ContentTooLarge",
    "CpersonaError",
    "CueQueryRequest",
    "CueQueryResult",
    "DataDirLocked",
    "DecayForecast",
    "DecayForecastRequest",
    "DecayForecastResult",
    "DecayTickRequest",
    "DecayTickResult",
    "DeclareRequest",
    "DeclareResult",
    "DeleteResult",
    "EmbedderUnavailable",
    "EmbeddingModelMismatch",
    "EmotionVector",
    "Engine",
    "EngineClosed",
    "EntityMatch",
    "EpisodeRecord",
    "EpisodeRequest",
    "ExportRequest",
    "ExportResult",
    "Fidelity",
    "ForgetRequest",
    "ForgetResult",
    "ForgetUnconfirmed",
    "GraphError",
    "GraphRequest",
    "GraphResult",
    "ImportConflict",
    "ImportRequest",
    "ImportResult",
    "InsufficientStorage",
    "InvalidRequest",
    "InvalidSetting",
    "MemoryContent",
    "MemoryRecord",
    "MetaEdge",
    "MetaMemory",
    "ModalityUnsupported",
    "ProfileRecord",
    "RawEntry",
    "RawQueryRequest",
    "RawQueryResult",
    "RawRecord",
    "RawRequest",
    "Reached",
    "RecallCue",
    "RecallQuery",
    "RecallResult",
    "RecallRow",
    "RecalledMemory",
    "ReconstructRequest",
    "ReconstructResult",
    "RecordNotFound",
    "RedisUnavailable",
    "Scope",
    "Settings",
    "Source",
    "StoreRequest",
    "StoreResult",
    "TimeCueBody",
    "TimelineRequest",
    "TimelineResult",
    "TraverseRequest",
    "TraverseResult",
    "UpdateRequest",
    "VectorStoreUnavailable",
    "__version__",
    "open",
)
