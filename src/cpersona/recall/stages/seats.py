"""The held seats: the rows appended after the answer, for records only the block or the cue arm ranked.

Seats never displace a returned row, and there are at most ``seats.block`` block seats (2) and as many cue
seats as the cue's confidence step allows (at most 3), so a recall returns up to ``limit`` rows plus those.
Under a policy whose ``[seats] floor`` is on (single-pass-v1, cued-v0.4) a seat is not a way round the
quality gate: a candidate takes one only if the score its arm found it by passes the gate's rule for that
signal, the one the arm's rows would meet in the ordinary ranking
(:func:`~cpersona.recall.stages.gate.decide`):

* a block seat compares its best block's cosine with the cosine threshold (calibrated, else the
  heuristic minimum for the scope's pool, halved by ``deep``, in the embedder's cosines:
  :attr:`~cpersona.recall.stages.gate.GateConfig.cosine_min`);
* a cue seat for a record no ordinary arm reached compares the cosine its vector half found the record at
  the same way; found only by its keyword halves, its vote (a reciprocal-rank sum like the fused ``rrf``)
  meets the lexical rule; on a blank query it is unscored and passes as an ordinary blank-query row does;
* a cue seat for a record the count cut was already admitted by the gate.

A seat with no candidate above its floor stays empty. Without the floor (single-pass-v0, cued-v0 …
cued-v0.3, kept so their recalls can be replayed) the block seats take whatever the block arm ranked
first, so a question about an office move could be answered with a block at cosine 0.06.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.model.time_cue import cue_seats
from cpersona.recall.stages.fusion import Candidate, kind_of
from cpersona.recall.stages.gate import Decision, decide

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from cpersona.model.candidates import ArmRow
    from cpersona.model.policy import GatePolicy
    from cpersona.recall.stages.gate import GateConfig

__all__ = ["SeatGate", "block_seats", "keyword_seats", "seat_cue_rows"]


@dataclasses.dataclass(frozen=True, slots=True)
class SeatGate:
    """The gate as the seats consult it: one recall's thresholds and whether it had a query vector."""

    cfg: GateConfig
    policy: GatePolicy
    has_vector: bool
    # Off under the policies before single-pass-v1 / cued-v0.4, whose seats take any candidate.
    floor: bool = True

    def block(self, row: ArmRow) -> Decision:
        """A block-arm row by its best block's cosine; one without a score has nothing to pass with."""
        if row.raw is None:
            return Decision(row.ref, "cosine", None, None, passed=False, reason="below_gate")
        return decide(Candidate(ref=row.ref, kind=kind_of(row.ref), cosine=row.raw), self.cfg, self.policy)

    def cue(self, row: ArmRow) -> Decision:
        """A cue-arm row by the cosine its vector half found, else its vote under the lexical rule."""
        kind = kind_of(row.ref)
        if row.cosine is not None:
            return decide(Candidate(ref=row.ref, kind=kind, cosine=row.cosine), self.cfg, self.policy)
        if self.cfg.blank_query or row.raw is None:
            return decide(Candidate(ref=row.ref, kind=kind), self.cfg, self.policy)
        # Without a query vector every lexical row is single-arm in fusion too (see retrieve).
        lexical = Candidate(ref=row.ref, kind=kind, rrf=row.raw, single_arm=not self.has_vector)
        return decide(lexical, self.cfg, self.policy)


def block_seats(
    rows: Sequence[ArmRow], *, returned: Collection[str], seats: int, gate: SeatGate
) -> tuple[ArmRow, ...]:
    """The block-arm rows that take the block seats, in block order: not returned, above the floor."""
    taken: list[ArmRow] = []
    held = set(returned)
    for row in rows:
        if len(taken) >= seats:
            break
        if row.ref in held or (gate.floor and not gate.block(row).passed):
            continue
        taken.append(row)
        held.add(row.ref)
    return tuple(taken)


def seat_cue_rows(
    rows: Sequence[ArmRow],
    *,
    returned: Collection[str],
    reached: Collection[str],
    cut_by_count: Collection[str],
    seats: int,
    allow_cut: bool,
    gate: SeatGate,
) -> tuple[ArmRow, ...]:
    """The cue-arm rows that take the cue seats, in cue-arm order (:func:`cue_seats` for who is
    eligible); a record no ordinary arm reached must also pass the gate by the cue arm's own scores."""
    admitted = [row for row in rows if not gate.floor or row.ref in reached or gate.cue(row).passed]
    chosen = cue_seats(
        [row.ref for row in admitted],
        returned=returned,
        reached=reached,
        cut_by_count=cut_by_count,
        seats=seats,
        allow_cut=allow_cut,
    )
    by_ref = {row.ref: row for row in admitted}
    return tuple(by_ref[ref] for ref in chosen)


def keyword_seats(
    ranked: Sequence[Candidate],
    decisions: Sequence[Decision],
    *,
    taken: Collection[str],
    seats: int,
    parts: Mapping[str, int],
) -> tuple[Candidate, ...]:
    """The rows that take the keyword seats (asked for by reconstruct; a plain recall has none): rows
    only the lexical arms found, not returned, that the gate admitted (and a later cut removed) or
    refused on the ``rrf`` signal; most question parts covered first, ties in gate order."""
    verdict = {d.ref: d for d in decisions}
    eligible = [
        c
        for c in ranked
        if c.lexical_only
        and c.ref not in taken
        and c.ref in verdict
        and (verdict[c.ref].passed or verdict[c.ref].signal == "rrf")
    ]
    order = {c.ref: i for i, c in enumerate(eligible)}
    eligible.sort(key=lambda c: (-parts.get(c.ref, 0), order[c.ref]))
    return tuple(eligible[: max(0, seats)])
