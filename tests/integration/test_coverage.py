# The questions here are full-width on purpose: NFKC folding them is what is tested.
# ruff: noqa: RUF001
"""The coverage ledger (seed §1.5): how a question is cut into parts, how parts are matched against the
returned records' full stored text, and that a ledger that cannot be built never fails the recall.

The engine-level checks use the keyword-only engine (no embedder): the ledger reads the hydrated records,
whichever arm found them.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import orjson
import pytest

import cpersona
from answers import assert_same_answer
from cpersona import Settings
from cpersona.recall.trace import coverage as coverage_module
from cpersona.recall.trace.coverage import MAX_PARTS, coverage, extract_parts, normalize
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator
    from pathlib import Path


def parts_of(question: str) -> list[tuple[str, str]]:
    """The parts as ``(text, kind)``, recovered from their spans as a caller would."""
    norm = normalize(question)
    parts, _ = extract_parts(norm)
    return [(norm[start:end], kind) for start, end, kind in parts]


# ----------------------------------------------------------------------------------------------- parts


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # Japanese: hiragana particles and endings separate the parts and are never parts themselves.
        (
            "東京の会議はいつ始まりますか",
            [("東京", "kanji"), ("会議", "kanji")],
        ),
        (
            "サーバーの設定ファイルを変更した",
            [("サーバー", "katakana"), ("設定", "kanji"), ("ファイル", "katakana"), ("変更", "kanji")],
        ),
        # a single kanji between hiragana is not a part; the iteration mark joins its run
        ("始まりました。人々が来た", [("人々", "kanji")]),
        # the middle dot separates the words of a katakana name
        ("ジョン・スミスさん", [("ジョン", "katakana"), ("スミス", "katakana")]),
        ("ですます", []),
        # mixed scripts: a Latin name glued to Japanese
        ("redisの設定", [("redis", "identifier"), ("設定", "kanji")]),
        # identifiers: version numbers, issue refs, paths, snake case; trailing punctuation stays out
        ("Is 2.5.5a1 out?", [("is", "identifier"), ("2.5.5a1", "identifier"), ("out", "identifier")]),
        ("see bug-218.", [("see", "identifier"), ("bug-218", "identifier")]),
        (
            "Closes #354, not #3",
            [("closes", "identifier"), ("#354", "identifier"), ("not", "identifier"), ("#3", "identifier")],
        ),
        (
            "edit src/cpersona/_trace.py now",
            [("edit", "identifier"), ("src/cpersona/_trace.py", "identifier"), ("now", "identifier")],
        ),
        (
            "the max_memories knob",
            [("the", "identifier"), ("max_memories", "identifier"), ("knob", "identifier")],
        ),
        ("(v1.2)", [("v1.2", "identifier")]),
        # single characters are never parts; underscores alone are punctuation
        ("a b c __ _ x", []),
        # a repeated part counts once, at its first appearance
        ("Redis and redis AND REDIS", [("redis", "identifier"), ("and", "identifier")]),
        # NFKC folds full-width Latin and digits to ASCII and widens half-width katakana
        (
            "ＡＰＩキー ２．５ ｶﾀｶﾅ",
            [("api", "identifier"), ("キー", "katakana"), ("2.5", "identifier"), ("カタカナ", "katakana")],
        ),
    ],
)
def test_parts(question: str, expected: list[tuple[str, str]]) -> None:
    assert parts_of(question) == expected


def test_spans_index_the_normalised_question() -> None:
    norm = normalize("ＡＰＩの設定")
    assert norm == "apiの設定"
    parts, omitted = extract_parts(norm)
    assert parts == [(0, 3, "identifier"), (4, 6, "kanji")]
    assert omitted == 0


def ledger_json(question: str, records: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The ledger as the trace's JSON carries it."""
    out = orjson.loads(coverage(question, records).model_dump_json())
    assert isinstance(out, dict)
    return out


def test_at_most_32_parts_the_rest_counted() -> None:
    question = " ".join(f"w{i:02d}" for i in range(40)) + " w00 w01"
    parts, omitted = extract_parts(normalize(question))
    assert len(parts) == MAX_PARTS
    assert omitted == 8  # distinct parts left out; the repeats at the end are not parts again
    ledger = ledger_json(question, [])
    assert ledger["parts_omitted"] == 8
    assert "parts_omitted" not in ledger_json("few words", [])


# --------------------------------------------------------------------------------------------- ledger


def test_ledger_shape_and_order() -> None:
    records = [
        ("mem:b", "The deploy KEY rotates on Fridays; see bug-218."),
        ("ep:a", "デプロイの鍵は金曜日に交換する"),
        ("mem:c", "nothing relevant"),
    ]
    ledger = ledger_json("deploy key の交換は bug-218 ？ 金曜日", records)
    norm = normalize("deploy key の交換は bug-218 ？ 金曜日")
    parts = [norm[s:e] for s, e in (p["span"] for p in ledger["parts"])]
    assert parts == ["deploy", "key", "交換", "bug-218", "金曜日"]
    assert ledger["normalization"] == "nfkc-lower"
    assert [p["kind"] for p in ledger["parts"]] == [
        "identifier",
        "identifier",
        "kanji",
        "identifier",
        "kanji",
    ]
    # refs per part in the order the records were listed; text is lower-cased too ("KEY")
    assert ledger["covered_by"] == [["mem:b"], ["mem:b"], ["ep:a"], ["mem:b"], ["ep:a"]]
    assert ledger["uncovered"] == []
    assert ledger["records"] == 3
    assert "parts_omitted" not in ledger


def test_record_text_is_normalised_like_the_question() -> None:
    ledger = ledger_json("api 2.5", [("mem:x", "ＡＰＩ ｖ２．５")])
    assert ledger["covered_by"] == [["mem:x"], ["mem:x"]]


def test_uncovered_and_empty_question() -> None:
    ledger = ledger_json("alpha beta", [("mem:x", "alpha only")])
    assert ledger["covered_by"] == [["mem:x"], []]
    assert ledger["uncovered"] == [1]
    empty = ledger_json("", [("mem:x", "alpha")])
    assert empty["parts"] == []
    assert empty["uncovered"] == []
    assert empty["records"] == 1


def test_a_ledger_that_cannot_be_built_names_the_error() -> None:
    def broken() -> Iterator[tuple[str, str]]:
        yield "mem:x", "fine"
        raise OSError("disk gone")

    assert ledger_json("alpha", broken()) == {"error": "OSError"}


# ------------------------------------------------------------------------------------ on the engine


@contextlib.asynccontextmanager
async def keyword_engine(redis_url: str, key_prefix: str, tmp_path: Path) -> AsyncIterator[cpersona.Engine]:
    settings = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none")
    async with cpersona.open(settings, background=False) as memory:
        yield memory


async def test_coverage_reads_the_full_text_not_the_preview(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    # The part sits past the 500-character preview: only the stored text holds it.
    long_text = "zephyr " + "filler words here " * 40 + "quokkaria"
    async with keyword_engine(redis_url, key_prefix, tmp_path) as memory:
        stored = await memory.store(long_text, agent_id="ag")
        result = await memory.recall("zephyr quokkaria", agent_id="ag", trace=True)
    (row,) = result.rows
    assert row.ref == stored.ref
    assert row.content_truncated
    assert "quokkaria" not in row.content
    assert result.trace is not None
    ledger = trace_json(result)["coverage"]
    assert ledger["records"] == 1
    assert ledger["covered_by"] == [[stored.ref], [stored.ref]]
    assert ledger["uncovered"] == []
    assert trace_json(result)["timing_ms"]["coverage"] >= 0


async def test_a_failed_ledger_leaves_the_recall_as_it_was(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with keyword_engine(redis_url, key_prefix, tmp_path) as memory:
        await memory.store_batch(
            [{"content": f"lantern note {i} about the harbour", "agent_id": "ag"} for i in range(5)]
        )
        plain = await memory.recall("lantern harbour", agent_id="ag")

        def fail(normalized: str) -> Any:
            raise RuntimeError("injected")

        monkeypatch.setattr(coverage_module, "extract_parts", fail)
        traced = await memory.recall("lantern harbour", agent_id="ag", trace=True)
    assert traced.trace is not None
    assert trace_json(traced)["coverage"] == {"error": "RuntimeError"}
    # the rest of the trace is intact and the answer is the untraced one
    assert trace_json(traced)["trace_version"] == 1
    assert trace_json(traced)["order"]["before_cut"]
    body = traced.model_dump(mode="json")
    assert body.pop("trace")["coverage"] == {"error": "RuntimeError"}
    assert_same_answer(body, plain)
