"""What the write and read operations return: small frozen values with a ``to_json`` for the edges."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

__all__ = ["BatchResult", "DeleteResult", "StoreResult"]


@dataclasses.dataclass(frozen=True, slots=True)
class StoreResult:
    """The outcome of one store.

    ``result`` is ``"stored"`` or ``"skipped"`` (a duplicate by caller id or identical content; ``ref``
    then names the record that already holds it). ``vector_pending`` is true when the record is saved
    but its vector could not be written yet; the engine finishes it on its next sweep or start.

    The rest are the fields of Cerememory's answers: for a memory, the ``store`` it was written to (for
    a skipped one, the store the write asked for) and the associations the write created (none when
    skipped); for a raw entry, its session and labels.
    """

    result: Literal["stored", "skipped"]
    ref: str
    msg_id: str = ""
    embedded: bool = False
    vector_pending: bool = False
    skipped_reason: str | None = None
    warnings: tuple[str, ...] = ()
    store: str | None = None
    associations_created: int = 0
    session_id: str | None = None
    visibility: str | None = None
    secrecy_level: str | None = None

    @property
    def id(self) -> str:
        return self.ref.partition(":")[2]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": True,
            "result": self.result,
            "ref": self.ref,
            "record_id": self.id,
            "embedded": self.embedded,
        }
        if self.msg_id:
            out["id"] = self.msg_id
        if self.vector_pending:
            out["vector_pending"] = True
        if self.skipped_reason:
            out["reason"] = self.skipped_reason
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.store is not None:
            # Every memory starts whole; its fidelity decays from there (model/fidelity.py).
            out.update(store=self.store, initial_fidelity=1.0, associations_created=self.associations_created)
        if self.session_id is not None:
            out.update(
                session_id=self.session_id, visibility=self.visibility, secrecy_level=self.secrecy_level
            )
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class BatchResult:
    results: tuple[StoreResult, ...]

    @property
    def stored(self) -> int:
        return sum(1 for r in self.results if r.result == "stored")

    @property
    def skipped(self) -> int:
        return sum(1 for r in self.results if r.result == "skipped")

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "stored": self.stored,
            "skipped": self.skipped,
            "results": [r.to_json() for r in self.results],
            # Cerememory's count of the edges a batch inferred between its items; this engine infers none.
            "associations_inferred": 0,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteResult:
    deleted: int

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "deleted": self.deleted}
