"""Export and import: JSON Lines with a header, one record per line and a checksummed footer; export →
import into a fresh agent in a fresh store → export is byte-identical; a damaged archive writes nothing."""

from __future__ import annotations

import base64
import hashlib
import itertools
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona.model.records import MemoryRecord
from cpersona.model.scope import ReadScope

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from contextlib import AbstractAsyncContextManager

_COUNTER = itertools.count()

WORDS = st.text(alphabet="abcdefghij ", min_size=1, max_size=30).map(str.strip).filter(bool)
MEMORY = st.fixed_dictionaries(
    {
        "content": WORDS,
        "store": st.sampled_from(["episodic", "semantic", "procedural", "emotional"]),
        "project_id": st.sampled_from(["", "p"]),
        "channel": st.sampled_from(["", "c"]),
        "emotion": st.sampled_from([None, "joy", "fear"]),
        "metadata": st.one_of(
            st.none(), st.dictionaries(st.sampled_from("xyz"), st.integers(-5, 5), max_size=2)
        ),
        "timestamp": st.one_of(st.none(), st.floats(0, 4e9)),
        "linked": st.booleans(),
    }
)
EPISODE = st.fixed_dictionaries({"summary": WORDS, "keywords": st.lists(st.sampled_from("klm"), max_size=2)})
# A declaration in one scope: entities with aliases, an entity relation, and (by index into the memories
# that scope may read) a mention and a record relation.
DECLARATION = st.fixed_dictionaries(
    {
        "project_id": st.sampled_from(["", "p"]),
        "channel": st.sampled_from(["", "c"]),
        "entities": st.lists(
            st.tuples(st.sampled_from(["Ada", "Lisbon", "ops team", "Ünïcode"]), st.lists(WORDS, max_size=2)),
            min_size=1,
            max_size=3,
        ),
        "relation": st.one_of(
            st.none(), st.tuples(st.sampled_from(["Ada", "Porto"]), WORDS, st.just("Lisbon"))
        ),
        "anchor": st.one_of(st.none(), st.integers(0, 5)),
        "linked": st.one_of(st.none(), st.tuples(st.integers(0, 5), st.integers(0, 5), WORDS)),
    }
)


@pytest.fixture(scope="module")
async def source(
    open_test_engine: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("ax", embedding_mode="none") as memory:
        yield memory


@pytest.fixture(scope="module")
async def target(
    open_test_engine: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("ay", embedding_mode="none") as memory:
        yield memory


def _archive(header: bytes, body: list[bytes]) -> bytes:
    from cpersona.operations.lifecycle.archive import footer_line

    digest = hashlib.sha256(header + b"".join(body)).hexdigest()
    return header + b"".join(body) + footer_line(len(body), digest)


async def _populate(
    engine: cpersona.Engine,
    agent: str,
    memories: list[dict[str, Any]],
    episodes: list[dict[str, Any]],
    raw: int,
    profile: str | None,
    declarations: Sequence[dict[str, Any]] = (),
) -> None:
    previous: str | None = None
    refs: list[tuple[str, str, str]] = []
    for n, m in enumerate(memories):
        spec = {k: v for k, v in m.items() if k != "linked" and v is not None}
        spec["content"] = f"{spec['content']} {n}"  # distinct, so none is skipped as a duplicate
        if m["linked"] and previous is not None:
            spec["associations"] = [{"target_id": previous, "association_type": "causal", "weight": 0.25}]
        stored = await engine.store(agent_id=agent, **spec)
        previous = stored.id
        refs.append((stored.ref, spec.get("project_id", ""), spec.get("channel", "")))
    for e in episodes:
        await engine.archive_episode(e["summary"], agent_id=agent, keywords=e["keywords"])
    for n in range(raw):
        await engine.store_raw(
            f"user: line {n}",
            agent_id=agent,
            session_id="s",
            source="conversation",
            speaker="user",
            visibility="normal",
            secrecy_level="public",
            turn_id=str(n),
        )
    if profile is not None:
        await engine.update_profile(agent, profile)
    for d in declarations:
        await _declare(engine, agent, d, refs)


async def _declare(
    engine: cpersona.Engine, agent: str, d: dict[str, Any], refs: list[tuple[str, str, str]]
) -> None:
    p, c = d["project_id"], d["channel"]
    readable = [ref for ref, rp, rc in refs if rp in (p, "") and rc in (c, "")]
    body: dict[str, Any] = {
        "entities": [{"name": name, "aliases": aliases} for name, aliases in d["entities"]]
    }
    relations = []
    if d["relation"] is not None:
        subject, predicate, obj = d["relation"]
        relations.append({"subject": subject, "predicate": predicate, "object": obj})
    if d["linked"] is not None and readable:
        s, o, predicate = d["linked"]
        relations.append(
            {
                "subject": readable[s % len(readable)],
                "predicate": predicate,
                "object": readable[o % len(readable)],
            }
        )
    anchor = readable[d["anchor"] % len(readable)] if d["anchor"] is not None and readable else None
    await engine.declare_associations(agent, body, anchor_ref=anchor, project_id=p, channel=c)
    if relations:
        await engine.declare_associations(agent, {"relations": relations}, project_id=p, channel=c)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(MEMORY, max_size=6),
    st.lists(EPISODE, max_size=2),
    st.integers(0, 3),
    st.one_of(st.none(), WORDS),
    st.lists(DECLARATION, max_size=3),
)
async def test_export_import_export_is_byte_identical(
    source: cpersona.Engine,
    target: cpersona.Engine,
    memories: list[dict[str, Any]],
    episodes: list[dict[str, Any]],
    raw: int,
    profile: str | None,
    declarations: list[dict[str, Any]],
) -> None:
    n = next(_COUNTER)
    await _populate(source, f"from{n}", memories, episodes, raw, profile, declarations)
    first = await source.export(f"from{n}", include_raw_journal=True)
    # The associative layer travels too: one line per scope declared in, holding what was declared there.
    lines = [orjson.loads(line) for line in first.archive_data.splitlines()]
    graphs = [line["data"] for line in lines if line["kind"] == "associations"]
    assert sorted((g["project_id"], g["channel"]) for g in graphs) == sorted(
        {(d["project_id"], d["channel"]) for d in declarations}
    )
    # Mentions name the declared anchors, which exist in the archive; the graph reads the same after.
    held = {line["data"]["id"] for line in lines if line["kind"] == "memory"}
    assert {ref.removeprefix("mem:") for g in graphs for _, ref in g["mentions"]} <= held
    imported = await target.import_archive(f"to{n}", first.archive_data)
    assert imported.records_imported == first.record_count
    again = await target.export(f"to{n}", include_raw_journal=True)
    assert again.archive_data == first.archive_data
    assert (again.checksum, again.archive_id) == (first.checksum, first.archive_id)
    streamed = b"".join([line async for line in source.export_lines(f"from{n}", include_raw_journal=True)])
    assert streamed == first.archive_data


async def test_the_archive_is_header_records_and_a_checksummed_footer(source: cpersona.Engine) -> None:
    await source.store("a semantic fact", agent_id="shape", store="semantic")
    await source.store("an episode of sorts", agent_id="shape")
    await source.update_profile("shape", "Terse.")
    result = await source.export("shape", stores=["semantic"])
    lines = result.archive_data.splitlines(keepends=True)
    kinds = [orjson.loads(line)["kind"] for line in lines]
    assert kinds == ["header", "memory", "profile", "footer"]
    footer = orjson.loads(lines[-1])
    assert footer["checksum"] == hashlib.sha256(b"".join(lines[:-1])).hexdigest() == result.checksum
    assert footer["record_count"] == result.record_count == 2
    assert result.size_bytes == len(result.archive_data)
    assert b"agent_id" not in result.archive_data  # the agent is the store's, not the archive's


async def test_a_changed_archive_is_refused_naming_the_field_and_writes_nothing(
    source: cpersona.Engine, target: cpersona.Engine
) -> None:
    await source.store("the original words", agent_id="damaged")
    data = (await source.export("damaged")).archive_data
    changed = data.replace(b"original", b"forged!!")
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await target.import_archive("damaged-copy", changed)
    assert caught.value.field == "checksum"
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await target.import_archive("damaged-copy", data.splitlines(keepends=True)[0])
    assert caught.value.field == "archive_data"
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await target.import_archive("damaged-copy", b"not json\n")
    assert caught.value.field == "archive_data"
    assert await target.list(agent_id="damaged-copy") == []


async def test_a_malformed_associations_line_is_refused_and_a_filtered_export_leaves_the_graph_out(
    source: cpersona.Engine, target: cpersona.Engine
) -> None:
    stored = await source.store("Ada met the ops team", agent_id="graphed", store="semantic")
    await source.declare_associations("graphed", {"entities": [{"name": "Ada"}]}, anchor_ref=stored.ref)
    data = (await source.export("graphed")).archive_data
    header, *body, _footer = data.splitlines(keepends=True)
    assert [orjson.loads(line)["kind"] for line in body] == ["memory", "associations"]
    graph = orjson.loads(body[1])["data"]
    assert (graph["entities"], graph["mentions"]) == ([["ada", "Ada"]], [["ada", stored.ref]])
    # The associations line is no record: the footer counts one.
    assert (await source.export("graphed")).record_count == 1
    for bad in ({**graph, "mentions": [["ada"]]}, {**graph, "entities": "ada"}, {"project_id": ""}):
        line = orjson.dumps({"kind": "associations", "data": bad}, option=orjson.OPT_SORT_KEYS) + b"\n"
        with pytest.raises(cpersona.InvalidRequest) as caught:
            await target.import_archive("graphed-copy", _archive(header, [body[0], line]))
        assert caught.value.field == "archive_data"
        assert "line 3" in caught.value.problem
    semantic_only = await source.export("graphed", stores=["semantic"])
    kinds = [orjson.loads(line)["kind"] for line in semantic_only.archive_data.splitlines()]
    assert kinds == ["header", "memory", "footer"]
    assert await target.list(agent_id="graphed-copy") == []


async def test_merge_rules_and_replace(source: cpersona.Engine) -> None:
    kept = await source.store("first words", agent_id="merge")
    archive = (await source.export("merge")).archive_data
    await source.update(kept.ref, agent_id="merge", content="changed later")
    extra = await source.store("added after the export", agent_id="merge")

    async def content() -> str:
        got = await source.get(kept.ref, agent_id="merge")
        assert isinstance(got, MemoryRecord)
        return got.content

    newer = await source.import_archive("merge", archive)  # keep_newer: the held one is newer
    assert (newer.records_imported, newer.records_skipped, await content()) == (0, 1, "changed later")
    forced = await source.import_archive("merge", archive, conflict_resolution="keep_imported")
    assert (forced.records_imported, await content()) == (1, "first words")
    await source.import_archive("merge", archive, strategy="replace")
    assert {r.ref for r in await source.list(agent_id="merge")} == {kept.ref}
    assert extra.ref not in {r.ref for r in await source.list(agent_id="merge")}


async def _copy_source(engine: cpersona.Engine, agent: str) -> tuple[str, str, str]:
    """An agent whose records refer to each other every way an archive carries: a Cerememory edge (a bare
    UUID), a context edge of the meta (a ref), an entity mention and a record relation; an episode, a raw
    entry, a profile. Its two memories' refs and its raw entry's."""
    first = await engine.store("the harbour ferry leaves at seven", agent_id=agent, store="semantic")
    second = await engine.store(
        "so we book the ferry a day ahead",
        agent_id=agent,
        associations=[{"target_id": first.id, "association_type": "causal", "weight": 0.5}],
        meta={
            "rationale": "the timetable",
            "context_edges": [{"target_id": first.ref, "relation": "derived_from"}],
        },
    )
    await engine.archive_episode("planned the ferry trip", agent_id=agent, keywords=["ferry"])
    raw = await engine.store_raw(
        "user: book the ferry",
        agent_id=agent,
        session_id="s",
        source="conversation",
        speaker="user",
        visibility="normal",
        secrecy_level="public",
        meta={"rationale": "asked", "context_edges": [{"target_id": second.ref, "relation": "motivated_by"}]},
    )
    await engine.update_profile(agent, "Plans ahead.")
    await engine.declare_associations(agent, {"entities": [{"name": "Harbour ferry"}]}, anchor_ref=first.ref)
    await engine.declare_associations(
        agent, {"relations": [{"subject": second.ref, "predicate": "follows from", "object": first.ref}]}
    )
    return first.ref, second.ref, raw.ref


def _ids(archive: bytes) -> set[str]:
    kinds = {"memory", "episode", "raw"}
    return {line["data"]["id"] for line in map(orjson.loads, archive.splitlines()) if line["kind"] in kinds}


async def test_an_archive_imported_into_another_agent_of_its_store_is_a_copy_under_new_ids(
    source: cpersona.Engine,
) -> None:
    from cpersona.operations.lifecycle.copying import copied_id

    first, second, raw = await _copy_source(source, "ferry-a")
    archive = await source.export("ferry-a", include_raw_journal=True)
    copied = await source.import_archive("ferry-b", archive.archive_data)
    assert (copied.copied, copied.records_imported, copied.records_skipped) == (True, archive.record_count, 0)

    def in_b(ref: str) -> str:
        kind, _, ident = ref.partition(":")
        return f"{kind}:{copied_id('ferry-b', ident)}"

    # Every record is B's under its new id, and every reference among them names B's records.
    got = await source.get(in_b(second), agent_id="ferry-b")
    assert isinstance(got, MemoryRecord)
    assert got.content == "so we book the ferry a day ahead"
    assert [a.target_id for a in got.associations] == [copied_id("ferry-b", first.removeprefix("mem:"))]
    assert [e.target_id for e in got.meta.context_edges] == [in_b(first)]
    got_raw = await source.get(in_b(raw), agent_id="ferry-b")
    assert [e.target_id for e in got_raw.meta.context_edges] == [in_b(second)]  # type: ignore[union-attr]
    reached = await source.associate(in_b(second), agent_id="ferry-b")
    assert [m.record.ref for m in reached.memories] == [in_b(first)]
    walked = await source.traverse("ferry-b", "harbour ferry")
    assert [r.ref for r in walked.records] == [in_b(first)]
    links = await source.record_links(ReadScope("ferry-b"), [in_b(second)])
    assert [link.other for link in links[in_b(second)].relations] == [in_b(first)]
    recalled = await source.recall("when does the ferry leave", agent_id="ferry-b")
    assert in_b(first) in [row.ref for row in recalled.rows]
    assert (await source.get_profile("ferry-b")).content == "Plans ahead."  # type: ignore[union-attr]

    # Isolation: nothing of B names an id of A, and A is as it was.
    b_archive = (await source.export("ferry-b", include_raw_journal=True)).archive_data
    assert _ids(b_archive) == {copied_id("ferry-b", i) for i in _ids(archive.archive_data)}
    for old in _ids(archive.archive_data):
        assert old.encode() not in b_archive
    assert (await source.export("ferry-a", include_raw_journal=True)).archive_data == archive.archive_data
    # The copy is the archive under the new ids: each record line reads as A's with its ids mapped.
    a_lines = [orjson.loads(line) for line in archive.archive_data.splitlines()[1:-1]]
    b_lines = [orjson.loads(line) for line in b_archive.splitlines()[1:-1]]
    mapped = archive.archive_data.decode()
    for old in _ids(archive.archive_data):
        mapped = mapped.replace(old, copied_id("ferry-b", old))
    assert [x for x in b_lines if x["kind"] != "associations"] == [
        x for x in map(orjson.loads, mapped.splitlines()[1:-1]) if x["kind"] != "associations"
    ]
    assert len(a_lines) == len(b_lines)

    # The same archive again: the same ids, so the conflict rule decides (keep_newer: all held).
    again = await source.import_archive("ferry-b", archive.archive_data)
    assert (again.copied, again.records_imported, again.records_skipped) == (True, 0, archive.record_count)
    # Still a copy, under the same ids, once A is gone.
    await source.delete_agent_data("ferry-a")
    after = await source.import_archive("ferry-b", archive.archive_data)
    assert (after.copied, after.records_imported, after.records_skipped) == (True, 0, archive.record_count)
    assert (await source.export("ferry-b", include_raw_journal=True)).archive_data == b_archive
    # Into the agent it came from, once gone: a restore under the original ids, no copy.
    restored = await source.import_archive("ferry-a", archive.archive_data)
    assert (restored.copied, restored.records_imported) == (False, archive.record_count)
    assert (await source.export("ferry-a", include_raw_journal=True)).archive_data == archive.archive_data


async def test_a_copy_whose_new_id_another_agent_holds_is_a_conflict_and_nothing_is_written(
    source: cpersona.Engine, target: cpersona.Engine
) -> None:
    from cpersona.operations.lifecycle.archive import encode_line
    from cpersona.operations.lifecycle.copying import copied_id

    # The foreign record comes last, after a full batch of free ones: none of them may be written either.
    for n in range(70):
        await target.store(f"free record {n}", agent_id="mixed")
    held = await source.store("mine alone", agent_id="owner")
    owner = (await source.export("owner")).archive_data.splitlines(keepends=True)
    mixed = (await target.export("mixed")).archive_data.splitlines(keepends=True)
    await target.forget("mixed", confirm=True, older_than_seconds=0)
    # An archive made by hand names, for another agent, the very id the owner's record takes in a copy.
    squat = orjson.loads(owner[1])
    squat["data"] = {**squat["data"], "id": copied_id("intruder", held.id), "content": "squatting"}
    await source.import_archive("squatter", _archive(owner[0], [encode_line(squat)]))
    archive = _archive(mixed[0], [*mixed[1:-1], *owner[1:-1]])
    with pytest.raises(cpersona.ImportConflict) as caught:
        await source.import_archive("intruder", archive)
    assert caught.value.status == 409
    for told in ("owner", "squatter", held.id):
        assert told not in caught.value.problem
    assert await source.list(agent_id="intruder") == []
    assert (await source.get(held.ref, agent_id="owner")).ref == held.ref


async def test_an_encrypted_archive_opens_only_with_its_key(
    source: cpersona.Engine, target: cpersona.Engine
) -> None:
    await source.store("a secret worth keeping", agent_id="sealed")
    plain = await source.export("sealed")
    sealed = await source.export("sealed", encryption_key="correct horse")
    assert b"secret" not in sealed.archive_data
    assert sealed.checksum == plain.checksum  # of the plain archive's lines
    assert sealed.size_bytes == len(sealed.archive_data)
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await target.import_archive("sealed-copy", sealed.archive_data)
    assert caught.value.field == "decryption_key"
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await target.import_archive("sealed-copy", sealed.archive_data, decryption_key="wrong horse")
    assert caught.value.field == "decryption_key"
    tampered = sealed.archive_data[:-1] + bytes([sealed.archive_data[-1] ^ 1])
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await target.import_archive("sealed-copy", tampered, decryption_key="correct horse")
    assert caught.value.field == "decryption_key"
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await target.import_archive("sealed-copy", plain.archive_data, decryption_key="correct horse")
    assert caught.value.field == "decryption_key"
    assert await target.list(agent_id="sealed-copy") == []
    opened = await target.import_archive("sealed-copy", sealed.archive_data, decryption_key="correct horse")
    assert opened.records_imported == 1
    assert (await target.export("sealed-copy")).archive_data == plain.archive_data


async def test_key_rules_and_bad_bytes_are_refused_by_name(source: cpersona.Engine) -> None:
    from cpersona.model.fields import RequestModel, validate
    from cpersona.model.lifecycle_requests import ExportRequest, ImportRequest

    cases: list[tuple[type[RequestModel], dict[str, Any], str]] = [
        (ExportRequest, {"agent_id": "a", "encrypt": True}, "encryption_key"),
        (ExportRequest, {"agent_id": "a", "encryption_key": "long enough"}, "encryption_key"),
        (ExportRequest, {"agent_id": "a", "encrypt": True, "encryption_key": "short"}, "encryption_key"),
        (ImportRequest, {"agent_id": "a", "archive_data": [1, 256]}, "archive_data[1]"),
        (ImportRequest, {"agent_id": "a", "archive_data": "not base64!"}, "archive_data"),
        (ImportRequest, {"agent_id": "a"}, "archive_data"),
    ]
    for model, body, field in cases:
        with pytest.raises(cpersona.InvalidRequest) as caught:
            validate(model, body, source.settings)
        assert caught.value.field == field, body


async def test_a_sealed_raw_entry_is_never_exported(
    open_test_engine: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> None:
    async with open_test_engine(
        "as", embedding_mode="none", sealed_key=base64.b64encode(bytes(32)).decode()
    ) as m:
        for visibility in ("normal", "sealed"):
            await m.store_raw(
                f"user: a {visibility} line",
                agent_id="journal",
                session_id="s",
                source="conversation",
                speaker="user",
                visibility=visibility,
                secrecy_level="public",
            )
        archive = (await m.export("journal", include_raw_journal=True)).archive_data
    assert b"a normal line" in archive
    assert b"sealed" not in archive
