"""The isolation rules, in one place: which records a read in a given scope may see.

| axis         | ``None``      | ``''``             | ``X``                 |
|--------------|---------------|--------------------|-----------------------|
| ``agent_id`` | (required)    | exactly ``''``     | exactly ``X``         |
| ``project``  | any project   | global pool only   | ``X`` or global ``''``|
| ``channel``  | any channel   | any channel        | ``X`` or global ``''``|
| ``source_id``| no filter     | no filter          | exact if ``X`` ends in a letter or digit, else prefix |

Every read builds its filters from :class:`ReadScope`: the Redis clause
(:func:`cpersona.stores.redis.scope.scope_query`) and the Qdrant filter
(:func:`cpersona.stores.protocols.scope_filter`) read only ``projects``, ``channels`` and the source rule
defined here, so no option, cue or failure path can widen what a scope sees.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.errors import InvalidRequest

if TYPE_CHECKING:
    from cpersona.model.records import Scope, Source

__all__ = ["ReadScope"]


@dataclasses.dataclass(frozen=True, slots=True)
class ReadScope:
    agent_id: str
    project_id: str | None = None
    channel: str | None = None
    source_id: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.agent_id, str):
            raise InvalidRequest("agent_id", "must be a string")

    @property
    def projects(self) -> tuple[str, ...] | None:
        if self.project_id is None:
            return None
        if self.project_id == "":
            return ("",)
        return (self.project_id, "")

    @property
    def channels(self) -> tuple[str, ...] | None:
        if not self.channel:
            return None
        return (self.channel, "")

    @property
    def source_is_prefix(self) -> bool:
        return bool(self.source_id) and not self.source_id[-1].isalnum()

    def sees(self, scope: Scope, source: Source | None = None) -> bool:
        """Whether a record in ``scope`` (with ``source``, for memories) is visible to this read."""
        if scope.agent_id != self.agent_id:
            return False
        projects = self.projects
        if projects is not None and scope.project_id not in projects:
            return False
        channels = self.channels
        if channels is not None and scope.channel not in channels:
            return False
        if self.source_id:
            return source is not None and self.sees_source(source.id)
        return True

    def sees_source(self, source_id: str) -> bool:
        """Whether a record with this ``source.id`` passes the source filter."""
        if not self.source_id:
            return True
        if self.source_is_prefix:
            return source_id.startswith(self.source_id)
        return source_id == self.source_id
