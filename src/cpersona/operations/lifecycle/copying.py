"""An archive imported into another agent of the store it was exported from: a copy under new ids.

Record ids are unique in the store, not per agent, so the records of agent A cannot be written into agent
B under their ids. Such an import is a copy: each record gets the id derived from the agent it is copied
into and its id (:func:`copied_id`, a UUIDv5), and every reference the archive makes to a record follows
it: a memory's Cerememory edges (``associations[].target_id``, a ref or a bare UUID), the context edges
of a memory's or raw entry's meta (``target_id``, ``source_id``), and the associative layer's mentions and
record relations. What a caller wrote itself (``metadata``, a meta's ``evidence``, ``msg_id``, a raw
entry's session, turn and topic) is kept as written: it is the caller's text, not a reference the store
resolves.

A reference is rewritten whether or not its record is in the archive, so the copy never names an id of
the agent it came from; one whose record the archive lacks stays dangling, as it was in the source (an
export of some stores only), and two archives of one agent copied into another link up as they did.

The ids are derived, not drawn: the same archive copied into the same agent twice names the same ids the
second time, which the import then decides by its conflict rule as it does any record the agent holds.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, TypeVar

from cpersona.model.records import EpisodeRecord, MemoryRecord, MetaMemory, ProfileRecord, RawRecord
from cpersona.stores.association_values import AssociationGraph

if TYPE_CHECKING:
    from cpersona.operations.lifecycle.archive import ArchivedRecord

__all__ = ["copied", "copied_id", "copied_ref"]

_NAMESPACE = uuid.UUID("0b6f3a52-7d1e-4c8a-9f25-3e8d41c6a7b0")
_KINDS = ("mem", "ep", "raw")

_Copied = TypeVar("_Copied", bound="ArchivedRecord | AssociationGraph")


def copied_id(agent_id: str, record_id: str) -> str:
    """The id the record ``record_id`` takes when copied into ``agent_id`` (the same on every call)."""
    # A NUL cannot occur in an agent id (no control character), so no two pairs name one text.
    return str(uuid.uuid5(_NAMESPACE, f"{agent_id}\0{record_id}"))


def _uuid(text: str) -> str | None:
    try:
        canonical = str(uuid.UUID(text))
    except ValueError:
        return None
    return canonical if canonical == text.lower() else None


def copied_ref(agent_id: str, text: str) -> str:
    """A reference as the copy names it: ``mem:``/``ep:``/``raw:`` and a UUID, or a bare UUID (a memory's,
    as Cerememory writes it), with the UUID mapped and the form kept; any other text unchanged."""
    kind, sep, ident = text.partition(":")
    if sep and kind in _KINDS and (found := _uuid(ident)) is not None:
        return f"{kind}:{copied_id(agent_id, found)}"
    if not sep and (found := _uuid(text)) is not None:
        return copied_id(agent_id, found)
    return text


def _meta(agent_id: str, meta: MetaMemory) -> MetaMemory:
    if not meta.context_edges:
        return meta
    edges = tuple(
        dataclasses.replace(
            e,
            target_id=copied_ref(agent_id, e.target_id),
            source_id=None if e.source_id is None else copied_ref(agent_id, e.source_id),
        )
        for e in meta.context_edges
    )
    return dataclasses.replace(meta, context_edges=edges)


def _graph(agent_id: str, graph: AssociationGraph) -> AssociationGraph:
    ref = copied_ref
    return dataclasses.replace(
        graph,
        mentions=tuple(sorted((entity, ref(agent_id, r)) for entity, r in graph.mentions)),
        record_relations=tuple(
            sorted((ref(agent_id, s), pred, ref(agent_id, o)) for s, pred, o in graph.record_relations)
        ),
    )


def copied(agent_id: str, item: _Copied) -> _Copied:
    """``item`` (an archived record, already scoped to ``agent_id``, or a scope's graph) as its copy
    in ``agent_id``: its id and every reference it makes mapped by :func:`copied_id`."""
    new: ArchivedRecord | AssociationGraph
    if isinstance(item, MemoryRecord):
        new = dataclasses.replace(
            item,
            id=copied_id(agent_id, item.id),
            meta=_meta(agent_id, item.meta),
            associations=tuple(
                dataclasses.replace(a, target_id=copied_ref(agent_id, a.target_id)) for a in item.associations
            ),
        )
    elif isinstance(item, EpisodeRecord):
        new = dataclasses.replace(item, id=copied_id(agent_id, item.id))
    elif isinstance(item, RawRecord):
        new = dataclasses.replace(item, id=copied_id(agent_id, item.id), meta=_meta(agent_id, item.meta))
    elif isinstance(item, AssociationGraph):
        new = _graph(agent_id, item)
    else:
        assert isinstance(item, ProfileRecord)  # the agent's one profile: no id, no reference
        new = item
    return new  # type: ignore[return-value]
