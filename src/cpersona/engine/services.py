"""The services an open engine is composed of, one per concern, each taking its validated request models.

``engine.services.recall.recall(RecallQuery(...))`` runs what ``engine.recall("...", agent_id=...)`` runs:
the engine's keyword methods build the model once and hand it here, and the edges (HTTP, MCP, CLI) hand
on the model they validated.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.engine.api_keys import KeyService
from cpersona.engine.associations import AssociationService
from cpersona.engine.reads import ReadService
from cpersona.engine.recalls import RecallService
from cpersona.engine.upkeep import UpkeepService
from cpersona.engine.writes import WriteService

if TYPE_CHECKING:
    import random

    from cpersona.engine.lifecycle import Lifecycle

__all__ = ["Services"]


@dataclasses.dataclass(frozen=True, slots=True)
class Services:
    """The engine's services: recall (and every ranked or walked read), reads of records by ref and scope,
    writes and deletes, associations, upkeep (decay, forget, consolidate, archives) and API keys."""

    recall: RecallService
    reads: ReadService
    writes: WriteService
    associations: AssociationService
    upkeep: UpkeepService
    keys: KeyService

    @classmethod
    def of(cls, life: Lifecycle, trace_rng: random.Random) -> Services:
        """The services over one engine's lifecycle (its settings, policies and, while open, backends)."""
        return cls(
            recall=RecallService(life, trace_rng),
            reads=ReadService(life),
            writes=WriteService(life),
            associations=AssociationService(life),
            upkeep=UpkeepService(life),
            keys=KeyService(life),
        )
