"""The lexical arms (memory keyword, episode full text) against the real RediSearch index.

Query terms follow CPersona's trigram rules but for CJK runs, whose terms are their 2-grams (found through
the ``bigrams`` field); a longer CJK phrase is found as a substring through ``grams``; identifiers are
matched as phrases of their tokenizer pieces; the whole-query fallback runs only when the terms find
nothing; isolation holds for any query text.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona.model.scope import ReadScope
from cpersona.stores.redis.connection import command
from cpersona.stores.redis.lexical import (
    SCORER,
    clauses,
    doc_bigrams,
    doc_grams,
    doc_short_grams,
    doc_stems,
    fts_terms,
    ranked_query,
    unscored,
    word_stem,
)
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.candidates import ArmResult


async def remember(engine: cpersona.Engine, content: str, agent_id: str = "a", **fields: Any) -> str:
    return (await engine.store(content, agent_id=agent_id, **fields)).ref


async def keyword(
    engine: cpersona.Engine,
    query: str,
    scope: ReadScope | None = None,
    fetch: int = 20,
    *,
    extra_terms: Sequence[str] = (),
    period: tuple[float, float] | None = None,
) -> ArmResult:
    return await engine.backends.records.memory_keyword(
        scope or ReadScope("a"),
        query,
        fetch,
        extra_terms=extra_terms,
        period=period,
    )


async def episodes(engine: cpersona.Engine, query: str, scope: ReadScope | None = None) -> ArmResult:
    return await engine.backends.records.episode_fts(scope or ReadScope("a"), query, 20)


def refs(result: ArmResult) -> list[str]:
    return [row.ref for row in result.rows]


# ------------------------------------------------------------------------------------ pure functions


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("東京タワーはどこ", ("東京", "京タ", "タワ", "ワー", "ーは", "はど", "どこ")),
        ("東京タワーに行った", ("東京", "京タ", "タワ", "ワー", "ーに", "に行", "行っ", "った")),
        ("東京 大阪 に", ("東京", "大阪")),  # a lone CJK character is dropped
        ("先週、東京タワー", ("先週", "東京", "京タ", "タワ", "ワー")),  # '、' is not CJK: it splits the run
        ("北京见面是什么时候", ("北京", "京见", "见面", "面是", "是什", "什么", "么时", "时候")),
        ("ｶﾀｶﾅです", ("ｶﾀ", "ﾀｶ", "ｶﾅ", "ﾅで", "です")),  # half-width katakana is CJK
        ("𠮷野家で", ("𠮷野", "野家", "家で")),  # a supplementary-plane ideograph
        ("Python3で書いた", ("Python3", "で書", "書い", "いた")),
        ("CVE-2024-3094 bug-218 2.5.5a1 #354", ("CVE-2024-3094", "bug-218", "2.5.5a1", "#354")),
        ('"Hello," (world)! ok? [x]', ("Hello", "world")),  # ends stripped, short tokens dropped
        ("東京(tokyo)です", ("東京", "(tokyo)", "です")),  # only whitespace tokens are stripped, not runs
        ("deploy Deploy deploy", ("deploy", "Deploy")),
        ("", ()),
        (" \n\u3000 ", ()),
    ],
)
def test_fts_terms(query: str, terms: tuple[str, ...]) -> None:
    assert fts_terms(query) == terms


def test_fts_terms_appends_extra_phrases() -> None:
    assert fts_terms("deploy now", [" 山田太郎 ", "ab", "deploy", "staging db"]) == (
        "deploy",
        "now",
        "山田太郎",
        "staging db",
    )


@pytest.mark.parametrize(
    ("text", "grams"),
    [
        ("plain english words, nothing glued", []),
        ("東京タワー", ["東京タ 京タワ タワー ワー ー"]),
        ("先週、東京タワーで", ["先週 週", "東京タ 京タワ タワー ワーで ーで で"]),
        ("東京でPythonを学んだ", ["東京で 京で で", "を学ん 学んだ んだ だ", "Python"]),
        ("line one\nline two", ["one", "line"]),  # the index tokenizer does not split at a newline
        ("nbsp\u00a0joined words", ["nbsp", "joined"]),
        ("a、b", ["a b"]),  # the tokenizer keeps 'a、b' whole; '、' is punctuation here
        ("don\u2019t «panic»", ["don t", "panic"]),  # non-ASCII punctuation cuts like ASCII punctuation
        ("a\\-b", ["a b"]),  # the tokenizer reads '\\-' as an escaped '-' and keeps 'a-b' whole
    ],
)
def test_doc_grams(text: str, grams: list[str]) -> None:
    assert doc_grams(text) == grams


@pytest.mark.parametrize(
    ("text", "bigrams"),
    [
        ("plain english words", []),
        ("東京タワー", ["東京 京タ タワ ワー"]),
        ("先週、東京タワーで", ["先週", "東京 京タ タワ ワー ーで"]),  # '、' ends a run
        ("東京でPythonを学んだ", ["東京 京で", "を学 学ん んだ"]),  # Latin text ends a run too
        ("A社の田中", ["社の の田 田中"]),
        ("社 A 中", []),  # a lone character has no 2-gram
        ("𠮷野家", ["𠮷野 野家"]),  # a supplementary-plane ideograph is one character
    ],
)
def test_doc_bigrams(text: str, bigrams: list[str]) -> None:
    assert doc_bigrams(text) == bigrams


def test_scope_filter_is_rewritten_to_score_nothing() -> None:
    scope = ReadScope("a", "p", "c", "discord:")
    assert unscored(scope_query(scope, with_source=True)) == (
        "(@agent:{61|z} => {$weight: 0;}) (@project:{70|x|z} => {$weight: 0;}) "
        "(@channel:{63|x|z} => {$weight: 0;}) (@source_prefix:{646973636f72643a|z} => {$weight: 0;})"
    )
    with pytest.raises(ValueError, match="unexpected scope clause"):
        unscored("@agent:{61} -@project:{70}")


async def test_this_server_has_the_chosen_scorer(engine: cpersona.Engine) -> None:
    # BM25STD is the standard BM25 of RediSearch 2.10; the classic "BM25" is a different formula.
    reply = await command(
        engine.backends.stores.redis,
        "FT.SEARCH",
        engine.keys.memory_index,
        "*",
        "SCORER",
        SCORER,
        "LIMIT",
        0,
        0,
    )
    assert reply[0] == 0


# --------------------------------------------------------------------------------------- CJK text


async def test_japanese_ranked_by_the_two_character_grams_it_shares(engine: cpersona.Engine) -> None:
    met = await remember(engine, "先週、東京タワーで山田さんに会った")  # 東京 京タ タワ ワー
    tower_only = await remember(engine, "タワーの展望台は高い")  # タワ ワー
    weather = await remember(engine, "東京の天気は晴れ")  # 東京
    await remember(engine, "大阪の城を見た")  # nothing of the question
    result = await keyword(engine, "東京タワーはどこ")
    assert refs(result) == [met, tower_only, weather]
    assert all(row.raw is not None and row.raw > 0 for row in result.rows)


async def test_chinese_ranked_by_the_two_character_grams_it_shares(engine: cpersona.Engine) -> None:
    met = await remember(engine, "我们去年在北京见面了")
    cold = await remember(engine, "北京很冷")
    await remember(engine, "上海很热")
    assert refs(await keyword(engine, "北京见面是什么时候")) == [met, cold]


async def test_a_short_cjk_question_is_exact_whatever_other_agents_store(engine: cpersona.Engine) -> None:
    # A prefix query expands to at most 200 grams over the whole index: another agent's 300 grams that
    # start with 山田 (and sort before 山田龍) would hide this agent's row.
    await engine.store_batch([{"content": f"山田{chr(0x4E00 + n)}", "agent_id": "A-big"} for n in range(300)])
    met = await remember(engine, "山田龍之介に会った", agent_id="B-small")
    for query in ("山田", "龍", "之介"):
        assert refs(await keyword(engine, query, ReadScope("B-small"))) == [met]
    assert refs(await keyword(engine, "介に会", ReadScope("B-small"))) == [met]  # its 2-grams
    assert refs(await keyword(engine, "田山", ReadScope("B-small"))) == []
    assert len((await keyword(engine, "山田", ReadScope("A-big"), fetch=500)).rows) == 300


def test_short_grams_are_every_distinct_cjk_substring_of_one_or_two_characters() -> None:
    assert doc_short_grams("東京タ, 東京") == [
        "東".encode().hex(),
        "東京".encode().hex(),
        "京".encode().hex(),
        "京タ".encode().hex(),
        "タ".encode().hex(),
    ]
    assert doc_short_grams("no CJK here") == []


async def test_longer_substrings_are_adjacent_grams_in_order_within_one_run(engine: cpersona.Engine) -> None:
    whole = await remember(engine, "東京タワーに登った")
    await remember(engine, "タワー東京の話")  # the same characters in another order
    split = await remember(engine, "東京タ。京タワーだ")  # every gram present, but across two runs
    # A query with no term of its own, so only the alias phrase can match.
    assert refs(await keyword(engine, "x", extra_terms=["東京タワー"])) == [whole]
    assert set(refs(await keyword(engine, "x", extra_terms=["京タワー"]))) == {whole, split}


@pytest.mark.parametrize(
    ("content", "query"),
    [
        ("山田さんはPythonでAPIを書いた", "Python API"),  # glued to Japanese
        ("first line\nsecond line", "second"),  # the tokenizer does not split at a newline
        ("don\u2019t panic", "don't"),  # a curly apostrophe cuts like a straight one
        ("«quoted» words", "quoted"),
        ("escaped\\ space", "space"),  # the tokenizer keeps an escaped separator inside the token
        ("東京でCVE-2024-3094を直した", "CVE-2024-3094"),
    ],
)
async def test_words_the_tokenizer_glues_are_found(engine: cpersona.Engine, content: str, query: str) -> None:
    glued = await remember(engine, content)
    await remember(engine, "an unrelated memory")
    assert refs(await keyword(engine, query)) == [glued]


# -------------------------------------------------------------------------------------- English


def test_a_word_and_its_inflections_share_one_stem_term() -> None:
    assert word_stem("deploy") == word_stem("deployed") == word_stem("Deploying") == "_deploy"
    assert doc_stems("We deployed it; 東京でPythonを学んだ, and CVE-2024-3094") == (
        "_we _deploy _python _cve _2024 _3094"
    )
    assert doc_stems("東京タワー") == ""


async def test_question_words_are_left_out_of_a_ranked_search_with_other_terms(
    engine: cpersona.Engine,
) -> None:
    painted = await remember(engine, "Caroline painted a sunrise")
    asked = await remember(engine, "what did you do when it rained")
    # "what", "did" and "when" would find the second memory; the question is about painting.
    assert refs(await keyword(engine, "What did Caroline paint when?")) == [painted]
    # Alone, they are all the question has, so they are searched.
    assert refs(await keyword(engine, "what did?")) == [asked]


async def test_a_score_does_not_depend_on_the_scope_filter(engine: cpersona.Engine) -> None:
    # Six agents written interleaved, so that each agent's rows are spread over the index's document ids
    # (the pattern under which the server's own stemming scored a row for some of its word forms only).
    forms = ["deploy", "deployed", "deploying", "paint", "painted", "paintings", "lemonade", "lemonades"]
    fillers = ["harbour", "window", "garden", "letter", "ticket", "violin", "station"]
    stored: list[str] = []
    for i in range(60):
        agent = f"g{i % 6}"
        words = [forms[(i * 7) % len(forms)], fillers[i % len(fillers)], forms[(i * 3) % len(forms)]]
        stored.append(await remember(engine, " ".join(words[: 1 + i % 3]), agent_id=agent))
    query = "deployed paintings lemonade"
    terms = clauses(fts_terms(query), "content")
    reply = await command(
        engine.backends.stores.redis,
        "FT.SEARCH",
        engine.keys.memory_index,
        ranked_query("", terms),
        "VERBATIM",
        "WITHSCORES",
        "SCORER",
        SCORER,
        "NOCONTENT",
        "LIMIT",
        0,
        100,
        "DIALECT",
        2,
    )
    unfiltered = {
        "mem:" + reply[i].decode().removeprefix(engine.keys.memory_prefix): float(reply[i + 1])
        for i in range(1, len(reply), 2)
    }
    for n in range(6):
        result = await keyword(engine, query, ReadScope(f"g{n}"))
        assert result.rows
        for row in result.rows:
            assert row.raw == pytest.approx(unfiltered[row.ref], rel=1e-12), row.ref

    # The control: the same documents under an index that lets the server stem (a plain TEXT field),
    # searched with the server's stemming. Some row's score changes when the scope filter is added. The
    # documents are copied in after the index exists, in one fixed shuffled order, which fixes their
    # document ids: built over the existing keys, the index numbered them in the keyspace's scan order,
    # which differs run to run, and now and then an order showed no skew and failed the control.
    control = engine.keys.prefix + ":idx:control"
    copies = engine.keys.prefix + ":control:"
    await command(
        engine.backends.stores.redis,
        "FT.CREATE",
        control,
        "ON",
        "JSON",
        "PREFIX",
        1,
        copies,
        "SCHEMA",
        "$.content",
        "AS",
        "content",
        "TEXT",
        "$.tag_agent",
        "AS",
        "agent",
        "TAG",
    )
    order = list(stored)
    random.Random(0).shuffle(order)
    for n, ref in enumerate(order):
        document = await command(
            engine.backends.stores.redis, "JSON.GET", engine.keys.memory_prefix + ref.removeprefix("mem:")
        )
        await command(engine.backends.stores.redis, "JSON.SET", f"{copies}{n:03d}", "$", json.dumps(document))

    async def scores(query: str) -> dict[bytes, float]:
        reply = await command(
            engine.backends.stores.redis,
            "FT.SEARCH",
            control,
            query,
            "WITHSCORES",
            "SCORER",
            SCORER,
            "NOCONTENT",
            "LIMIT",
            0,
            100,
            "DIALECT",
            2,
        )
        return {reply[i]: float(reply[i + 1]) for i in range(1, len(reply), 2)}

    wanted = ["@content:deployed", "@content:paintings", "@content:lemonade"]
    whole = await scores(ranked_query("", wanted))
    skewed = 0
    for n in range(6):
        filters = unscored(scope_query(ReadScope(f"g{n}"), with_source=False).split()[0])
        for key, score in (await scores(ranked_query(filters, wanted))).items():
            skewed += score != pytest.approx(whole[key], rel=1e-12)
    assert skewed


async def test_a_rarer_term_outranks_a_common_one(engine: cpersona.Engine) -> None:
    # Five two-word memories, so every document has the average length and BM25's length factor is 1:
    # a row's score is the idf of the term it holds, ln(1 + (N - n + 0.5) / (n + 0.5)).
    rare = await remember(engine, "zebra crossing")
    common = [await remember(engine, f"cobalt {word}") for word in ("mine", "blue", "alloy", "oxide")]
    result = await keyword(engine, "cobalt zebra")
    assert result.rows[0].ref == rare
    assert set(refs(result)[1:]) == set(common)
    assert result.rows[0].raw == pytest.approx(math.log(1 + (5 - 1 + 0.5) / (1 + 0.5)))
    assert result.rows[1].raw == pytest.approx(math.log(1 + (5 - 4 + 0.5) / (4 + 0.5)))
    # The scope filter adds nothing to the score, however narrow it is.
    narrow = await keyword(engine, "cobalt zebra", ReadScope("a", "", "", "a"))
    assert narrow.rows[0].raw == pytest.approx(result.rows[0].raw)


async def test_case_folding_and_stemming_for_words_but_not_phrases(engine: cpersona.Engine) -> None:
    deployed = await remember(engine, "Deployed the new servers on Monday")
    # A single word is case-insensitive and stemmed: DEPLOY finds "Deployed", server finds "servers".
    assert refs(await keyword(engine, "DEPLOY server")) == [deployed]
    # A phrase (here the pieces of one hyphenated token) is exact: no stemming inside it, and the
    # whole-query fallback (the same phrase) finds nothing either.
    assert refs(await keyword(engine, "deploy-server")) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("CVE-2024-3094", 0),
        ("bug-218", 1),
        ("2.5.5a1", 2),
        ("#354", 3),
        ("xz-utils", 0),
        ("state-of-the-art", 4),
    ],
)
async def test_identifiers_match_as_phrases_of_their_pieces(
    engine: cpersona.Engine, query: str, expected: int
) -> None:
    wanted = [
        await remember(engine, "Patched CVE-2024-3094 in xz-utils"),
        await remember(engine, "Fixed bug-218 in the parser"),
        await remember(engine, "Released 2.5.5a1 to PyPI"),
        await remember(engine, "See issue #354 for details"),
        # Stopwords are not indexed and leave no gap: this phrase is "state art".
        await remember(engine, "A state-of-the-art parser"),
    ]
    for distractor in (
        "CVE-2024-9999 is unrelated",
        "bug-219 stays open",
        "2.5.4 and 5a1",
        "issue 355",
        "xz",
        "the art of the state",
    ):
        await remember(engine, distractor)
    assert refs(await keyword(engine, query)) == [wanted[expected]]


async def test_ties_put_the_newer_row_first(engine: cpersona.Engine) -> None:
    older = await remember(engine, "zebra one")
    newer = await remember(engine, "zebra two")
    result = await keyword(engine, "zebra")
    assert refs(result) == [newer, older]
    assert result.rows[0].raw == result.rows[1].raw


# ---------------------------------------------------------------------- fallback and blank queries


async def test_fallback_runs_only_when_the_terms_find_nothing(engine: cpersona.Engine) -> None:
    phrase = await remember(engine, "ok go")
    await remember(engine, "go ok now")  # the same words in another order
    longer = await remember(engine, "ok go team")
    # No term of three or more characters: the whole query as a phrase, newest first, unscored.
    result = await keyword(engine, "ok go")
    assert refs(result) == [longer, phrase]
    assert all(row.raw is None for row in result.rows)
    # A term that matches: BM25 rows only, and the phrase rows do not join.
    zebra = await remember(engine, "zebra ok")
    result = await keyword(engine, "zebra ok go")
    assert refs(result) == [zebra]
    assert result.rows[0].raw is not None


async def test_fallback_finds_lone_cjk_characters_as_substrings(engine: cpersona.Engine) -> None:
    tower = await remember(engine, "東京タワー")
    await remember(engine, "大阪城")
    weather = await remember(engine, "明日の東京")  # 京 at the very end of the run
    result = await keyword(engine, "京")
    assert refs(result) == [weather, tower]  # newest first: no term to rank by
    assert all(row.raw is None for row in result.rows)
    assert refs(await keyword(engine, "京 城")) == []  # both must occur


async def test_a_two_character_cjk_query_is_ranked(engine: cpersona.Engine) -> None:
    once = await remember(engine, "東京タワーの展望台から海が見えた")
    twice = await remember(engine, "東京から東京へ")
    await remember(engine, "大阪城")
    result = await keyword(engine, "東京")
    assert refs(result) == [twice, once]  # BM25: more occurrences in a shorter text
    assert all(row.raw is not None and row.raw > 0 for row in result.rows)


async def test_fallback_uses_extra_terms(engine: cpersona.Engine) -> None:
    alias = await remember(engine, "Met Bob at the harbour")
    assert refs(await keyword(engine, "ok", extra_terms=["bob"])) == [alias]


async def test_blank_query_lists_the_newest_by_insertion(engine: cpersona.Engine) -> None:
    stored = [await remember(engine, f"note number {n}") for n in range(3)]
    result = await keyword(engine, "   ", fetch=2)
    assert refs(result) == [stored[2], stored[1]]
    assert all(row.raw is None for row in result.rows)
    assert refs(await keyword(engine, "", fetch=0)) == []


async def test_period_keeps_start_inclusive_end_exclusive(engine: cpersona.Engine) -> None:
    day = 86_400.0
    base = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    late = await remember(engine, "lantern three", timestamp=base + 2 * day)
    early = await remember(engine, "lantern one", timestamp=base)
    middle = await remember(engine, "lantern two", timestamp=base + day)
    assert refs(await keyword(engine, "lantern", period=(base + day, base + 2 * day))) == [middle]
    # Blank query inside a period: by record time, not by insertion order.
    assert refs(await keyword(engine, "", period=(base, base + 3 * day))) == [late, middle, early]
    assert refs(await keyword(engine, "lantern", period=(base + day, base + day))) == []


# ------------------------------------------------------------------------------------------ episodes


async def test_episode_full_text(engine: cpersona.Engine) -> None:
    lighthouse = (
        await engine.archive_episode(
            "Planned the lighthouse renovation", agent_id="a", keywords=["budget", "CVE-2024-3094"]
        )
    ).ref
    japanese = (await engine.archive_episode("灯台の改修を計画した", agent_id="a")).ref
    other_channel = (await engine.archive_episode("ok go", agent_id="a", channel="c")).ref
    result = await episodes(engine, "lighthouse budget")
    assert refs(result) == [lighthouse]
    assert result.arm == "episode_fts"
    assert refs(await episodes(engine, "cve-2024-3094")) == [lighthouse]
    assert refs(await episodes(engine, "灯台の改修はいつ")) == [japanese]
    assert refs(await episodes(engine, "ok go")) == []  # no fallback for episodes
    assert refs(await episodes(engine, "")) == [other_channel, japanese, lighthouse]
    # Episodes have no source: a source filter hides them unless a channel is given.
    assert refs(await episodes(engine, "", ReadScope("a", source_id="a"))) == []
    assert refs(await episodes(engine, "", ReadScope("a", channel="c", source_id="a"))) == [
        other_channel,
        japanese,
        lighthouse,
    ]


# ------------------------------------------------------------------------------------------ isolation

_PLACES = [
    ("a", "", "", "discord:1"),
    ("a", "p", "", "discord:2"),
    ("a", "q", "c", "slack:1"),
    ("a", "", "d", "discord:1"),
    ("b", "", "", "discord:1"),
    ("b", "p", "c", "slack:1"),
]
_TEXTS = [
    "harbor 東京タワー meeting CVE-2024-3094",
    "harbor ok go 北京见面",
    "harbor bug-218 the zebra",
    "harbor #354 東京 タワー",
    "harbor 2.5.5a1 cobalt",
    "harbor ok go zebra 東京タワー",
]
_READS = [
    ReadScope("a"),
    ReadScope("a", ""),
    ReadScope("a", "p"),
    ReadScope("a", "q", "c"),
    ReadScope("a", None, "d"),
    ReadScope("a", source_id="discord:"),
    ReadScope("a", source_id="discord:1"),
    ReadScope("b", "p", "c", "slack:1"),
    ReadScope("nobody"),
]


@pytest.fixture
async def places(engine: cpersona.Engine) -> dict[str, tuple[str, str, str, str]]:
    """A memory and an episode per place, all holding "harbor"; ref -> (agent, project, channel, source)."""
    where = {}
    for place, text in zip(_PLACES, _TEXTS, strict=True):
        agent, project, channel, source = place
        ref = await remember(
            engine, text, agent_id=agent, project_id=project, channel=channel, source={"id": source}
        )
        where[ref] = place
        episode = await engine.archive_episode(text, agent_id=agent, project_id=project, channel=channel)
        where[episode.ref] = place
    return where


def _visible(read: ReadScope, ref: str, place: tuple[str, str, str, str]) -> bool:
    agent, project, channel, source = place
    if ref.startswith("ep:"):
        # Episodes have no source: a source filter hides them, unless a channel is given.
        unsourced = dataclasses.replace(read, source_id="")
        return (not read.source_id or bool(read.channel)) and unsourced.sees(
            cpersona.Scope(agent, project, channel)
        )
    return read.sees(cpersona.Scope(agent, project, channel), cpersona.Source("Agent", source, ""))


def _want(read: ReadScope, where: dict[str, tuple[str, str, str, str]], kind: str) -> set[str]:
    return {ref for ref, place in where.items() if ref.startswith(kind) and _visible(read, ref, place)}


async def test_scope_isolation(engine: cpersona.Engine, places: dict[str, tuple[str, str, str, str]]) -> None:
    for read in _READS:
        memories, eps = _want(read, places, "mem:"), _want(read, places, "ep:")
        for query in ("harbor", "東京タワー", "", "ok go"):
            assert set(refs(await keyword(engine, query, read))) <= memories, (read, query)
            assert set(refs(await episodes(engine, query, read))) <= eps, (read, query)
        assert set(refs(await keyword(engine, "harbor", read))) == memories, read
        assert set(refs(await episodes(engine, "harbor", read))) == eps, read


_NASTY = st.text(
    alphabet=st.sampled_from(list("\"'`.,;:!?()[]{}@#$%^&*-+=~|/\\<>_ \t\n\u3000东京タワー山田ab12%*$=>{};")),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.one_of(st.text(max_size=60), _NASTY),
    extra=st.lists(st.one_of(st.text(max_size=12), _NASTY), max_size=2),
    read=st.sampled_from(_READS),
)
async def test_any_query_is_safe_and_stays_in_scope(
    engine: cpersona.Engine,
    places: dict[str, tuple[str, str, str, str]],
    query: str,
    extra: list[str],
    read: ReadScope,
) -> None:
    memories = await keyword(engine, query, read, extra_terms=extra)
    assert set(refs(memories)) <= _want(read, places, "mem:")
    eps = await engine.backends.records.episode_fts(read, query, 20, extra_terms=extra)
    assert set(refs(eps)) <= _want(read, places, "ep:")
