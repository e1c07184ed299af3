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
    """

    result: Literal["stored", "skipped"]
    ref: str
    msg_id: str = ""
    embedded: bool = False
    vector_pending: bool = False
    skipped_reason: str | None = None
    warnings: tuple[str, ...] = ()

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
        }


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteResult:
    deleted: int

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, "deleted": self.deleted}
