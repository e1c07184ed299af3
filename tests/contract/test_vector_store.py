"""The vector-store contract: the same assertions against every adapter.

Each contract test runs twice, on the embedded Qdrant engine (``qdrant-edge``, a fresh shard directory
per test) and on ``AsyncQdrantClient``'s in-process local mode (a fresh client per test), which stands in
for a Qdrant server. Expected results come from a numpy brute force over the same vectors and from a
filter written out here from the protocol's words, not from the adapters' own code. After the contract
come the tests that only make sense for one adapter: the edge shard's durability, locking and forced
quantisation, the remote adapter's deadlines against servers that refuse or never answer, and the
congruence of the two adapters on the same data.
"""

from __future__ import annotations

import dataclasses
import math
import socket
import sys
import uuid
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qdrant_client import AsyncQdrantClient

from cpersona.errors import InvalidSetting, VectorStoreUnavailable
from cpersona.settings import Settings
from cpersona.stores.protocols import PointKind, VectorFilter, VectorHit, VectorPoint, VectorStore
from cpersona.stores.vectors.common import TIE_EPSILON, open_tail_start, top_hits
from cpersona.stores.vectors.edge import EdgeVectorStore
from cpersona.stores.vectors.factory import open_vector_store
from cpersona.stores.vectors.remote import RemoteVectorStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from pathlib import Path

    import numpy.typing as npt

DIM = 16
TIMEOUT = 10.0
KINDS: tuple[PointKind, ...] = ("memory", "episode", "block")


class Opener(Protocol):
    """Opens a collection on the adapter under test; the fixture closes what is still open."""

    kind: str
    opened: list[VectorStore]

    async def __call__(
        self, name: str = ..., dim: int = ..., *, binary_quantized: bool = ...
    ) -> VectorStore: ...


class EdgeOpener:
    """The embedded engine: its shard in a child process (the default) or in this process (threads)."""

    kind = "edge"

    def __init__(self, data_dir: Path, *, process: bool) -> None:
        self.settings = Settings(data_dir=data_dir, qdrant_timeout_secs=TIMEOUT, qdrant_process=process)
        self.opened: list[VectorStore] = []

    async def __call__(
        self, name: str = "memories", dim: int = DIM, *, binary_quantized: bool = False
    ) -> VectorStore:
        store = await open_vector_store(self.settings, name, dim, binary_quantized=binary_quantized)
        self.opened.append(store)
        return store


class RemoteOpener:
    """Every store opened in one test shares one local-mode client, as collections of one server do."""

    kind = "remote"

    def __init__(self) -> None:
        self.client = AsyncQdrantClient(location=":memory:")
        self.opened: list[VectorStore] = []

    async def __call__(
        self, name: str = "memories", dim: int = DIM, *, binary_quantized: bool = False
    ) -> VectorStore:
        store = await RemoteVectorStore.open(
            ":memory:", name, dim, timeout_secs=TIMEOUT, binary_quantized=binary_quantized, client=self.client
        )
        self.opened.append(store)
        return store


@pytest.fixture(params=["edge", "edge-threads", "remote"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    made: EdgeOpener | RemoteOpener = (
        RemoteOpener()
        if request.param == "remote"
        else EdgeOpener(tmp_path / "data", process=request.param == "edge")
    )
    try:
        yield made
    finally:
        for store in made.opened:
            await store.aclose()
        if isinstance(made, RemoteOpener):
            await made.client.close()


@pytest.fixture
async def store(opener: Opener) -> VectorStore:
    return await opener()


# --------------------------------------------------------------------------- reference model


def new_id() -> str:
    return str(uuid.uuid4())


def unit(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    v = vector.astype(np.float64)
    return v / float(np.linalg.norm(v))


def matches(point: VectorPoint, flt: VectorFilter) -> bool:
    """The protocol's filter, read literally: every non-None field must hold; min inclusive, max exclusive."""
    return (
        point.agent_id == flt.agent_id
        and (flt.project_ids is None or point.project_id in flt.project_ids)
        and (flt.channels is None or point.channel in flt.channels)
        and (flt.kinds is None or point.kind in flt.kinds)
        and (flt.min_seq is None or point.seq >= flt.min_seq)
        and (flt.max_seq is None or point.seq < flt.max_seq)
        and (flt.min_timestamp is None or point.timestamp >= flt.min_timestamp)
        and (flt.max_timestamp is None or point.timestamp < flt.max_timestamp)
    )


def brute_force(
    points: Sequence[VectorPoint], query: npt.NDArray[np.float32], flt: VectorFilter, limit: int
) -> list[tuple[str, float]]:
    """The exact answer: cosine over the matching points, best first, ties by seq, block index, id."""
    q = unit(query)
    rows = []
    for p in points:
        if matches(p, flt):
            score = float(unit(p.vector) @ q)
            rows.append((-score, p.seq, p.block_index, p.id, score))
    rows.sort()
    return [(row[3], row[4]) for row in rows[:limit]]


def assert_same_ranking(hits: Sequence[VectorHit], expected: Sequence[tuple[str, float]]) -> None:
    assert [h.id for h in hits] == [e[0] for e in expected]
    for hit, (_, score) in zip(hits, expected, strict=True):
        assert hit.score == pytest.approx(score, abs=1e-5)


def random_points(
    rng: np.random.Generator,
    n: int,
    *,
    agents: Sequence[str] = ("agent-a",),
    projects: Sequence[str] = ("",),
    channels: Sequence[str] = ("",),
    dim: int = DIM,
) -> list[VectorPoint]:
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return [
        VectorPoint(
            id=new_id(),
            vector=vectors[i],
            kind=KINDS[int(rng.integers(len(KINDS)))],
            agent_id=agents[int(rng.integers(len(agents)))],
            project_id=projects[int(rng.integers(len(projects)))],
            channel=channels[int(rng.integers(len(channels)))],
            timestamp=float(rng.integers(0, 20)) / 2,
            seq=int(rng.integers(0, 30)),
        )
        for i in range(n)
    ]


def query_like(rng: np.random.Generator, dim: int = DIM) -> npt.NDArray[np.float32]:
    return rng.standard_normal(dim).astype(np.float32)


# --------------------------------------------------------------------------- the contract


async def test_implements_the_protocol(store: VectorStore) -> None:
    assert isinstance(store, VectorStore)
    assert store.engine_name


async def test_search_returns_exact_cosine_order(store: VectorStore) -> None:
    rng = np.random.default_rng(7)
    points = random_points(rng, 60)
    await store.upsert(points)
    flt = VectorFilter(agent_id="agent-a")
    for _ in range(5):
        query = query_like(rng)
        for limit in (1, 7, 60, 100):
            assert_same_ranking(await store.search(query, flt, limit), brute_force(points, query, flt, limit))


async def test_hits_carry_the_payload(store: VectorStore) -> None:
    parent = new_id()
    block = VectorPoint(
        id=new_id(),
        vector=np.ones(DIM, dtype=np.float32),
        kind="block",
        agent_id="a",
        project_id="p",
        channel="c",
        timestamp=12.5,
        seq=41,
        parent=parent,
        block_index=3,
    )
    record = dataclasses.replace(
        block,
        id=new_id(),
        vector=-block.vector,
        kind="memory",
        timestamp=3.0,
        seq=40,
        parent="",
        block_index=0,
    )
    await store.upsert([block, record])
    hits = await store.search(np.ones(DIM, dtype=np.float32), VectorFilter(agent_id="a"), 5)
    assert [h.id for h in hits] == [block.id, record.id]
    first, second = hits
    assert (first.kind, first.parent, first.seq, first.timestamp, first.block_index) == (
        "block",
        parent,
        41,
        12.5,
        3,
    )
    assert first.score == pytest.approx(1.0, abs=1e-6)
    # A record is its own parent.
    assert (second.kind, second.parent, second.seq, second.timestamp, second.block_index) == (
        "memory",
        record.id,
        40,
        3.0,
        0,
    )
    assert second.score == pytest.approx(-1.0, abs=1e-6)


FILTER_CASES: list[tuple[str, VectorFilter]] = [
    ("agent", VectorFilter(agent_id="agent-a")),
    ("other-agent", VectorFilter(agent_id="agent-b")),
    ("unknown-agent", VectorFilter(agent_id="nobody")),
    ("global-project-only", VectorFilter(agent_id="agent-a", project_ids=("",))),
    ("project-and-global", VectorFilter(agent_id="agent-a", project_ids=("p1", ""))),
    ("no-project", VectorFilter(agent_id="agent-a", project_ids=())),
    ("channel", VectorFilter(agent_id="agent-a", channels=("c2",))),
    ("project-channel", VectorFilter(agent_id="agent-a", project_ids=("p2",), channels=("", "c1"))),
    ("kind", VectorFilter(agent_id="agent-a", kinds=("episode",))),
    ("kinds", VectorFilter(agent_id="agent-a", kinds=("memory", "block"))),
    ("min-seq", VectorFilter(agent_id="agent-a", min_seq=10)),
    ("max-seq", VectorFilter(agent_id="agent-a", max_seq=10)),
    ("one-seq", VectorFilter(agent_id="agent-a", min_seq=5, max_seq=6)),
    ("empty-seq-range", VectorFilter(agent_id="agent-a", min_seq=6, max_seq=6)),
    ("timestamps", VectorFilter(agent_id="agent-a", min_timestamp=2.5, max_timestamp=7.0)),
    ("one-timestamp", VectorFilter(agent_id="agent-a", min_timestamp=3.0, max_timestamp=3.5)),
    (
        "everything",
        VectorFilter(
            agent_id="agent-a",
            project_ids=("", "p1"),
            channels=("c1", "c2"),
            kinds=("memory",),
            min_seq=3,
            max_seq=25,
            min_timestamp=1.0,
            max_timestamp=8.5,
        ),
    ),
]


async def test_filters_match_exactly(store: VectorStore) -> None:
    rng = np.random.default_rng(11)
    points = random_points(
        rng, 150, agents=("agent-a", "agent-b"), projects=("", "p1", "p2"), channels=("", "c1", "c2")
    )
    await store.upsert(points)
    by_id = {p.id: p for p in points}
    query = query_like(rng)
    for case, flt in FILTER_CASES:
        expected_count = sum(matches(p, flt) for p in points)
        assert await store.count(flt) == expected_count, case
        hits = await store.search(query, flt, 200)
        assert all(matches(by_id[h.id], flt) for h in hits), case
        assert len(hits) == expected_count, case
        assert_same_ranking(hits, brute_force(points, query, flt, 200))
        assert_same_ranking(await store.search(query, flt, 5), brute_force(points, query, flt, 5))


# Vectors for the property test: twelve directions in one plane whose cosines to the query (the plane's
# first axis, or its opposite) are all distinct and far apart, turned by a random rotation so that the
# engines see ordinary-looking vectors. Points that share a direction share the exact same vector, so
# their scores tie exactly and only the seq rule orders them.
PROPERTY_DIM = 8
ANGLES = [k * math.pi / 12 for k in range(12)]
PROJECTS = ("", "p1", "p2")
CHANNELS = ("", "c1", "c2")


class PointSpec(TypedDict):
    """One drawn point: which direction, whose (``mine``: the searched agent's) and its payload."""

    mine: bool
    direction: int
    project: str
    channel: str
    kind: PointKind
    seq: int
    timestamp: float
    block_index: int


class FilterSpec(TypedDict):
    """One drawn filter: the fields of :class:`VectorFilter` besides its agent."""

    project_ids: tuple[str, ...] | None
    channels: tuple[str, ...] | None
    kinds: tuple[PointKind, ...] | None
    min_seq: int | None
    max_seq: int | None
    min_timestamp: float | None
    max_timestamp: float | None


T = TypeVar("T")

point_specs = st.fixed_dictionaries(
    {
        "mine": st.booleans(),
        "direction": st.integers(0, len(ANGLES) - 1),
        "project": st.sampled_from(PROJECTS),
        "channel": st.sampled_from(CHANNELS),
        "kind": st.sampled_from(KINDS),
        "seq": st.integers(0, 12),
        "timestamp": st.integers(0, 12).map(lambda half: half / 2),
        "block_index": st.integers(0, 2),
    }
)


def optional_subset(values: Sequence[T]) -> st.SearchStrategy[tuple[T, ...] | None]:
    return st.none() | st.lists(st.sampled_from(values), unique=True, max_size=len(values)).map(tuple)


filter_specs = st.fixed_dictionaries(
    {
        "project_ids": optional_subset(PROJECTS),
        "channels": optional_subset(CHANNELS),
        "kinds": optional_subset(KINDS),
        "min_seq": st.none() | st.integers(0, 12),
        "max_seq": st.none() | st.integers(0, 13),
        "min_timestamp": st.none() | st.integers(0, 12).map(lambda half: half / 2),
        "max_timestamp": st.none() | st.integers(0, 13).map(lambda half: half / 2),
    }
)


def rotation(seed: int) -> npt.NDArray[np.float64]:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((PROPERTY_DIM, PROPERTY_DIM)))
    return q * np.sign(np.diag(r))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    specs=st.lists(point_specs, max_size=25),
    filter_spec=filter_specs,
    limit=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
    opposite=st.booleans(),
)
async def test_filtered_search_property(
    opener: Opener,
    specs: list[PointSpec],
    filter_spec: FilterSpec,
    limit: int,
    seed: int,
    opposite: bool,
) -> None:
    # One collection serves every example (opened on the first). Each example writes under two fresh
    # agent ids, one searched and one a decoy that must never match, and removes its points at the end
    # so that the collection does not grow with the number of examples.
    store = opener.opened[0] if opener.opened else await opener("prop", PROPERTY_DIM)
    turn = rotation(seed)
    plane = [np.array([math.cos(a), math.sin(a)] + [0.0] * (PROPERTY_DIM - 2)) for a in ANGLES]
    directions = [(turn @ v).astype(np.float32) for v in plane]
    agent, other = new_id(), new_id()
    points = [
        VectorPoint(
            id=new_id(),
            vector=directions[spec["direction"]],
            kind=spec["kind"],
            agent_id=agent if spec["mine"] else other,
            project_id=spec["project"],
            channel=spec["channel"],
            timestamp=spec["timestamp"],
            seq=spec["seq"],
            block_index=spec["block_index"],
        )
        for spec in specs
    ]
    await store.upsert(points)
    try:
        flt = VectorFilter(agent_id=agent, **filter_spec)
        query = ((-1.0 if opposite else 1.0) * (turn @ plane[0])).astype(np.float32)
        hits = await store.search(query, flt, limit)
        by_id = {p.id: p for p in points}
        assert all(h.id in by_id and matches(by_id[h.id], flt) for h in hits)
        assert_same_ranking(hits, brute_force(points, query, flt, limit))
        assert await store.count(flt) == sum(matches(p, flt) for p in points)
    finally:
        await store.delete([p.id for p in points])
    assert await store.count(VectorFilter(agent_id=agent)) == 0


async def test_ties_break_by_lower_seq(store: VectorStore) -> None:
    base = np.zeros(DIM, dtype=np.float32)
    base[0] = 1.0
    tilted = base.copy()
    tilted[1] = 0.1
    worse = base.copy()
    worse[1] = 0.5
    # Seven points share one vector; the limit cuts through them, whatever order they were written in.
    seqs = [9, 4, 13, 1, 7, 2, 11]
    template = VectorPoint(
        id=new_id(),
        vector=base,
        kind="memory",
        agent_id="a",
        project_id="",
        channel="",
        timestamp=0.0,
        seq=99,
    )
    tied = [dataclasses.replace(template, id=new_id(), vector=tilted.copy(), seq=s) for s in seqs]
    best = template
    worst = dataclasses.replace(template, id=new_id(), vector=worse, seq=0)
    for point in [*tied, best, worst]:
        await store.upsert([point])
    hits = await store.search(base, VectorFilter(agent_id="a"), 4)
    assert hits[0].id == best.id
    assert [h.seq for h in hits[1:]] == [1, 2, 4]
    assert len({h.score for h in hits[1:]}) == 1
    everything = await store.search(base, VectorFilter(agent_id="a"), 20)
    assert [h.seq for h in everything] == [99, *sorted(seqs), 0]
    # Equal seq too: blocks of one record order by block index.
    parent = new_id()
    blocks = [
        dataclasses.replace(
            template,
            id=new_id(),
            vector=worse * 3,
            kind="block",
            agent_id="b",
            seq=5,
            parent=parent,
            block_index=i,
        )
        for i in (2, 0, 1)
    ]
    await store.upsert(blocks)
    assert [h.block_index for h in await store.search(base, VectorFilter(agent_id="b"), 2)] == [0, 1]


async def test_ties_hold_among_thousands_of_points(store: VectorStore) -> None:
    # Identical vectors do not always get bit-identical scores: the local mode scores the candidates with
    # one BLAS matrix-vector product, which (as observed here) rounds the last 3003 % 4 rows differently
    # from the others. So ties must be recognised within float noise, not by exact equality.
    rng = np.random.default_rng(29)
    twin = query_like(rng)
    points = random_points(rng, 3003)
    points = [
        dataclasses.replace(p, vector=twin.copy(), seq=3003 - i) if i % 7 == 0 or i > 2990 else p
        for i, p in enumerate(points)
    ]
    await store.upsert(points)
    flt = VectorFilter(agent_id="agent-a")
    for query in (twin, -twin, query_like(rng)):
        hits = await store.search(query, flt, 6)
        assert [h.id for h in hits] == [e[0] for e in brute_force(points, query, flt, 6)]


async def test_an_open_tail_differs_from_the_complete_answer_only_in_its_last_tied_run(
    store: VectorStore,
) -> None:
    rng = np.random.default_rng(31)
    twin = query_like(rng)
    # 40 exact copies of one vector, written in shuffled seq order, so a limit inside them cuts a tie.
    points = random_points(rng, 300)
    points = [
        dataclasses.replace(p, vector=twin.copy(), seq=1000 + (i * 17) % 40) if i < 40 else p
        for i, p in enumerate(points)
    ]
    await store.upsert(points)
    flt = VectorFilter(agent_id="agent-a")
    for limit in (1, 10, 39, 40, 41, 60):
        complete = await store.search(twin, flt, limit)
        opened = await store.search(twin, flt, limit, open_tail=True)
        assert len(opened) == len(complete) == min(limit, 300)
        tail = open_tail_start(complete)
        assert [h.id for h in opened[:tail]] == [h.id for h in complete[:tail]]
        # The open run holds points of the same score, in protocol order among themselves.
        assert all(abs(h.score - complete[tail].score) <= 2 * TIE_EPSILON for h in opened[tail:])
        assert [(h.seq, h.block_index, h.id) for h in opened[tail:]] == sorted(
            (h.seq, h.block_index, h.id) for h in opened[tail:]
        )
    # Without a tie at the cut both answers are the same (the copies score lowest of all here; the local
    # mode's scores differ in float noise between calls of different sizes).
    opened = await store.search(-twin, flt, 25, open_tail=True)
    complete = await store.search(-twin, flt, 25)
    assert [h.id for h in opened] == [h.id for h in complete]
    assert all(abs(a.score - b.score) <= TIE_EPSILON for a, b in zip(opened, complete, strict=True))


async def test_an_open_tail_is_one_fetch_of_the_limit() -> None:
    # Ten points tie; a complete answer of 4 must look past them (fetching 5, then 10, then 20), an open
    # one stops after its first window.
    hits = [VectorHit(new_id(), 0.5, "memory", "", seq, 0.0) for seq in range(10, 0, -1)]
    asked: list[int] = []

    async def fetch(n: int) -> list[VectorHit]:
        asked.append(n)
        return hits[:n]

    opened = await top_hits(fetch, 4, open_tail=True)
    assert asked == [5]
    assert [h.seq for h in opened] == [6, 7, 8, 9]
    asked.clear()
    complete = await top_hits(fetch, 4)
    assert asked == [5, 10, 20]
    assert [h.seq for h in complete] == [1, 2, 3, 4]
    assert open_tail_start(complete) == 0
    assert open_tail_start([]) == 0


async def test_upsert_replaces(store: VectorStore) -> None:
    pid = new_id()
    v1 = np.zeros(DIM, dtype=np.float32)
    v1[0] = 1.0
    v2 = np.zeros(DIM, dtype=np.float32)
    v2[1] = 1.0
    first = VectorPoint(
        id=pid, vector=v1, kind="memory", agent_id="a", project_id="p1", channel="", timestamp=1.0, seq=1
    )
    second = VectorPoint(
        id=pid, vector=v2, kind="episode", agent_id="a", project_id="p2", channel="", timestamp=2.0, seq=2
    )
    await store.upsert([first])
    await store.upsert([second])
    assert await store.count(VectorFilter(agent_id="a")) == 1
    assert await store.count(VectorFilter(agent_id="a", project_ids=("p1",))) == 0
    (hit,) = await store.search(v2, VectorFilter(agent_id="a"), 5)
    assert (hit.id, hit.kind, hit.seq, hit.timestamp) == (pid, "episode", 2, 2.0)
    assert hit.score == pytest.approx(1.0, abs=1e-6)
    # Within one batch the later point wins, as if written one after the other.
    await store.upsert([first, second, first])
    (hit,) = await store.search(v1, VectorFilter(agent_id="a"), 5)
    assert (hit.kind, hit.seq) == ("memory", 1)
    assert hit.score == pytest.approx(1.0, abs=1e-6)


async def test_delete_and_delete_where(store: VectorStore) -> None:
    rng = np.random.default_rng(3)
    points = random_points(rng, 80, agents=("agent-a", "agent-b"), projects=("", "p1"), channels=("", "c1"))
    await store.upsert(points)
    gone = [p.id for p in points[:10]]
    await store.delete([*gone, new_id()])  # an unknown id is ignored
    await store.delete([])
    assert await store.existing(gone) == set()
    remaining = points[10:]
    where = VectorFilter(agent_id="agent-a", project_ids=("p1",), min_seq=5, max_seq=20)
    await store.delete_where(where)
    remaining = [p for p in remaining if not matches(p, where)]
    assert await store.count(where) == 0
    for agent in ("agent-a", "agent-b"):
        flt = VectorFilter(agent_id=agent)
        assert await store.count(flt) == sum(matches(p, flt) for p in remaining)
    assert await store.existing([p.id for p in points]) == {p.id for p in remaining}
    await store.delete_where(VectorFilter(agent_id="agent-a", kinds=()))  # matches nothing
    assert await store.count(VectorFilter(agent_id="agent-a")) == sum(
        p.agent_id == "agent-a" for p in remaining
    )
    query = query_like(rng)
    flt = VectorFilter(agent_id="agent-a")
    assert_same_ranking(await store.search(query, flt, 50), brute_force(remaining, query, flt, 50))


async def test_existing_and_count(store: VectorStore) -> None:
    rng = np.random.default_rng(5)
    points = random_points(rng, 30)
    await store.upsert(points)
    unknown = [new_id() for _ in range(3)]
    assert await store.existing([]) == set()
    assert await store.existing([p.id for p in points[:5]] + unknown) == {p.id for p in points[:5]}
    # Ids come back canonical (lowercase) whatever case they were asked in.
    assert await store.existing([points[0].id.upper()]) == {points[0].id}
    assert await store.count(VectorFilter(agent_id="agent-a")) == 30
    assert await store.count(VectorFilter(agent_id="agent-a", kinds=())) == 0
    assert await store.count(VectorFilter(agent_id="agent-z")) == 0


async def test_vectors_are_read_back_by_id_at_unit_length(store: VectorStore) -> None:
    rng = np.random.default_rng(9)
    points = random_points(rng, 40)
    await store.upsert(points)
    unknown = [new_id() for _ in range(3)]
    assert await store.vectors([]) == {}
    asked = [p.id for p in points[:25]] + unknown + [points[0].id.upper()]
    found = await store.vectors(asked)
    # Unknown ids are left out; an id asked in another case comes back canonical, once.
    assert set(found) == {p.id for p in points[:25]}
    for point in points[:25]:
        got = found[point.id]
        assert got.dtype == np.float32
        assert got.shape == (DIM,)
        # A cosine collection keeps the direction, at unit length.
        np.testing.assert_allclose(got, unit(point.vector), atol=1e-6)
    # A replaced point reads back as its latest vector.
    moved = dataclasses.replace(points[0], vector=points[1].vector)
    await store.upsert([moved])
    np.testing.assert_allclose((await store.vectors([moved.id]))[moved.id], unit(points[1].vector), atol=1e-6)
    await store.delete([moved.id])
    assert await store.vectors([moved.id]) == {}


async def test_empty_collection_and_limits(store: VectorStore) -> None:
    query = query_like(np.random.default_rng(1))
    assert await store.search(query, VectorFilter(agent_id="a"), 10) == []
    assert await store.count(VectorFilter(agent_id="a")) == 0
    await store.upsert(random_points(np.random.default_rng(2), 5, agents=("a",)))
    assert await store.search(query, VectorFilter(agent_id="a"), 0) == []
    assert len(await store.search(query, VectorFilter(agent_id="a"), 10)) == 5
    await store.upsert([])


async def test_bad_input_is_refused_before_the_backend(store: VectorStore) -> None:
    good = random_points(np.random.default_rng(4), 1, agents=("a",))[0]
    flt = VectorFilter(agent_id="a")
    with pytest.raises(ValueError, match="shape"):
        await store.search(np.ones(DIM + 1, dtype=np.float32), flt, 3)
    with pytest.raises(ValueError, match="zeros"):
        await store.search(np.zeros(DIM, dtype=np.float32), flt, 3)
    with pytest.raises(ValueError, match="NaN"):
        await store.search(np.full(DIM, np.nan, dtype=np.float32), flt, 3)
    with pytest.raises(ValueError, match="limit"):
        await store.search(np.ones(DIM, dtype=np.float32), flt, -1)
    bad_vector = dataclasses.replace(good, vector=np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="shape"):
        await store.upsert([good, bad_vector])
    with pytest.raises(ValueError, match="UUID"):
        await store.upsert([dataclasses.replace(good, id="mem:1")])
    with pytest.raises(ValueError, match="UUID"):
        await store.existing(["not-a-uuid"])
    # Nothing of the refused batch was written.
    assert await store.count(flt) == 0


async def test_dimension_mismatch_is_refused(opener: Opener) -> None:
    first = await opener("memories", 8)
    await first.upsert(random_points(np.random.default_rng(0), 3, dim=8))
    await first.aclose()
    with pytest.raises(VectorStoreUnavailable, match="different vector configuration") as caught:
        await opener("memories", 12)
    assert "12-d" in str(caught.value)
    # The existing collection is untouched and still opens with its own dimension.
    again = await opener("memories", 8)
    assert await again.count(VectorFilter(agent_id="agent-a")) == 3


async def test_bad_collection_names_are_refused(opener: Opener) -> None:
    for name in ("", "..", "a/b", "-x", "x" * 129):
        with pytest.raises(ValueError, match="collection name"):
            await opener(name)
    with pytest.raises(ValueError, match="dimension"):
        await opener("ok", 0)


async def test_persistence_across_close_and_reopen(opener: Opener) -> None:
    if opener.kind == "remote":
        pytest.skip(
            "the in-memory local mode keeps nothing once its client closes, and reopening on the same live "
            "client would prove nothing about durability; a real server's durability is its own"
        )
    rng = np.random.default_rng(9)
    points = random_points(rng, 40)
    store = await opener()
    await store.upsert(points)
    await store.delete([points[0].id])
    await store.aclose()
    reopened = await opener()
    flt = VectorFilter(agent_id="agent-a")
    assert await reopened.count(flt) == 39
    query = query_like(rng)
    assert_same_ranking(await reopened.search(query, flt, 10), brute_force(points[1:], query, flt, 10))


async def test_closed_store_refuses_calls(opener: Opener) -> None:
    store = await opener()
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(VectorStoreUnavailable, match="closed"):
        await store.count(VectorFilter(agent_id="a"))
    with pytest.raises(VectorStoreUnavailable, match="closed"):
        await store.upsert(random_points(np.random.default_rng(0), 1))


async def test_cancellation_is_not_swallowed(store: VectorStore) -> None:
    await store.upsert(random_points(np.random.default_rng(0), 10))
    with anyio.move_on_after(0) as scope:
        await store.search(query_like(np.random.default_rng(1)), VectorFilter(agent_id="agent-a"), 5)
    assert scope.cancelled_caught
    # The store is still usable afterwards.
    assert await store.count(VectorFilter(agent_id="agent-a")) == 10


async def test_concurrent_reads_and_writes(store: VectorStore) -> None:
    rng = np.random.default_rng(21)
    batches = [random_points(rng, 20, agents=(f"agent-{i}",)) for i in range(6)]
    queries = [query_like(rng) for _ in range(6)]
    async with anyio.create_task_group() as tg:
        for batch in batches:
            tg.start_soon(store.upsert, batch)
        for query in queries:
            tg.start_soon(store.search, query, VectorFilter(agent_id="agent-0"), 5)
    for i, batch in enumerate(batches):
        flt = VectorFilter(agent_id=f"agent-{i}")
        assert await store.count(flt) == 20
        assert_same_ranking(await store.search(queries[i], flt, 8), brute_force(batch, queries[i], flt, 8))


async def test_binary_quantized_search_rescores_to_the_exact_answer(opener: Opener) -> None:
    rng = np.random.default_rng(13)
    store = await opener("blocks", 32, binary_quantized=True)
    points = random_points(rng, 40, dim=32, projects=("", "p1"))
    await store.upsert(points)
    for flt in (VectorFilter(agent_id="agent-a"), VectorFilter(agent_id="agent-a", project_ids=("p1",))):
        for _ in range(4):
            query = query_like(rng, 32)
            assert_same_ranking(await store.search(query, flt, 10), brute_force(points, query, flt, 10))


# --------------------------------------------------------------------------- factory


async def test_factory_picks_the_adapter(tmp_path: Path) -> None:
    edge = await open_vector_store(Settings(data_dir=tmp_path), "memories", DIM)
    try:
        assert isinstance(edge, EdgeVectorStore)
        assert edge.engine_name.startswith("qdrant-edge ")
        assert (tmp_path / "qdrant" / "memories").is_dir()
    finally:
        await edge.aclose()
    remote = await open_vector_store(Settings(data_dir=tmp_path, qdrant_url=":memory:"), "memories", DIM)
    try:
        assert isinstance(remote, RemoteVectorStore)
    finally:
        await remote.aclose()
    with pytest.raises(InvalidSetting, match="CPERSONA_QDRANT_URL"):
        await open_vector_store(Settings(data_dir=tmp_path, qdrant_url="qdrant:6333"), "memories", DIM)


# --------------------------------------------------------------------------- edge only


CRASHING_WRITER = """
import os, sys
from pathlib import Path

import anyio
import numpy as np

from cpersona.stores.protocols import VectorPoint
from cpersona.stores.vectors.edge import EdgeVectorStore


async def main() -> None:
    store = await EdgeVectorStore.open(Path(sys.argv[1]), "memories", 4)
    point = VectorPoint(
        id=sys.argv[2], vector=np.ones(4, dtype=np.float32), kind="memory", agent_id="a", project_id="",
        channel="", timestamp=1.0, seq=1,
    )
    await store.upsert([point])
    os._exit(0)  # die without closing the store: only what upsert made durable survives


anyio.run(main)
"""


async def test_edge_upsert_survives_a_crash_of_the_writer(tmp_path: Path) -> None:
    pid = new_id()
    await anyio.run_process([sys.executable, "-c", CRASHING_WRITER, str(tmp_path), pid], check=True)
    async with await EdgeVectorStore.open(tmp_path, "memories", 4) as store:
        assert await store.existing([pid]) == {pid}


async def test_edge_second_open_is_refused_while_the_first_holds_the_shard(tmp_path: Path) -> None:
    first = await EdgeVectorStore.open(tmp_path, "memories", DIM)
    try:
        with pytest.raises(VectorStoreUnavailable, match="already open"):
            await EdgeVectorStore.open(tmp_path, "memories", DIM)
    finally:
        await first.aclose()
    second = await EdgeVectorStore.open(tmp_path, "memories", DIM)
    await second.aclose()


async def test_edge_reopen_with_quantisation_keeps_the_data(tmp_path: Path) -> None:
    rng = np.random.default_rng(17)
    points = random_points(rng, 20)
    async with await EdgeVectorStore.open(tmp_path, "blocks", DIM) as plain:
        await plain.upsert(points)
    async with await EdgeVectorStore.open(tmp_path, "blocks", DIM, binary_quantized=True) as quantized:
        flt = VectorFilter(agent_id="agent-a")
        query = query_like(rng)
        assert_same_ranking(await quantized.search(query, flt, 5), brute_force(points, query, flt, 5))


async def test_edge_quantised_index_after_optimize_still_rescores(tmp_path: Path) -> None:
    # A tiny indexing threshold makes optimize() build the indexed segment with its 1-bit copy, so the
    # search really runs on quantised vectors; the scores must still be the exact cosines.
    rng = np.random.default_rng(19)
    points = random_points(rng, 40, dim=64)
    async with await EdgeVectorStore.open(
        tmp_path, "blocks", 64, binary_quantized=True, indexing_threshold_kb=1
    ) as store:
        await store.upsert(points)
        assert await store.optimize() is True
        flt = VectorFilter(agent_id="agent-a")
        for _ in range(4):
            query = query_like(rng, 64)
            # limit x oversampling covers the whole set, so rescoring sees every candidate.
            assert_same_ranking(await store.search(query, flt, 10), brute_force(points, query, flt, 10))
            # A smaller limit takes fewer 1-bit candidates, but each hit still carries its exact cosine.
            exact = dict(brute_force(points, query, flt, len(points)))
            for hit in await store.search(query, flt, 3):
                assert hit.score == pytest.approx(exact[hit.id], abs=1e-5)


# --------------------------------------------------------------------------- remote only


_HANG_GUARD_SECS = 30.0


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_remote_refused_connection_is_unavailable_within_the_deadline(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    # The outer bound only turns a hang into a failure; the error itself must come from the adapter.
    with anyio.fail_after(_HANG_GUARD_SECS), pytest.raises(VectorStoreUnavailable, match=r"127\.0\.0\.1"):
        await open_vector_store(
            Settings(data_dir=tmp_path, qdrant_url=url, qdrant_timeout_secs=0.5), "memories", DIM
        )


async def test_remote_silent_server_is_unavailable_within_the_deadline(tmp_path: Path) -> None:
    # A socket that listens but never accepts: the TCP handshake completes, no answer ever comes.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        # The error names the 0.5 s deadline and is caused by its timeout: the adapter's deadline fired,
        # not the outer guard (which only turns a hang into a failure).
        with (
            anyio.fail_after(_HANG_GUARD_SECS),
            pytest.raises(VectorStoreUnavailable, match=r"within 0\.5s") as caught,
        ):
            await open_vector_store(
                Settings(data_dir=tmp_path, qdrant_url=url, qdrant_timeout_secs=0.5), "memories", DIM
            )
    assert isinstance(caught.value.__cause__, TimeoutError)


async def test_remote_credentials_stay_out_of_labels() -> None:
    store = await RemoteVectorStore.open(":memory:", "memories", DIM)
    await store.aclose()
    url = f"http://user:secret@127.0.0.1:{closed_port()}"
    with pytest.raises(VectorStoreUnavailable) as caught:
        await RemoteVectorStore.open(url, "memories", DIM, timeout_secs=0.5)
    assert "secret" not in str(caught.value)


# --------------------------------------------------------------------------- congruence


async def test_adapters_agree_on_the_same_data(tmp_path: Path) -> None:
    rng = np.random.default_rng(23)
    points = random_points(
        rng, 200, agents=("agent-a", "agent-b"), projects=("", "p1", "p2"), channels=("", "c1")
    )
    # Exact duplicates, so that the tie rule is part of what must agree.
    twins = [dataclasses.replace(p, id=new_id(), seq=p.seq + 100 + i) for i, p in enumerate(points[:20])]
    data = points + twins
    filters = [
        VectorFilter(agent_id="agent-a"),
        VectorFilter(agent_id="agent-b", project_ids=("", "p2")),
        VectorFilter(agent_id="agent-a", channels=("c1",), kinds=("memory", "episode")),
        VectorFilter(agent_id="agent-a", min_seq=4, max_seq=120, min_timestamp=1.5, max_timestamp=9.0),
    ]
    queries = [query_like(rng) for _ in range(4)] + [p.vector for p in points[:3]]
    edge = await EdgeVectorStore.open(tmp_path, "memories", DIM)
    remote = await RemoteVectorStore.open(":memory:", "memories", DIM)
    try:
        await edge.upsert(data)
        await remote.upsert(data)
        for flt in filters:
            assert await edge.count(flt) == await remote.count(flt)
            for query in queries:
                for limit in (1, 10, 40):
                    from_edge = await edge.search(query, flt, limit)
                    from_remote = await remote.search(query, flt, limit)
                    assert [h.id for h in from_edge] == [h.id for h in from_remote]
                    for a, b in zip(from_edge, from_remote, strict=True):
                        assert a.score == pytest.approx(b.score, abs=1e-5)
                        assert (a.kind, a.parent, a.seq, a.timestamp, a.block_index) == (
                            b.kind,
                            b.parent,
                            b.seq,
                            b.timestamp,
                            b.block_index,
                        )
                    assert_same_ranking(from_edge, brute_force(data, query, flt, limit))
        ids = [p.id for p in data]
        from_edge_vectors, from_remote_vectors = await edge.vectors(ids), await remote.vectors(ids)
        assert set(from_edge_vectors) == set(from_remote_vectors) == set(ids)
        for pid in ids:
            np.testing.assert_allclose(from_edge_vectors[pid], from_remote_vectors[pid], atol=1e-6)
    finally:
        await edge.aclose()
        await remote.aclose()
