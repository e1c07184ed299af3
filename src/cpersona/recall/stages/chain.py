"""The recall stages after the arms: typed steps over frozen candidate sets, checked when wired.

Each stage declares the set type it takes and the set type it returns. :class:`Chain` checks every edge
when it is built and refuses a mis-wired chain with a :class:`~cpersona.GraphError` naming both stages,
before any I/O happens. Which stages a recall runs, and in what order, is the policy's ``chain``:
:func:`build_chain` turns those names into a :class:`Chain`, and the policy loader builds every policy's
chain once at start, so a file that names an unknown stage, wires two that do not fit or lacks a table a
stage reads is refused before the engine opens.

:meth:`Chain.run` returns every set it made (:class:`ChainRun`), so the whole history of a recall — what
each arm found, what fusion scored, what the gate refused, what the count cut — is read by type, without
anything having been copied or re-run; each set also keeps the set it was made from (``source``).

::

    Retrieved ─fuse─► Ranked ─score─► Ranked ─gate─► Gated ─autocut─► Gated ─cue_before_count─► Gated
      ─count─► Counted ─cue_after_count─► Counted ─seats─► Seated

Each shipped policy lists at most one of the two cue moves (cued-v0 moved rows before the count, every later
version after it, seed §2.9; single-pass-v0 lists neither). A listed cue move leaves its set as it is when
the recall carries no time cue.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from cpersona.errors import GraphError, InvalidSetting
from cpersona.model.candidates import ArmRow
from cpersona.model.time_cue import Move, bounded_move
from cpersona.recall.stages.fusion import ArmWeight, Candidate, FusionMode, cascade, informed, rrf, rsf
from cpersona.recall.stages.gate import Decision, GateConfig, autocut, decide, episode_penalty, prior
from cpersona.recall.stages.seats import SeatGate, block_seats, keyword_seats, seat_cue_rows

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cpersona.model.candidates import ArmResult
    from cpersona.model.policy import Policy
    from cpersona.model.time_cue import Confidence, Period

__all__ = [
    "Chain",
    "ChainRun",
    "CueFound",
    "Counted",
    "Gated",
    "Ranked",
    "RecallPlan",
    "Retrieved",
    "Seat",
    "Seated",
    "STAGES",
    "Stage",
    "build_chain",
]

In = TypeVar("In")
Out = TypeVar("Out")
SetT = TypeVar("SetT")


@dataclasses.dataclass(frozen=True, slots=True)
class RecallPlan:
    """What every stage of one recall may consult: the policy and the request's resolved choices."""

    policy: Policy
    mode: FusionMode
    limit: int
    depth: int
    gate: GateConfig
    blank_query: bool
    vector_threshold: float
    # Whether the query was embedded: without a vector every lexical row is single-arm, seats included.
    has_vector: bool = True
    # The question parts each record holds: the order of the policy's keyword seats (``seats.keyword``).
    parts_covered: Mapping[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class CueFound:
    """What the cue loop searched and found, for the stages after fusion (which it never enters).

    ``rows`` is the cue arm's list from the last stage searched (filtered like every arm, ranked from 0);
    ``confidence`` is the step that stage searched, which sets ``lift`` and ``seats``.
    """

    rows: tuple[ArmRow, ...]
    confidence: Confidence
    period: Period | None
    lift: int
    seats: int
    seat_cut_rows: bool

    @property
    def ranks(self) -> dict[str, int]:
        return {row.ref: row.rank for row in self.rows}


@dataclasses.dataclass(frozen=True, slots=True)
class Retrieved:
    """The arms' lists (filtered for source and exclusions, re-ranked, cut to the depth) and what
    fusion and scoring need to know about their rows."""

    arms: Mapping[str, ArmResult]
    profile_ref: str | None
    single_arm_refs: frozenset[str]
    created_at: Mapping[str, float]
    timestamps: Mapping[str, float]
    episode_boundary: float | None
    prior_anchor: float
    cue: CueFound | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Ranked:
    rows: tuple[Candidate, ...]
    source: Retrieved
    fused: tuple[Candidate, ...] = ()
    # How far ``informed`` fusion trusted each list (empty under the other modes).
    weights: tuple[ArmWeight, ...] = ()
    penalty: Mapping[str, float] = dataclasses.field(default_factory=dict)
    prior: Mapping[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Gated:
    rows: tuple[Candidate, ...]
    decisions: tuple[Decision, ...]
    source: Ranked
    autocut_fired: bool = False
    autocut_dropped: tuple[str, ...] = ()
    moves: tuple[Move, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Counted:
    rows: tuple[Candidate, ...]
    before_cut: tuple[str, ...]
    cut_by_count: tuple[str, ...]
    source: Gated
    moves: tuple[Move, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Seat:
    ref: str
    kind: Literal["block", "keyword", "cue"]
    row: ArmRow


@dataclasses.dataclass(frozen=True, slots=True)
class Seated:
    rows: tuple[Candidate, ...]
    seats: tuple[Seat, ...]
    source: Counted


@dataclasses.dataclass(frozen=True, slots=True)
class Stage(Generic[In, Out]):
    """One typed step. ``run`` is pure: it returns a new set and leaves its input as it was.

    ``reads`` names the policy tables the step takes its numbers from; a policy whose chain lists the step
    must have them (only ``[cue]`` can be absent from a policy).
    """

    name: str
    takes: type[In]
    gives: type[Out]
    run: Callable[[In, RecallPlan], Out]
    reads: tuple[str, ...] = ()


class Chain:
    """An ordered, type-checked list of stages."""

    def __init__(self, stages: Sequence[Stage[Any, Any]], *, takes: type[Any], gives: type[Any]) -> None:
        if not stages:
            raise GraphError("a chain needs at least one stage")
        if stages[0].takes is not takes:
            raise GraphError(
                f"the chain takes {takes.__name__} but {stages[0].name} takes {stages[0].takes.__name__}"
            )
        for before, after in itertools.pairwise(stages):
            if before.gives is not after.takes:
                gives_name, takes_name = before.gives.__name__, after.takes.__name__
                raise GraphError(f"{before.name} gives {gives_name} but {after.name} takes {takes_name}")
        last = stages[-1]
        if last.gives is not gives:
            raise GraphError(f"the chain gives {gives.__name__} but {last.name} gives {last.gives.__name__}")
        self.stages = tuple(stages)

    def run(self, data: Any, plan: RecallPlan) -> ChainRun:
        """Run every stage; return every set it made, in order, and each stage's time in milliseconds."""
        timing: dict[str, float] = {}
        sets: list[object] = [data]
        for stage in self.stages:
            start = time.perf_counter()
            data = stage.run(data, plan)
            timing[stage.name] = (time.perf_counter() - start) * 1000
            sets.append(data)
        return ChainRun(tuple(sets), timing)


@dataclasses.dataclass(frozen=True, slots=True)
class ChainRun:
    """What one run of a chain made: its input, then each stage's output (the same object again when a
    stage left its set as it was), and each stage's time in milliseconds.

    The trace and the response read the sets they need from here by type, without walking ``.source``.
    """

    sets: tuple[object, ...]
    timing_ms: Mapping[str, float]

    @property
    def final(self) -> Any:
        return self.sets[-1]

    def last(self, kind: type[SetT]) -> SetT:
        """The last set of exactly type ``kind`` (the latest stage's output of that type)."""
        for data in reversed(self.sets):
            if isinstance(data, kind) and type(data) is kind:
                return data
        raise GraphError(f"the chain made no {kind.__name__}")


# ----------------------------------------------------------------------------------------------- stages


def _fuse(data: Retrieved, plan: RecallPlan) -> Ranked:
    policy = plan.policy
    weights: tuple[ArmWeight, ...] = ()
    if plan.mode == "cascade" or plan.blank_query:
        rows = cascade(
            data.arms, limit=plan.limit, vector_threshold=plan.vector_threshold, profile_ref=data.profile_ref
        )
    elif plan.mode == "rsf":
        rows = rsf(data.arms, far_weight=policy.vector.far_weight, profile_ref=data.profile_ref)
    elif plan.mode == "informed":
        rows, weights = informed(
            data.arms,
            k=policy.fusion.rrf_k,
            far_weight=policy.vector.far_weight,
            profile_ref=data.profile_ref,
            single_arm_refs=data.single_arm_refs,
            scale=plan.gate.scale,
        )
    else:
        rows = rrf(
            data.arms,
            k=policy.fusion.rrf_k,
            far_weight=policy.vector.far_weight,
            profile_ref=data.profile_ref,
            single_arm_refs=data.single_arm_refs,
        )
    return Ranked(rows=rows, source=data, fused=rows, weights=weights)


def _score(data: Ranked, plan: RecallPlan) -> Ranked:
    rules = plan.policy.score_adjust
    rows = data.rows
    penalty: Mapping[str, float] = {}
    weights: Mapping[str, float] = {}
    if rules.episode_penalty:
        rows, penalty = episode_penalty(rows, data.source.created_at, data.source.episode_boundary, rules)
    rows, weights = prior(rows, data.source.timestamps, data.source.prior_anchor, rules)
    return dataclasses.replace(data, rows=rows, penalty=penalty, prior=weights)


def _gate(data: Ranked, plan: RecallPlan) -> Gated:
    decisions = tuple(decide(row, plan.gate, plan.policy.gate) for row in data.rows)
    passed = tuple(row for row, d in zip(data.rows, decisions, strict=True) if d.passed)
    return Gated(rows=passed, decisions=decisions, source=data)


def _autocut(data: Gated, plan: RecallPlan) -> Gated:
    cut_at, dropped = autocut(data.rows, plan.policy.autocut)
    if cut_at is None:
        return data
    gone = set(dropped)
    return dataclasses.replace(
        data,
        rows=tuple(r for r in data.rows if r.ref not in gone),
        autocut_fired=True,
        autocut_dropped=dropped,
    )


def _retrieved_of(data: Gated) -> Retrieved:
    return data.source.source


def _cue_before_count(data: Gated, plan: RecallPlan) -> Gated:
    cue = _retrieved_of(data).cue
    if cue is None:
        return data
    order, moves = bounded_move([r.ref for r in data.rows], cue.ranks, cue.lift)
    by_ref = {r.ref: r for r in data.rows}
    return dataclasses.replace(data, rows=tuple(by_ref[ref] for ref in order), moves=moves)


def _count(data: Gated, plan: RecallPlan) -> Counted:
    before = tuple(r.ref for r in data.rows)
    return Counted(
        rows=data.rows[: plan.limit], before_cut=before, cut_by_count=before[plan.limit :], source=data
    )


def _cue_after_count(data: Counted, plan: RecallPlan) -> Counted:
    cue = _retrieved_of(data.source).cue
    if cue is None:
        return data
    order, moves = bounded_move([r.ref for r in data.rows], cue.ranks, cue.lift)
    by_ref = {r.ref: r for r in data.rows}
    return dataclasses.replace(data, rows=tuple(by_ref[ref] for ref in order), moves=moves)


def _seats(data: Counted, plan: RecallPlan) -> Seated:
    """The held seats after the returned rows (``stages.seats``): block seats, then cue seats."""
    retrieved = _retrieved_of(data.source)
    seat_policy = plan.policy.seats
    gate = SeatGate(plan.gate, plan.policy.gate, has_vector=plan.has_vector, floor=seat_policy.floor)
    block = retrieved.arms.get("block")
    seats: list[Seat] = []
    block_count = seat_policy.block + seat_policy.extra_block
    if block is not None and block_count > 0 and not plan.blank_query:
        returned = {r.ref for r in data.rows}
        chosen = block_seats(block.rows, returned=returned, seats=block_count, gate=gate)
        seats.extend(Seat(row.ref, "block", row) for row in chosen)
    if seat_policy.keyword > 0:
        taken = {r.ref for r in data.rows} | {seat.ref for seat in seats}
        words = keyword_seats(
            data.source.source.rows,
            data.source.decisions,
            taken=taken,
            seats=seat_policy.keyword,
            parts=plan.parts_covered,
        )
        seats.extend(Seat(c.ref, "keyword", ArmRow(c.ref, n, c.rrf)) for n, c in enumerate(words))
    cue = retrieved.cue
    if cue is not None and cue.seats > 0 and cue.rows:
        taken = {r.ref for r in data.rows} | {seat.ref for seat in seats}
        reached = {row.ref for name, arm in retrieved.arms.items() if name != "block" for row in arm.rows}
        cue_rows = seat_cue_rows(
            cue.rows,
            returned=taken,
            reached=reached,
            cut_by_count=data.cut_by_count,
            seats=cue.seats,
            allow_cut=cue.seat_cut_rows,
            gate=gate,
        )
        seats.extend(Seat(row.ref, "cue", row) for row in cue_rows)
    return Seated(rows=data.rows, seats=tuple(seats), source=data)


FUSE: Stage[Retrieved, Ranked] = Stage("fuse", Retrieved, Ranked, _fuse, ("fusion", "vector"))
SCORE: Stage[Ranked, Ranked] = Stage("score", Ranked, Ranked, _score, ("score_adjust",))
GATE: Stage[Ranked, Gated] = Stage("gate", Ranked, Gated, _gate, ("gate",))
AUTOCUT: Stage[Gated, Gated] = Stage("autocut", Gated, Gated, _autocut, ("autocut",))
CUE_BEFORE_COUNT: Stage[Gated, Gated] = Stage("cue_before_count", Gated, Gated, _cue_before_count, ("cue",))
# The count reads no table: the request's limit was already bounded by the policy's [limit].
COUNT: Stage[Gated, Counted] = Stage("count", Gated, Counted, _count)
CUE_AFTER_COUNT: Stage[Counted, Counted] = Stage(
    "cue_after_count", Counted, Counted, _cue_after_count, ("cue",)
)
# The seats stage also fills the cue seats when the policy has a [cue] table, and skips them when not.
SEATS: Stage[Counted, Seated] = Stage("seats", Counted, Seated, _seats, ("seats",))

# Every stage a policy's chain may name, by the name it is listed under.
STAGES: Mapping[str, Stage[Any, Any]] = {
    stage.name: stage
    for stage in (FUSE, SCORE, GATE, AUTOCUT, CUE_BEFORE_COUNT, COUNT, CUE_AFTER_COUNT, SEATS)
}


def build_chain(policy: Policy) -> Chain:
    """The chain ``policy`` names, checked: refused with :class:`~cpersona.InvalidSetting` naming the
    policy's file and the ``chain`` entry at fault (unknown, repeated, missing a table, or mis-wired),
    or both cue moves at once."""
    where = f"policy file {policy.name}.toml"
    for index, name in enumerate(policy.chain):
        key = f"chain[{index}]"
        stage = STAGES.get(name)
        if stage is None:
            known = ", ".join(STAGES)
            raise InvalidSetting(where, f"{key} names an unknown stage {name!r} (the stages: {known})")
        if name in policy.chain[:index]:
            # Each stage's time is reported under its name, and a second run would be a second move.
            raise InvalidSetting(where, f"{key} names {name} a second time")
        missing = [table for table in stage.reads if getattr(policy, table) is None]
        if missing:
            raise InvalidSetting(where, f"{key} names {name}, which needs a [{missing[0]}] table")
    if CUE_BEFORE_COUNT.name in policy.chain and CUE_AFTER_COUNT.name in policy.chain:
        # Each move is bounded by L; two would let a row climb 2L places.
        raise InvalidSetting(
            where,
            f"chain names both {CUE_BEFORE_COUNT.name} and {CUE_AFTER_COUNT.name}: a recall moves rows once",
        )
    try:
        return _wired(policy.chain)
    except GraphError as exc:
        raise InvalidSetting(where, f"chain is mis-wired: {exc}") from None


@functools.cache
def _wired(names: tuple[str, ...]) -> Chain:
    # The stages read their numbers from the plan at run time, so one chain serves every policy that
    # lists the same names, and a recall that builds its policy's chain pays for the check only once.
    return Chain([STAGES[name] for name in names], takes=Retrieved, gives=Seated)
