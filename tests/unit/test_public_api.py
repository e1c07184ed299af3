"""The library's public surface is deliberate: this list changes only on purpose."""

from __future__ import annotations

import cpersona

EXPECTED = {
    "AgentBeingDeleted",
    "AssociateRequest",
    "AssociateResult",
    "CueQueryRequest",
    "CueQueryResult",
    "RecallCue",
    "RecalledMemory",
    "UpdateRequest",
    "TimeCueBody",
    "RecallQuery",
    "RawRequest",
    "StoreRequest",
    "MemoryContent",
    "EpisodeRequest",
    "Association",
    "BackendUnavailable",
    "BatchResult",
    "ContentTooLarge",
    "CpersonaError",
    "DataDirLocked",
    "EmbeddingModelMismatch",
    "DeclareRequest",
    "DeclareResult",
    "DeleteResult",
    "EmbedderUnavailable",
    "EmotionVector",
    "EntityMatch",
    "Engine",
    "EngineClosed",
    "EpisodeRecord",
    "Fidelity",
    "GraphError",
    "GraphRequest",
    "GraphResult",
    "MetaEdge",
    "TimelineRequest",
    "TimelineResult",
    "InsufficientStorage",
    "InvalidRequest",
    "InvalidSetting",
    "MemoryRecord",
    "MetaMemory",
    "ProfileRecord",
    "RawEntry",
    "RawQueryRequest",
    "RawQueryResult",
    "RawRecord",
    "RecallResult",
    "Reached",
    "RecallRow",
    "ReconstructRequest",
    "ReconstructResult",
    "RecordNotFound",
    "RedisUnavailable",
    "Scope",
    "Settings",
    "Source",
    "StoreResult",
    "TraverseRequest",
    "TraverseResult",
    "VectorStoreUnavailable",
    "__version__",
    "open",
    "ConsolidateRequest",
    "DecayForecastRequest",
    "DecayTickRequest",
    "ExportRequest",
    "ForgetRequest",
    "ImportRequest",
    "ForgetUnconfirmed",
    "ImportConflict",
    "ModalityUnsupported",
    "ConsolidateResult",
    "DecayTickResult",
    "ExportResult",
    "DecayForecast",
    "DecayForecastResult",
    "ForgetResult",
    "ImportResult",
}


def test_exported_names_are_pinned() -> None:
    assert set(cpersona.__all__) == EXPECTED
    assert list(cpersona.__all__) == sorted(cpersona.__all__)
    for name in cpersona.__all__:
        assert hasattr(cpersona, name), name


def test_every_error_derives_from_the_root() -> None:
    errors = [getattr(cpersona, n) for n in cpersona.__all__ if n.endswith(("Error", "Unavailable"))]
    errors += [cpersona.InvalidRequest, cpersona.RecordNotFound, cpersona.DataDirLocked]
    for cls in errors:
        assert issubclass(cls, cpersona.CpersonaError), cls
    assert issubclass(cpersona.RedisUnavailable, cpersona.BackendUnavailable)
    assert cpersona.BackendUnavailable.status == 503
    assert cpersona.InvalidRequest.status == 400
