"""The exception tree of cpersona.

Every error the library raises on purpose derives from :class:`CpersonaError`. Errors from Redis, Qdrant
or an embedding backend never leave an adapter unmapped: the adapter raises the matching
:class:`BackendUnavailable` subclass, chained to the original with ``from``.

::

    CpersonaError
    ├── InvalidSetting            a CPERSONA_* variable cannot be read (raised at start)
    ├── InvalidRequest            bad input; names the field and what was wrong      HTTP 400
    │   ├── ContentTooLarge       content or metadata over its limit                 HTTP 413
    │   └── ModalityUnsupported   content or a cue no model here reads (an image)    HTTP 400
    ├── RecordNotFound            no record with that ref in this scope              HTTP 404
    ├── AgentBeingDeleted         a write to an agent whose data is being deleted    HTTP 409
    ├── DataDirLocked             another engine already owns the data directory
    ├── EmbeddingModelMismatch    the store's vectors were made by another model than the configured one
    ├── EngineClosed              the engine was used outside ``async with``
    ├── GraphError                a recall graph was wired wrong (raised when it is built)
    └── BackendUnavailable        a backend did not answer within its deadline       HTTP 503
        ├── RedisUnavailable      also when Redis refuses to serve now (a code per reason)
        ├── VectorStoreUnavailable
        ├── EmbedderUnavailable
        └── InsufficientStorage   a store's disk is under CPERSONA_MIN_FREE_MB; writes  HTTP 507
                                  are refused, reads go on

Each error has a stable ``code`` (SCREAMING_SNAKE_CASE) that the HTTP edge puts in its error envelope. A
Redis that answers but cannot serve keeps the 503 and says why in its code: ``REDIS_CANNOT_PERSIST``
(MISCONF: the AOF or a snapshot cannot be written), ``REDIS_OUT_OF_MEMORY`` (OOM), ``REDIS_READ_ONLY``
(a replica), ``REDIS_LOADING`` (still loading its data), ``REDIS_BUSY`` (a script or module command holds
it), ``REDIS_MASTER_DOWN``, ``REDIS_NO_REPLICAS``, ``REDIS_CLUSTER_DOWN``, ``REDIS_NO_PERMISSION`` (the ACL
user may not run a command), ``REDIS_NOT_DURABLE`` (a write Redis did not confirm on disk in time: not
acknowledged); one that does not answer at all is ``BACKEND_UNAVAILABLE``.
"""

from __future__ import annotations

__all__ = [
    "AgentBeingDeleted",
    "BackendUnavailable",
    "ContentTooLarge",
    "CpersonaError",
    "DataDirLocked",
    "EmbedderUnavailable",
    "EmbeddingModelMismatch",
    "EngineClosed",
    "ForgetUnconfirmed",
    "GraphError",
    "ImportConflict",
    "InsufficientStorage",
    "InvalidRequest",
    "InvalidSetting",
    "ModalityUnsupported",
    "RecordNotFound",
    "RedisUnavailable",
    "VectorStoreUnavailable",
]


class CpersonaError(Exception):
    """Base class of every error cpersona raises on purpose."""

    code = "INTERNAL_ERROR"
    status = 500


class InvalidSetting(CpersonaError):
    """A ``CPERSONA_*`` setting has a value that cannot be used."""

    code = "INVALID_SETTING"

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem
        super().__init__(f"{name} {problem}")


class InvalidRequest(CpersonaError):
    """A request field is missing or wrong. ``field`` is a dotted path such as ``time_cue.ago.unit``."""

    code = "VALIDATION_ERROR"
    status = 400

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class ContentTooLarge(InvalidRequest):
    """Content or metadata is longer than the configured limit."""

    code = "CONTENT_TOO_LARGE"
    status = 413


class ModalityUnsupported(InvalidRequest):
    """Content or a recall cue of a modality no model here reads (an image, audio), naming the field."""

    code = "MODALITY_UNSUPPORTED"


class ForgetUnconfirmed(InvalidRequest):
    """A delete of many records (an agent's data, a forget) came without ``confirm: true``; nothing went."""

    code = "FORGET_UNCONFIRMED"


class ImportConflict(InvalidRequest):
    """An id an import would write (the archive's, or its copy's) is held by another agent: an import
    never touches another scope."""

    code = "IMPORT_CONFLICT"
    status = 409


class RecordNotFound(CpersonaError):
    """No record with this ref is visible in the caller's scope. ``field`` is the request's name for it
    (``center_id``, ``record_ids[2]``), so the error names what the caller sent."""

    code = "RECORD_NOT_FOUND"
    status = 404

    def __init__(self, ref: str, field: str = "ref") -> None:
        self.ref = ref
        self.field = field
        super().__init__(f"record not found: {ref}")


class AgentBeingDeleted(CpersonaError):
    """A write to an agent whose data is being deleted, or was deleted since the write began: nothing of it
    was written (:mod:`cpersona.engine.deletes`). Sent again once the delete has returned, it is stored."""

    code = "AGENT_BEING_DELETED"
    status = 409

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        super().__init__(
            f"the data of agent {agent_id!r} is being deleted: the write was refused and nothing of it was "
            "kept; send it again once the delete has finished"
        )


class DataDirLocked(CpersonaError):
    """Another engine holds the lock on this data directory."""

    code = "DATA_DIR_LOCKED"

    def __init__(self, data_dir: str, holder: str) -> None:
        self.data_dir = data_dir
        self.holder = holder
        super().__init__(
            f"the data directory {data_dir} is in use by another cpersona engine ({holder}); "
            "stop it, or point CPERSONA_DATA_DIR somewhere else"
        )


class EmbeddingModelMismatch(CpersonaError):
    """The store's vectors were made by another embedding model than the configured one (raised at start:
    vectors of two models are never mixed in one store)."""

    code = "EMBEDDING_MODEL_MISMATCH"

    def __init__(self, stored: str, configured: str, back: str) -> None:
        self.stored = stored
        self.configured = configured
        super().__init__(
            f"the store's vectors were made by {stored}, not by the configured {configured}: set {back} "
            "back, or run 'cpersona reembed' to re-embed every stored text with the configured model"
        )


class EngineClosed(CpersonaError):
    """The engine is not open: use it inside ``async with cpersona.open(...)``."""

    code = "ENGINE_CLOSED"


class GraphError(CpersonaError):
    """A recall graph was wired wrong: a stage's input does not match the previous stage's output."""

    code = "GRAPH_ERROR"


class BackendUnavailable(CpersonaError):
    """A backend failed or did not answer within its deadline."""

    code = "BACKEND_UNAVAILABLE"
    status = 503
    backend = "backend"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"{self.backend} unavailable: {detail}")


class RedisUnavailable(BackendUnavailable):
    """Redis did not answer, or answered that it cannot serve now; ``code`` tells the two apart."""

    backend = "redis"

    def __init__(self, detail: str, *, code: str | None = None) -> None:
        super().__init__(detail)
        if code is not None:
            self.code = code


class VectorStoreUnavailable(BackendUnavailable):
    backend = "vector store"


class EmbedderUnavailable(BackendUnavailable):
    backend = "embedder"


class InsufficientStorage(BackendUnavailable):
    """The file system of an embedded store has less free space than ``CPERSONA_MIN_FREE_MB``.

    Raised before a write touches a store, so the store never meets a full disk (where the embedded
    Qdrant engine dies of SIGBUS); reads go on. The message names the store and its free space, never
    the path.
    """

    code = "INSUFFICIENT_STORAGE"
    status = 507
    backend = "disk"

    def __init__(self, store: str, free_mb: int, floor_mb: int, *, started_full: bool = False) -> None:
        self.store = store
        self.free_mb = free_mb
        self.floor_mb = floor_mb
        if started_full:
            self.detail = (
                f"writes are refused: the engine started read-only on a full disk; the disk of the {store} "
                f"has {free_mb} MB free, writes resume at {floor_mb} MB; free some space"
            )
        else:
            self.detail = (
                f"writes are refused: the disk of the {store} has {free_mb} MB free, under the floor of "
                f"{floor_mb} MB (CPERSONA_MIN_FREE_MB); free some space"
            )
        CpersonaError.__init__(self, self.detail)
