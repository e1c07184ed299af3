"""What the write operations return, each its own response schema (:mod:`cpersona.model.result_model`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, model_validator

from cpersona.model.drafts import WriteWarning
from cpersona.model.records import RawVisibility, SecrecyLevel, StoreKind
from cpersona.model.result_model import ResultModel, absent, empty

__all__ = ["BatchResult", "DeleteResult", "SkipReason", "StoreResult"]

SkipReason = Literal["duplicate_id", "duplicate_content", "duplicate"]


class StoreResult(ResultModel):
    """The outcome of one store.

    ``result`` is ``"stored"`` or ``"skipped"`` (a duplicate by caller id or identical content; ``ref``
    then names the record that already holds it). ``vector_pending`` is true when the record is saved
    but its vector could not be written yet; the engine finishes it on its next sweep or start.

    The rest are the fields of Cerememory's answers: for a memory, the ``store`` it was written to (for
    a skipped one, the store of the record that holds it, so that ``record_id`` and ``store`` describe
    one record; Cerememory's SDK reads those and drops ``result``) and the associations the write
    created (none when skipped); for a raw entry, its session and labels.
    """

    ok: Literal[True] = True
    result: Literal["stored", "skipped"]
    ref: str = Field(description="mem:<uuid>, ep:<uuid> or raw:<uuid>")
    record_id: str = ""  # filled from ref
    embedded: bool = False
    msg_id: str = Field(
        default="",
        validation_alias=AliasChoices("id", "msg_id"),
        serialization_alias="id",
        exclude_if=empty,
        description="The caller's message id, when given",
    )
    vector_pending: bool = Field(
        default=False, exclude_if=empty, description="Saved; the vector is written later"
    )
    skipped_reason: SkipReason | None = Field(
        default=None,
        validation_alias=AliasChoices("reason", "skipped_reason"),
        serialization_alias="reason",
        exclude_if=absent,
    )
    warnings: tuple[WriteWarning, ...] = Field(default=(), exclude_if=empty)
    store: StoreKind | None = Field(
        default=None,
        exclude_if=absent,
        description="A memory's store (Cerememory's EncodeStoreResponse); for a skipped write, "
        "the store of the record that holds it",
    )
    initial_fidelity: float | None = Field(
        default=None, exclude_if=absent, description="A memory's: always 1.0"
    )
    associations_created: int | None = Field(
        default=None,
        exclude_if=absent,
        description="A memory's outbound associations this write created (0 when skipped)",
    )
    session_id: str | None = Field(default=None, exclude_if=absent, description="A raw entry's session")
    visibility: RawVisibility | None = Field(
        default=None, exclude_if=absent, description="A raw entry's visibility"
    )
    secrecy_level: SecrecyLevel | None = Field(
        default=None, exclude_if=absent, description="A raw entry's secrecy level"
    )

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, data: Any) -> Any:
        # The record id is the ref's; a memory's answer carries its starting fidelity (every memory
        # starts whole, model/fidelity.py) and how many associations it made.
        if not isinstance(data, dict):
            return data
        out = dict(data)
        if "record_id" not in out and isinstance(out.get("ref"), str):
            out["record_id"] = out["ref"].partition(":")[2]
        if out.get("store") is not None:
            out.setdefault("initial_fidelity", 1.0)
            out.setdefault("associations_created", 0)
        return out

    @property
    def id(self) -> str:
        """The record's bare UUID (``record_id``)."""
        return self.record_id


class BatchResult(ResultModel):
    """Every item's outcome, in the order sent."""

    ok: Literal[True] = True
    # Counted from the results when built.
    stored: int = 0
    skipped: int = 0
    results: tuple[StoreResult, ...]
    associations_inferred: int = Field(
        default=0,
        # Cerememory's count of the edges a batch inferred between its items; this engine infers none.
        description="Edges inferred between the items: always 0 here",
    )

    @model_validator(mode="before")
    @classmethod
    def _counted(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "stored" in data:
            return data
        outcomes = [r.result for r in data.get("results", ())]
        return {**data, "stored": outcomes.count("stored"), "skipped": outcomes.count("skipped")}


class DeleteResult(ResultModel):
    ok: Literal[True] = True
    deleted: int
    agent_id: str | None = Field(
        default=None, exclude_if=absent, description="The agent whose data was deleted"
    )
