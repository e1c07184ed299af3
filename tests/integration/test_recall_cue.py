"""The time cue inside a recall: the loop, the bounded move, the seats, the revision and the time limit.

The pure parts (reading a cue, periods, the move and seat rules) are tested in ``test_cue.py`` and the cue
arm's searches in ``test_cue_arm.py``. Here the engine runs whole recalls, with and without a cue, on real
Redis, real Qdrant and the real embedder, and the seed's §2.6 invariants are checked as properties over
generated stores, questions and cues.
"""

from __future__ import annotations

import datetime
import itertools
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest, Settings
from cpersona.edges.cli.main import when_to_cue
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from cpersona.model.candidates import ArmResult
    from cpersona.recall.arm_runner import ArmCall

AGENT = "cue-agent"
DAY = 86_400.0
NOW = time.time()

# A small store spread over the last year: topics repeat across months so a cue has something to choose.
TOPICS = [
    "the garden fence was painted green",
    "we planned a hiking trip to the mountains",
    "the database migration finished late",
    "Maya adopted a grey cat named Pixel",
    "the team reviewed the budget for the conference",
    "Tom started learning the violin",
]


def _ts(days_ago: float) -> str:
    moment = datetime.datetime.fromtimestamp(NOW - days_ago * DAY, datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _rows(result: cpersona.RecallResult) -> list[Any]:
    """The rows as a caller sees them, cosines to six places: the in-process vector engine computes a
    cosine over a filtered subset of its points, and two searches of one question may differ in the
    eighth digit (seen: 0.58132664 and 0.58132666)."""
    return [_rounded(r.model_dump(mode="json")) for r in result.rows]


@pytest.fixture
def arm_calls() -> list[str]:
    """The arms the ``engine`` fixture's recalls ran, in order (its arm wrapper only counts them)."""
    return []


@pytest.fixture
async def counted_engine(vector_settings: Settings, arm_calls: list[str]) -> AsyncIterator[cpersona.Engine]:
    async with cpersona.open(vector_settings, background=False, arm_wrapper=_counting(arm_calls)) as memory:
        yield memory


async def _seed(
    memory: cpersona.Engine, agent: str = AGENT, notes: Sequence[tuple[int, int]] | None = None
) -> dict[str, str]:
    """Store notes (topic index, days ago); by default every topic at 300, 120, 40 and 10 days ago.
    Return ref → content."""
    if notes is None:
        notes = list(itertools.product(range(len(TOPICS)), (300, 120, 40, 10)))
    records = []
    for n, (topic, days) in enumerate(notes):
        records.append({"content": f"{TOPICS[topic]} (note {n})", "agent_id": agent, "timestamp": _ts(days)})
    batch = await memory.store_batch(records)
    await memory.drain_blocks()
    return {r.ref: rec["content"] for r, rec in zip(batch.results, records, strict=True)}


def _counting(calls: list[str]) -> Callable[[str, ArmCall], ArmCall]:
    """An arm wrapper that appends each arm's name to ``calls`` as it runs."""

    def wrap(name: str, call: ArmCall) -> ArmCall:
        async def counted() -> ArmResult:
            calls.append(name)
            return await call()

        return counted

    return wrap


def _plain_rows(result: cpersona.RecallResult) -> list[str | None]:
    return [row.ref for row in result.rows if (row.match_reason or {}).get("admission") != "reservation"]


def _seat_rows(result: cpersona.RecallResult, signal: str) -> list[str | None]:
    return [
        row.ref
        for row in result.rows
        if (row.match_reason or {}).get("admission") == "reservation"
        and (row.match_reason or {}).get("signal") == signal
    ]


def _gate_passed(trace: Mapping[str, Any]) -> list[str]:
    """The refs the gate admitted, sorted."""
    return sorted(d["ref"] for d in trace["gate"]["decisions"] if d["passed"])


# ------------------------------------------------------------------------------------- the request


async def test_a_cue_needs_a_cued_policy(counted_engine: cpersona.Engine) -> None:
    cue = {"ago": {"unit": "weeks", "value": 2}, "confidence": "likely"}
    with pytest.raises(InvalidRequest) as caught:
        await counted_engine.recall("cat", agent_id=AGENT, time_cue=cue, policy="single-pass-v0")
    assert caught.value.field == "time_cue"
    assert "cued-v0.4" in str(caught.value)


async def test_a_bad_cue_is_refused_naming_its_part(counted_engine: cpersona.Engine) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await counted_engine.recall(
            "cat", agent_id=AGENT, time_cue={"ago": {"unit": "years", "value": 2}, "confidence": "sure"}
        )
    assert caught.value.field == "time_cue.ago.unit"
    with pytest.raises(InvalidRequest) as caught:
        await counted_engine.recall("cat", agent_id=AGENT, time_cue={"after": "2026-01-01"})
    assert caught.value.field == "time_cue.confidence"


async def test_an_empty_cue_is_no_cue(counted_engine: cpersona.Engine) -> None:
    await _seed(counted_engine)
    plain = await counted_engine.recall("cat", agent_id=AGENT)
    empty = await counted_engine.recall("cat", agent_id=AGENT, time_cue={})
    # Floats to six places, as _rows does: qdrant-client's in-memory mode re-normalises its stored vectors
    # in place on every search, so the second search may score a point one float32 ulp apart.
    assert _rounded(empty.model_dump(mode="json")) == _rounded(plain.model_dump(mode="json"))
    assert "time_cue" not in empty.model_dump(mode="json")
    assert empty.policy["process"] == "single-pass-v2"


# --------------------------------------------------------------------------------- what a cue does


async def test_a_cue_reports_its_period_and_marks_the_rows_it_ranked(counted_engine: cpersona.Engine) -> None:
    await _seed(counted_engine)
    cue = {"after": _ts(45)[:10], "before": _ts(35)[:10], "confidence": "sure"}
    result = await counted_engine.recall("the cat Pixel", agent_id=AGENT, time_cue=cue, limit=3, trace=True)
    body = result.model_dump(mode="json")
    assert result.policy["process"] == "cued-v0.5"
    tc = body["time_cue"]
    assert tc["policy"] == "cued-v0.5"
    assert tc["confidence"] == "sure"
    assert tc["revised"] is False
    start, end = (datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in tc["period"])
    assert start <= NOW - 40 * DAY < end
    # The cue arm found the note stored 40 days ago (and only rows in the period), and says so on the row.
    trace = body["trace"]
    cue_refs = [r["ref"] for r in trace["arms"]["cue"]]
    assert cue_refs
    for ref in cue_refs:
        doc = await counted_engine.get(ref, agent_id=AGENT)
        assert isinstance(doc, cpersona.MemoryRecord)  # the store holds notes only
        assert start <= doc.timestamp < end
    ranked = {row.ref: (row.match_reason or {}).get("cue_rank") for row in result.rows}
    for ref, rank in ranked.items():
        if ref in cue_refs:
            assert rank == cue_refs.index(ref)
        else:
            assert rank is None
    assert trace["request"]["time_cue"] == {
        "after": cue["after"] + "T00:00:00Z",
        "before": _next_day(cue["before"]),
        "confidence": "sure",
    }
    assert trace["stages"][0]["confidence"] == "sure"
    assert trace["cue"]["bound"] == 3
    assert [seat["ref"] for seat in trace["reservation"] if seat["kind"] == "cue"] == trace["cue"]["seated"]


def _next_day(day: str) -> str:
    return (datetime.date.fromisoformat(day) + datetime.timedelta(days=1)).isoformat() + "T00:00:00Z"


async def test_the_row_the_cue_ranks_first_rises_exactly_l_places(counted_engine: cpersona.Engine) -> None:
    # Five near-identical notes on five days, and other topics on other days.
    days = (300, 200, 100, 50, 20)
    await _seed(counted_engine, notes=[(5, d) for d in days] + [(n, d + 1) for n, d in enumerate(days)])
    plain = await counted_engine.recall(
        "Tom learning the violin", agent_id=AGENT, limit=5, policy="cued-v0.4"
    )
    order = _plain_rows(plain)
    assert len(order) == 5
    last = order[-1]
    assert last is not None
    record = await counted_engine.get(last, agent_id=AGENT)
    assert isinstance(record, cpersona.MemoryRecord)
    day = datetime.datetime.fromtimestamp(record.timestamp, datetime.UTC).date().isoformat()
    for confidence, bound in (("sure", 3), ("likely", 2), ("vague", 1)):
        # The day holds that note alone (the margins of likely and vague stay within a day or two).
        cue = {"after": day, "before": day, "confidence": confidence}
        cued = await counted_engine.recall(
            "Tom learning the violin", agent_id=AGENT, limit=5, time_cue=cue, trace=True
        )
        assert cued.trace is not None
        assert trace_json(cued)["arms"]["cue"][0]["ref"] == last
        moved = _plain_rows(cued)
        assert moved.index(last) == 4 - bound
        # Every other row keeps its order and steps down at most one place.
        assert [r for r in moved if r != last] == [r for r in order if r != last]
        assert cued.model_dump(mode="json")["time_cue"]["moved"] == 1
        assert trace_json(cued)["cue"]["lifted"] == [{"row": last, "from": 4, "to": 4 - bound}]


async def test_a_cue_for_today_is_not_used(counted_engine: cpersona.Engine) -> None:
    await _seed(counted_engine)
    today = datetime.datetime.fromtimestamp(NOW, datetime.UTC).date().isoformat()
    plain = await counted_engine.recall("cat", agent_id=AGENT, policy="cued-v0.4")
    cued = await counted_engine.recall(
        "cat", agent_id=AGENT, time_cue={"after": today, "confidence": "sure"}, trace=True
    )
    assert _rows(cued) == _rows(plain)
    assert cued.model_dump(mode="json")["time_cue"]["ignored"] == "recent_only"
    assert cued.trace is not None
    assert trace_json(cued)["cue_ignored"]["reason"] == "recent_only"
    # cued-v0 predates the rule: the same cue is used there.
    old = await counted_engine.recall(
        "cat", agent_id=AGENT, time_cue={"after": today, "confidence": "sure"}, policy="cued-v0"
    )
    assert "ignored" not in old.model_dump(mode="json")["time_cue"]


async def test_an_empty_period_widens_once_and_runs_only_the_cue_arm(
    counted_engine: cpersona.Engine, arm_calls: list[str]
) -> None:
    await _seed(counted_engine)
    calls = arm_calls
    calls.clear()
    # Nothing was stored 200-210 days ago; 'likely' widens by half the length on each side (195-215):
    # still nothing, so the recall stops after one revision.
    cue = {"after": _ts(210)[:10], "before": _ts(201)[:10], "confidence": "likely"}
    result = await counted_engine.recall("garden fence", agent_id=AGENT, time_cue=cue, trace=True)
    tc = result.model_dump(mode="json")["time_cue"]
    assert tc["revised"] is True
    assert tc["confidence"] == "vague"
    assert calls.count("cue") == 2
    assert all(calls.count(arm) <= 1 for arm in set(calls) - {"cue"})
    trace = trace_json(result)
    assert trace is not None
    assert [s["confidence"] for s in trace["stages"]] == ["likely", "vague"]
    assert trace["stages"][0]["next"] == "widen to vague"
    reason = "the cue period holds no candidate"
    assert trace["suspected"] == [
        {"stage": 0, "code": "CANDIDATE_MISS", "reason": reason, "action": "widen to vague"},
        {"stage": 1, "code": "CANDIDATE_MISS", "reason": reason, "action": "stop: no wider step"},
    ]
    assert trace["budget"]["stop"] == "no_wider_step"
    # The revision ran the cue arm only: every ordinary arm's list is the uncued recall's.
    plain = await counted_engine.recall("garden fence", agent_id=AGENT, policy="cued-v0.4")
    assert _plain_rows(result) == _plain_rows(plain)


async def test_a_vague_cue_over_an_empty_period_stops(counted_engine: cpersona.Engine) -> None:
    await _seed(counted_engine)
    cue = {"after": _ts(230)[:10], "before": _ts(225)[:10], "confidence": "vague"}
    result = await counted_engine.recall("garden fence", agent_id=AGENT, time_cue=cue, trace=True)
    assert result.model_dump(mode="json")["time_cue"]["revised"] is False
    assert result.trace is not None
    assert trace_json(result)["budget"]["stop"] == "no_wider_step"
    assert trace_json(result)["stages"][-1]["next"] == "stop: no wider step"


async def test_a_slow_cue_arm_stops_at_the_time_limit(vector_settings: Settings) -> None:
    settings_ = vector_settings.with_(recall_cue_time_limit_ms=300)

    def slow(name: str, call: Callable[[], Awaitable[ArmResult]]) -> Callable[[], Awaitable[ArmResult]]:
        if name != "cue":
            return call

        async def late() -> ArmResult:
            try:
                await anyio.sleep(60)
            except anyio.get_cancelled_exc_class():
                cancelled.append(name)
                raise
            return await call()

        return late

    cancelled: list[str] = []
    # Only the cue arm is slowed, and a recall without a cue runs none: the plain recall is unaffected.
    async with cpersona.open(settings_, background=False, arm_wrapper=slow) as memory:
        await _seed(memory)
        plain = await memory.recall("hiking trip", agent_id=AGENT, policy="cued-v0.4")
        cue = {"ago": {"unit": "weeks", "value": 6}, "confidence": "likely"}
        with anyio.fail_after(30):  # a guard against a hang, not a measurement
            result = await memory.recall("hiking trip", agent_id=AGENT, time_cue=cue, trace=True)
    # The slow arm was cancelled at the limit (it would have slept 60 s), and the recall answered.
    assert cancelled == ["cue"]
    assert result.trace is not None
    assert trace_json(result)["budget"] == {"cue_time_limit_ms": 300, "stop": "time_limit"}
    assert [d.arm for d in result.degraded] == ["cue"]
    assert result.degraded[0].status == "timeout"
    # Without its arm the cue moves nothing and seats nothing: the rows are the uncued recall's.
    assert [r.ref for r in result.rows] == [r.ref for r in plain.rows]


# ------------------------------------------------------------------------------- the invariants

_runs = itertools.count()

CUE_ST = st.one_of(
    st.builds(
        lambda a, b, c: {"after": _ts(max(a, b))[:10], "before": _ts(min(a, b))[:10], "confidence": c},
        st.integers(1, 330),
        st.integers(1, 330),
        st.sampled_from(["sure", "likely", "vague"]),
    ),
    st.builds(
        lambda u, v, c: {"ago": {"unit": u, "value": v}, "confidence": c},
        st.sampled_from(["days", "weeks", "months"]),
        st.integers(0, 12),
        st.sampled_from(["sure", "likely", "vague"]),
    ),
    st.builds(lambda c: {"ago": "long_ago", "confidence": c}, st.sampled_from(["sure", "likely", "vague"])),
)
QUERY_ST = st.sampled_from(
    [
        "cat",
        "garden fence",
        "budget conference",
        "violin",
        "database migration",
        "hiking",
        "",
        "Pixel the grey cat",
    ]
)
LIFT = {"sure": 3, "likely": 2, "vague": 1}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    notes=st.lists(st.tuples(st.integers(0, len(TOPICS) - 1), st.integers(1, 330)), min_size=10, max_size=40),
    cue=CUE_ST,
    query=QUERY_ST,
    limit=st.integers(1, 8),
    policy=st.sampled_from(["cued-v0.1", "cued-v0.2", "cued-v0.3", "cued-v0.4"]),
    other_project=st.booleans(),
)
async def test_a_cue_only_reorders_and_adds_at_most_l_seats(
    counted_engine: cpersona.Engine,
    arm_calls: list[str],
    notes: list[tuple[int, int]],
    cue: dict[str, Any],
    query: str,
    limit: int,
    policy: str,
    other_project: bool,
) -> None:
    agent = f"{AGENT}-{next(_runs)}"
    await _seed(counted_engine, agent, notes)
    # A neighbour in the same period who must never be seen: another agent, and (sometimes) another
    # project of the same agent.
    await counted_engine.store_batch(
        [
            {"content": f"{topic} (neighbour)", "agent_id": agent + "-other", "timestamp": _ts(40)}
            for topic in TOPICS
        ]
    )
    if other_project:
        await counted_engine.store_batch(
            [
                {"content": f"{t} (project)", "agent_id": agent, "project_id": "p2", "timestamp": _ts(40)}
                for t in TOPICS
            ]
        )
    plain = await counted_engine.recall(
        query, agent_id=agent, project_id="p1", limit=limit, policy=policy, trace=True
    )
    calls = arm_calls
    calls.clear()
    cued = await counted_engine.recall(
        query, agent_id=agent, project_id="p1", limit=limit, policy=policy, trace=True, time_cue=cue
    )
    # A revision re-runs the cue arm only: every ordinary arm ran once at most.
    assert all(calls.count(arm) == 1 for arm in set(calls) - {"cue"})
    assert calls.count("cue") <= 2
    assert plain.trace is not None
    assert cued.trace is not None

    tc = cued.model_dump(mode="json")["time_cue"]
    # What the examples exercised (shown by --hypothesis-show-statistics).
    event(
        f"ignored={bool(tc.get('ignored'))} moved={tc.get('moved', 0) > 0} seated={tc.get('seated', 0) > 0}"
    )
    event(f"revised={tc.get('revised')}")
    if tc.get("ignored"):
        assert _rows(cued) == _rows(plain)
        return
    # The gate admitted the same rows and the count returned the same rows.
    assert _gate_passed(trace_json(cued)) == _gate_passed(trace_json(plain))
    assert sorted(trace_json(cued)["order"]["cut_by_count"]) == sorted(
        trace_json(plain)["order"]["cut_by_count"]
    )
    before, after = _plain_rows(plain), _plain_rows(cued)
    assert sorted(map(str, after)) == sorted(map(str, before))
    # No row rises more than L places, L of the step actually searched.
    bound = LIFT[tc["confidence"]]
    for new, ref in enumerate(after):
        assert before.index(ref) - new <= bound
    # The block seats are unchanged; at most L cue seats, none a returned row, all found by the cue arm.
    assert _seat_rows(cued, "block") == _seat_rows(plain, "block")
    seats = _seat_rows(cued, "cue")
    assert len(seats) <= bound
    assert tc["seated"] == len(seats)
    assert not set(seats) & set(after)
    assert set(seats) <= {r["ref"] for r in trace_json(cued)["arms"]["cue"]}
    # Isolation is never widened: every row is the agent's, in project p1 or the global pool.
    for row in cued.rows:
        if row.kind == "profile":
            continue
        record = await counted_engine.get(row.ref, agent_id=agent)
        assert record is not None
        assert record.scope.project_id in ("", "p1")


# ------------------------------------------------------------------------------------- the edges


@pytest.mark.parametrize(
    ("text", "cue"),
    [
        (
            "2026-08-01..2026-08-31 likely",
            {"after": "2026-08-01", "before": "2026-08-31", "confidence": "likely"},
        ),
        ("..2026-08-31 sure", {"before": "2026-08-31", "confidence": "sure"}),
        ("2026-08-01.., vague", {"after": "2026-08-01", "confidence": "vague"}),
        ("2026-08-14 sure", {"after": "2026-08-14", "before": "2026-08-14", "confidence": "sure"}),
        ("3 weeks ago, likely", {"ago": {"unit": "weeks", "value": 3}, "confidence": "likely"}),
        ("1 day ago sure", {"ago": {"unit": "days", "value": 1}, "confidence": "sure"}),
        ("long ago vague", {"ago": "long_ago", "confidence": "vague"}),
        ('{"ago": "long_ago", "confidence": "vague"}', {"ago": "long_ago", "confidence": "vague"}),
    ],
)
def test_when_reads_the_cli_forms(text: str, cue: dict[str, Any]) -> None:
    assert when_to_cue(text) == cue


@pytest.mark.parametrize(
    "text", ["3 weeks ago", "sometime likely", "..  sure", "[1] sure", "yesterday-ish maybe"]
)
def test_when_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(Exception, match="--when"):
        when_to_cue(text)
