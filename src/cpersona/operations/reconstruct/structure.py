"""Stage 7, structure: one item per cluster. The head is the most relevant member, or, when newer
versions with its ``msg_id`` are in the cluster, the newest of them. The claims are the retained rows
(head, the other members by relevance, then the walked evidence; at most ``max_evidence``) listed newest
first. A claim's roles say what another retained row is to it: ``supersedes`` (the next newer row with
its msg_id), ``supports`` (an episode whose span holds its time), or a declared record relation whose
predicate is a role word, read from that row (subject) to the claim (object). Rows with the same msg_id
and the same time are listed as a conflict."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, get_args

from cpersona.model.reconstruct_response import ClaimRole, Conflict, RoleWord

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.operations.reconstruct.bundling import Cluster
    from cpersona.operations.reconstruct.candidates import Candidate
    from cpersona.operations.reconstruct.walk import Walked
    from cpersona.stores.protocols import RecordLinks

__all__ = ["ROLE_WORDS", "Row", "Structured", "structure"]

ROLE_WORDS: frozenset[str] = frozenset(get_args(RoleWord))


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """A retained row, from the pool or the walk, as structure and quoting read it."""

    ref: str
    rank: int
    is_memory: bool
    text: str
    msg_id: str
    ts: float | None
    span: tuple[float, float] | None = None
    why: str | None = None
    hops: int | None = None

    @classmethod
    def of_candidate(cls, c: Candidate, why: str | None) -> Row:
        return cls(c.ref, c.rank, c.is_memory, c.text, c.msg_id, c.ts, c.span, why)

    @classmethod
    def of_walked(cls, w: Walked, rank: int) -> Row:
        rec = w.record
        text = "" if rec.text is None else rec.text
        return cls(w.ref, rank, rec.is_memory, text, rec.msg_id, rec.ts, None, w.why, w.hops)


@dataclasses.dataclass(frozen=True, slots=True)
class Structured:
    head: Row
    claims: tuple[tuple[Row, tuple[ClaimRole, ...]], ...]
    omitted: int
    conflicts: tuple[Conflict, ...]


def _newest_first(row: Row) -> tuple[bool, float, bool, int, str]:
    return (row.ts is None, -(row.ts or 0.0), not row.is_memory, row.rank, row.ref)


def _head(rows: Sequence[Row]) -> Row:
    best = rows[0]
    if not (best.is_memory and best.msg_id and best.ts is not None):
        return best
    newer = [
        r for r in rows if r.is_memory and r.msg_id == best.msg_id and r.ts is not None and r.ts > best.ts
    ]
    return max(newer, key=lambda r: (r.ts or 0.0, -r.rank)) if newer else best


def _roles(claim: Row, retained: Sequence[Row], links: Mapping[str, RecordLinks]) -> tuple[ClaimRole, ...]:
    roles: list[ClaimRole] = []
    if claim.is_memory and claim.msg_id and claim.ts is not None:
        ts = claim.ts
        newer = [
            r for r in retained if r.is_memory and r.msg_id == claim.msg_id and r.ts is not None and r.ts > ts
        ]
        if newer:
            roles.append(ClaimRole(ref=min(newer, key=lambda r: (r.ts, r.rank)).ref, role="supersedes"))
    if claim.is_memory and claim.ts is not None:
        ts = claim.ts
        roles.extend(
            ClaimRole(ref=r.ref, role="supports") for r in retained if r.span and r.span[0] <= ts <= r.span[1]
        )
    found = links.get(claim.ref)
    present = {r.ref for r in retained}
    for link in () if found is None else sorted(found.relations):
        if link.direction == "in" and link.predicate in ROLE_WORDS and link.other in present:
            roles.append(ClaimRole.model_validate({"ref": link.other, "role": link.predicate}))
    return tuple(roles)


def _conflicts(retained: Sequence[Row]) -> tuple[Conflict, ...]:
    groups: dict[tuple[str, float], list[Row]] = {}
    for r in retained:
        if r.is_memory and r.msg_id and r.ts is not None:
            groups.setdefault((r.msg_id, r.ts), []).append(r)
    return tuple(
        Conflict(refs=[r.ref for r in rows], reason="same_msg_id_same_timestamp", msg_id=msg_id)
        for (msg_id, _), rows in groups.items()
        if len(rows) > 1
    )


def structure(
    cluster: Cluster,
    pool: Sequence[Candidate],
    walked: Sequence[Walked],
    links: Mapping[str, RecordLinks],
    max_evidence: int,
) -> Structured:
    members = [Row.of_candidate(pool[i], cluster.why.get(i)) for i in cluster.members]
    head = _head(members)
    rest = [r for r in members if r is not head]
    evidence = [Row.of_walked(w, len(pool) + n) for n, w in enumerate(walked)]
    every = [head, *rest, *evidence]
    retained = every[:max_evidence]
    ordered = sorted(retained, key=_newest_first)
    claims = tuple((row, _roles(row, retained, links)) for row in ordered)
    return Structured(head, claims, len(every) - len(retained), _conflicts(retained))
