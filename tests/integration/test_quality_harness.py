"""The LoCoMo retrieval-quality harness (``benchmarks/quality``): metrics, evidence, loader, systems, command.

Metric values are computed by hand in the comments. The loader test reads the real data file and is
skipped when it is not beside the repository; tests of BM25 need the ``bench`` extra (``bm25s``). The
end-to-end run is marked slow: it embeds one conversation with the ONNX model (cached afterwards under
``benchmarks/.cache``) and runs cpersona and CPersona 2.6.14 beside two baselines, so the report's time-cue
section is checked for both engines (or for the exact error of one that could not run).
"""

from __future__ import annotations

import datetime
import json
import math
import re
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest

from cpersona.settings import Settings

# The harness lives in the repository's benchmarks/ package, which is not installed with cpersona.
REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.peers.cpersona_ref import CPersonaRef  # noqa: E402
from benchmarks.quality import locomo as locomo_module  # noqa: E402
from benchmarks.quality.embed_cache import EmbeddingCache, text_key  # noqa: E402
from benchmarks.quality.locomo import (  # noqa: E402
    DEFAULT_DATA,
    load_locomo,
    normalise_evidence,
    parse_session_time,
)
from benchmarks.quality.metrics import (  # noqa: E402
    QuestionScore,
    any_hit_at,
    capped_recall_at,
    macro_average,
    ndcg_at,
    recall_at,
    recall_curve,
    score_question,
)
from benchmarks.quality.systems import Dense, RRFHybrid, rank_scores  # noqa: E402

from peer_installs import install_peers, peer_installs  # noqa: E402

needs_data = pytest.mark.skipif(
    not DEFAULT_DATA.is_file(),
    reason=f"LoCoMo data not found at {DEFAULT_DATA} (evaluation data, not shipped)",
)

# 1 / log2(i + 1) for positions 1..3 and 5, written out once.
D1, D2, D3, D5 = 1.0, 1 / math.log2(3), 0.5, 1 / math.log2(6)

PLAIN = "all-MiniLM-L6-v2"
"""A model without prefixes: a hand-written cache keys each text by the digest of the text itself."""


def table_rows(section: str) -> dict[str, list[str]]:
    """A report's markdown table as {first cell: the other cells, unstripped}."""
    return {
        line.split("|")[1].strip(): line.split("|")[2:-1] for line in section.splitlines() if line[:2] == "| "
    }


def assert_dense_check_passed(text: str, questions: int) -> None:
    """The report's dense check passed on all ``questions``: each ranked as the direct cosine does, or
    differently only inside a tie (rows of equal cosine, which vector engines order their own way and
    whose order may change with the host's SIMD kernels)."""
    found = re.search(
        r"(PASS|FAIL): (\d+)/(\d+) questions rank identically[^;,\n]*(?:, (\d+) differ only inside ties)?",
        text,
    )
    assert found is not None, "no dense check in the report"
    verdict, identical, asked, tied = found.groups()
    assert (verdict, int(asked)) == ("PASS", questions), found.group(0)
    assert int(identical) + int(tied or 0) == questions, found.group(0)


def test_the_dense_check_reader_counts_ties_and_refuses_a_failure() -> None:
    line = "PASS: 6/8 questions rank identically to a direct pure-Python cosine over the same cached vectors"
    assert_dense_check_passed(line + ", 2 differ only inside ties (|Δcos| < 1e-06); largest ...\n", 8)
    with pytest.raises(AssertionError):
        assert_dense_check_passed(line + "; largest ...\n", 8)
    with pytest.raises(AssertionError):
        assert_dense_check_passed(line.replace("PASS", "FAIL") + "; MISMATCH on q3; largest ...\n", 8)


# ------------------------------------------------------------------------------------------ metrics


def test_recall_any_hit_and_capped_recall_by_hand() -> None:
    ranked = ["a", "b", "c", "d", "e"]
    gold = {"b", "e", "z"}  # hits at places 2 and 5; "z" is never retrieved
    assert recall_at(ranked, gold, 1) == 0.0
    assert recall_at(ranked, gold, 2) == pytest.approx(1 / 3)
    assert recall_at(ranked, gold, 5) == pytest.approx(2 / 3)
    assert recall_at(ranked, gold, 20) == pytest.approx(2 / 3)
    assert any_hit_at(ranked, gold, 1) == 0.0
    assert any_hit_at(ranked, gold, 2) == 1.0
    # capped: hits / min(k, |G|) -> k=2: 1/2; k=5: 2/3 (|G| = 3 < 5)
    assert capped_recall_at(ranked, gold, 2) == pytest.approx(1 / 2)
    assert capped_recall_at(ranked, gold, 5) == pytest.approx(2 / 3)


def test_capped_recall_reaches_one_when_gold_exceeds_k() -> None:
    gold = [f"t{i}" for i in range(30)]
    ranked = gold[:10]
    assert recall_at(ranked, gold, 10) == pytest.approx(10 / 30)
    assert capped_recall_at(ranked, gold, 10) == 1.0


def test_ndcg_by_hand() -> None:
    ranked = ["a", "b", "c", "d", "e"]
    gold = {"b", "e", "z"}
    # DCG = 1/log2(3) + 1/log2(6); ideal = three hits at the top = 1 + 1/log2(3) + 1/2
    assert ndcg_at(ranked, gold, 10) == pytest.approx((D2 + D5) / (D1 + D2 + D3))
    assert ndcg_at(["b"], {"b"}, 10) == 1.0
    assert ndcg_at(["x", "b"], {"b"}, 10) == pytest.approx(D2)
    assert ndcg_at(["x", "b"], {"b"}, 1) == 0.0


def test_ndcg_ideal_is_capped_at_k() -> None:
    gold = [f"t{i}" for i in range(12)]
    # Ten hits in ten places is perfect even though two gold ids are left out.
    assert ndcg_at(gold[:10], gold, 10) == pytest.approx(1.0)


def test_repeats_count_once_and_empty_lists_score_zero() -> None:
    # After the repeat is dropped the top 2 are a, b: both gold.
    assert recall_at(["a", "a", "b"], {"a", "b"}, 2) == 1.0
    score = score_question(["a", "a", "b"], {"a"}, group=1, ks=(1, 5))
    assert score.values["rows"] == 2.0
    assert score.values["recall@1"] == 1.0
    assert ndcg_at(["a", "a", "a"], {"a", "b"}, 10) == pytest.approx(D1 / (D1 + D2))
    empty = score_question([], {"a"}, group=2)
    assert empty.values == {
        "recall@1": 0.0,
        "any_hit@1": 0.0,
        "recall@5": 0.0,
        "any_hit@5": 0.0,
        "recall@10": 0.0,
        "any_hit@10": 0.0,
        "recall@20": 0.0,
        "any_hit@20": 0.0,
        "ndcg@10": 0.0,
        "rows": 0.0,
    }


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="gold"):
        recall_at(["a"], set(), 1)
    with pytest.raises(ValueError, match="k must"):
        recall_at(["a"], {"a"}, 0)


def test_recall_curve_matches_pointwise_recall() -> None:
    ranked = ["a", "b", "c", "d"]
    gold = {"b", "d", "q", "r"}
    assert recall_curve(ranked, gold, 5) == [0.0, 0.25, 0.25, 0.5, 0.5]
    assert recall_curve(ranked, gold, 5) == [recall_at(ranked, gold, k) for k in range(1, 6)]


def test_macro_average_weighs_questions_not_groups() -> None:
    scores = [
        QuestionScore(1, {"recall@10": 1.0}),
        QuestionScore(2, {"recall@10": 0.0}),
        QuestionScore(2, {"recall@10": 0.0}),
        QuestionScore(2, {"recall@10": 0.5}),
    ]
    means = macro_average(scores)
    assert means[1] == {"recall@10": 1.0, "count": 1.0}
    assert means[2]["recall@10"] == pytest.approx(0.5 / 3)
    # Overall is the mean over the four questions (0.375), not the mean of the two groups (0.583).
    assert means["overall"] == {"recall@10": pytest.approx(0.375), "count": 4.0}
    with pytest.raises(ValueError, match="different metric names"):
        macro_average([QuestionScore(1, {"a": 1.0}), QuestionScore(1, {"b": 1.0})])


# ------------------------------------------------------------------------------------------ evidence


KNOWN = {"D1:3", "D1:4", "D1:5", "D8:6", "D9:17", "D11:26", "D30:5", "D9:1", "D4:4", "D4:6"}


@pytest.mark.parametrize(
    ("raw", "resolved", "unresolved"),
    [
        (["D1:3"], ["D1:3"], []),
        (["D8:6; D9:17"], ["D8:6", "D9:17"], []),
        (["D9:1 D4:4 D4:6"], ["D9:1", "D4:4", "D4:6"], []),
        (["D:11:26"], ["D11:26"], []),
        (["D30:05"], ["D30:5"], []),
        (["D1:3."], ["D1:3"], []),
        (["  D1:4 \n"], ["D1:4"], []),
        (["d1:5"], ["D1:5"], []),
        (["D1:3-D1:5"], ["D1:3", "D1:4", "D1:5"], []),
        (["D1:3-5"], ["D1:3", "D1:4", "D1:5"], []),
        (["D1:3 - D1:5"], ["D1:3", "D1:4", "D1:5"], []),
        (["D1:3, D1:3;", "D1:3"], ["D1:3"], []),
        (["D1:18", "D", "D1:4"], ["D1:4"], ["D1:18", "D"]),
        (["D10:19"], [], ["D10:19"]),
        ([], [], []),
        ([""], [], []),
    ],
)
def test_normalise_evidence(raw: list[str], resolved: list[str], unresolved: list[str]) -> None:
    assert normalise_evidence(raw, KNOWN) == (resolved, unresolved)


def test_parse_session_time_is_utc() -> None:
    expected = datetime.datetime(2023, 5, 8, 13, 56, tzinfo=datetime.UTC).timestamp()
    assert parse_session_time("1:56 pm on 8 May, 2023") == expected
    assert parse_session_time("12:09 am on 13 September,  2023") == (
        datetime.datetime(2023, 9, 13, 0, 9, tzinfo=datetime.UTC).timestamp()
    )


# ------------------------------------------------------------------------------------------ loader


@needs_data
def test_loader_on_the_real_file() -> None:
    data = load_locomo()
    assert len(data.conversations) == 10
    assert sum(len(c.sessions) for c in data.conversations) == 272
    assert sum(len(c.turns) for c in data.conversations) == 5882
    assert data.total_questions == 1986
    used = data.recall_questions()
    assert len(used) == 1536
    by_category = {cat: sum(1 for q in used if q.category == cat) for cat in (1, 2, 3, 4)}
    assert by_category == {1: 282, 2: 321, 3: 92, 4: 841}
    dropped = data.dropped_for_recall()
    assert len(dropped) == 4
    assert all(d.category == 3 and not d.raw_evidence for d in dropped)

    conv = data.conversations[0]
    assert conv.conv_id == "conv-26"
    assert len(conv.sessions) == 19  # the file has date keys up to session 35 but turns up to 19
    first = conv.turns[0]
    assert first.dia_id == "D1:1"
    assert first.content.startswith("Caroline: Hey Mel!")
    assert first.timestamp == parse_session_time("1:56 pm on 8 May, 2023")
    assert first.metadata == {"conversation": "conv-26", "session": 1, "dia_id": "D1:1"}
    image = next(t for t in conv.turns if t.caption)
    assert image.content == f"{image.speaker}: {image.text} [image: {image.caption}]"
    assert conv.now == conv.sessions[-1].timestamp
    assert all(s.summary for s in conv.sessions)

    for c in data.conversations:
        stamps = [t.timestamp for t in c.turns]
        assert stamps == sorted(stamps), f"{c.conv_id} turns out of time order"
    questions = {q.qid: q for q in data.questions}
    # Evidence repaired: "D8:6; D9:17" (one string) and the zero-padded "D30:05".
    assert any(q.conv_id == "conv-26" and {"D8:6", "D9:17"} <= set(q.evidence) for q in questions.values())
    padded = [q for q in questions.values() if q.conv_id == "conv-50" and "D30:5" in q.evidence]
    assert padded
    assert all(
        q.sessions == tuple(dict.fromkeys(f"S{e.split(':')[0][1:]}" for e in q.evidence)) for q in used
    )


@needs_data
def test_loader_selects_conversations_and_refuses_unknown_ones() -> None:
    data = load_locomo(conversations=["conv-30"])
    assert [c.conv_id for c in data.conversations] == ["conv-30"]
    with pytest.raises(ValueError, match="conv-999"):
        load_locomo(conversations=["conv-999"])


def test_loader_names_the_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--data"):
        load_locomo(tmp_path / "nope.json")


def test_loader_on_a_tiny_file(tmp_path: Path) -> None:
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_2_date_time": "9:00 am on 2 May, 2023",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "later"}],
            "session_1_date_time": "8:00 pm on 1 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "hi"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "look", "blip_caption": "a photo of a cat"},
            ],
            "session_3_date_time": "9:00 am on 3 May, 2023",
        },
        "qa": [
            {"question": "q1", "answer": "a", "evidence": ["D1:2; D2:1"], "category": 1},
            {"question": "q2", "answer": "a", "evidence": ["D7:7"], "category": 4},
            {"question": "q3", "adversarial_answer": "a", "evidence": ["D1:1"], "category": 5},
        ],
        "session_summary": {"session_1_summary": "They greet.", "session_2_summary": "Later."},
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    data = load_locomo(path)
    [conv] = data.conversations
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.turns[1].content == "Bo: look [image: a photo of a cat]"
    assert [s.unit_id for s in conv.sessions] == ["S1", "S2"]
    assert conv.sessions[0].content == "They greet."
    [q1] = data.recall_questions()
    assert q1.evidence == ("D1:2", "D2:1")
    assert q1.sessions == ("S1", "S2")
    assert [(d.qid, d.category) for d in data.dropped] == [("conv-x:q1", 4)]
    assert data.total_questions == 3
    assert [q.category for q in data.questions] == [1, 5]
    assert locomo_module.CATEGORY_NAMES[2] == "temporal"


# ------------------------------------------------------------------------------------------ systems


class _Unit:
    def __init__(self, unit_id: str, content: str) -> None:
        self.unit_id = unit_id
        self.content = content
        self.timestamp = 0.0
        self.metadata: dict[str, object] = {}


def _fake_cache(folder: Path, vectors: dict[str, list[float]]) -> EmbeddingCache:
    """An on-disk cache in the documented format, written by hand, so no model is needed."""
    target = folder / "embeddings" / f"onnx_{PLAIN}"
    target.mkdir(parents=True)
    np.save(target / "vectors.npy", np.asarray(list(vectors.values()), dtype=np.float32))
    index = {"model": f"onnx:{PLAIN}", "dim": 2, "probe": None, "keys": [text_key(t) for t in vectors]}
    (target / "index.json").write_text(json.dumps(index), encoding="utf-8")
    return EmbeddingCache(folder, progress=False, model=PLAIN)


def test_rank_scores_breaks_ties_by_position() -> None:
    assert rank_scores(np.array([0.5, 0.9, 0.5, 0.0]), 3) == [1, 0, 2]
    assert rank_scores(np.array([0.5, 0.9, 0.5, 0.0]), 10, positive_only=True) == [1, 0, 2]
    assert rank_scores(np.array([0.0, 0.0]), 5, positive_only=True) == []


async def test_cache_reads_its_files_and_refuses_unknown_text(tmp_path: Path) -> None:
    cache = _fake_cache(tmp_path, {"x": [1.0, 0.0], "y": [0.0, 2.0]})
    assert len(cache) == 2
    assert "y" in cache
    assert "w" not in cache
    assert cache.lookup(["y", "x"]).tolist() == [[0.0, 2.0], [1.0, 0.0]]
    with pytest.raises(KeyError, match="not in the embedding cache"):
        cache.lookup(["w"])
    # Everything asked for is cached, so the model is never opened.
    assert (await cache.embed(["x"])).tolist() == [[1.0, 0.0]]
    assert cache.computed == 0
    await cache.aclose()


async def test_dense_ranks_by_cosine(tmp_path: Path) -> None:
    cache = _fake_cache(
        tmp_path,
        {"east": [1.0, 0.0], "north": [0.0, 3.0], "north-east": [2.0, 2.0], "query": [1.0, 0.2]},
    )
    dense = Dense(cache)
    units = [_Unit("N", "north"), _Unit("E", "east"), _Unit("NE", "north-east")]
    await dense.index("c", units)
    # cosines with (1, 0.2): E 0.981, NE 0.832, N 0.196
    assert await dense.search("c", "query", 10) == ["E", "NE", "N"]
    assert await dense.search("c", "query", 1) == ["E"]


async def test_bm25_and_rrf_fuse_by_reciprocal_rank(tmp_path: Path) -> None:
    pytest.importorskip("bm25s", reason="needs the bench extra: pip install -e '.[bench]'")
    from benchmarks.quality.systems import BM25

    texts = {
        "A": "Ann: my dog Rex loves the beach",
        "B": "Bo: the weather was awful",
        "C": "Ann: we adopted a puppy",
    }
    cache = _fake_cache(
        tmp_path,
        {
            texts["A"]: [0.0, 1.0],
            texts["B"]: [0.6, 0.8],
            texts["C"]: [1.0, 0.0],
            "the dog at the beach": [1.0, 0.1],
        },
    )
    units = [_Unit(uid, text) for uid, text in texts.items()]
    bm25 = BM25()
    await bm25.index("c", units)
    # Stop words ("the", "at") drop out; only A holds "dog" and "beach", so only A scores.
    assert await bm25.search("c", "the dog at the beach", 10) == ["A"]
    assert await bm25.search("c", "the of", 10) == []
    assert bm25.tokenize(["I saw a Dog, OK?"]) == [["saw", "dog", "ok"]]

    rrf = RRFHybrid(cache)
    await rrf.index("c", units)
    # dense order C, B, A; bm25 order A.  A: 1/61 + 1/63, C: 1/61, B: 1/62
    assert await rrf.search("c", "the dog at the beach", 10) == ["A", "C", "B"]
    await rrf.aclose()

    # One row deep: bm25 [A], dense [C]; both score 1/61 and the tie goes to the earlier turn.
    shallow = RRFHybrid(cache, depth=1, name="rrf:1")
    await shallow.index("c", units)
    assert shallow.name == "rrf:1"
    assert await shallow.search("c", "the dog at the beach", 10) == ["A", "C"]
    whole = RRFHybrid(cache, depth=None)
    await whole.index("c", units)
    assert await whole.search("c", "the dog at the beach", 10) == ["A", "C", "B"]


def test_system_names_on_the_command_line() -> None:
    from benchmarks.quality.__main__ import build_parser

    args = build_parser().parse_args(["locomo", "--systems", "BM25, dense,rrf,rrf:20,rrf:all,bm25"])
    assert args.systems == ["bm25", "dense", "rrf", "rrf:20", "rrf:all"]
    for bad in ("bm26", "rrf:0", "rrf:x", ""):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["locomo", "--systems", bad])


def test_a_recall_policy_on_the_command_line_reaches_every_cpersona_engine(tmp_path: Path) -> None:
    from benchmarks.quality.__main__ import _make_systems, build_parser

    assert build_parser().parse_args(["locomo"]).policy is None
    args = build_parser().parse_args(["tmd", "--policy", "single-pass-v0"])
    assert args.policy == "single-pass-v0"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["locomo", "--policy", "single-pass-v9"])
    made = _make_systems(["bm25", "cpersona", "cpersona:rsf"], None, None, None, "single-pass-v0")
    assert [type(system).__name__ for system in made] == ["BM25", "Cpersona", "Cpersona"]
    assert {system._settings(tmp_path).recall_policy for system in made[1:]} == {"single-pass-v0"}
    default = _make_systems(["cpersona"], None, None)[0]
    assert default._settings(tmp_path).recall_policy == Settings(data_dir=tmp_path).recall_policy


# ------------------------------------------------------------------------------------------ command


@needs_data
def test_cpersona_slot_is_skipped_with_a_reason_without_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.quality.__main__ import main
    from benchmarks.quality.systems import Cpersona

    import cpersona

    # An engine from before recall existed: the slot must say so, not crash the whole run.
    monkeypatch.delattr(cpersona.Engine, "recall", raising=False)
    assert "no 'recall' method yet" in (Cpersona.unavailable_reason() or "")
    report = main(["locomo", "--quick", "--systems", "cpersona", "--out", str(tmp_path), "--no-progress"])
    assert report is not None
    text = report.read_text(encoding="utf-8")
    assert "- **cpersona**: cpersona.Engine has no 'recall' method yet" in text
    assert "**used: 150**" in text


def _section(text: str, heading: str) -> str:
    """A report's section from ``heading`` to the next heading of level two ("" when it is absent)."""
    if heading not in text:
        return ""
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def test_the_cue_section_names_an_engine_that_did_not_run_and_the_systems_without_a_period() -> None:
    from types import SimpleNamespace

    from benchmarks.quality import cue_bench, cue_peers

    selection = cue_bench.Selection("locomo", (SimpleNamespace(qid="q"),), {}, ())  # type: ignore[arg-type]  # a stand-in question
    runs = cue_peers.CueRuns(selection, progress=False)
    failed = {"cpersona-2.6.14": "cpersona-2.6.14: pip install failed (exit 1)", "bm25": "not this one"}
    text = "\n".join(cue_peers.cue_sections(runs, ["mem0", "cpersona-2.6.14"], not_run=failed))
    assert "- **mem0**: takes no period" in text
    assert (
        "- **cpersona-2.6.14: cue runs not done**: the system did not run: cpersona-2.6.14: pip install "
        "failed (exit 1)" in text
    )
    # Only the systems that take a period get that line.
    assert "bm25" not in text
    assert "No system ran the cue." in text
    assert "Not run (`--no-cue`)." in "\n".join(cue_peers.cue_sections(None, ["cpersona"]))


@pytest.mark.slow
@needs_data
@peer_installs
def test_quick_run_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("bm25s", reason="needs the bench extra: pip install -e '.[bench]'")
    pytest.importorskip("matplotlib", reason="needs the bench extra: pip install -e '.[bench]'")
    anyio.run(install_peers, CPersonaRef)
    from benchmarks.quality.__main__ import main

    # Both engines that take a time period, beside two that take none: the report gets the cue section
    # (and, a peer being among the systems, the name of the side-by-side report).
    systems = ["bm25", "dense", "cpersona", "cpersona-2.6.14"]
    args = ["locomo", "--quick", "--systems", ",".join(systems), "--store-cache"]
    report = main([*args, "--out", str(tmp_path), "--no-progress"])
    assert report == tmp_path / "quality_locomo_peers_quick.md"
    text = report.read_text(encoding="utf-8")
    assert text.startswith(
        "# Retrieval quality on LoCoMo (turn level; the time cue where a system takes one)"
    )
    assert "**used: 150**; **dropped: 2**" in text
    assert_dense_check_passed(text, 8)
    for heading in ("recall@1", "recall@5", "recall@10", "recall@20", "any-hit@10", "NDCG@10", "mean rows"):
        assert f"#### {heading}" in text
    # A system that could not run (an engine without recall, a peer that cannot install) is listed with
    # its exact error and left out of the tables; bm25 and dense always run.
    not_run = dict(
        line[4:].split("**: ", 1)
        for line in _section(text, "## Systems not run").splitlines()
        if line[:4] == "- **"
    )
    assert not {"bm25", "dense"} & not_run.keys()
    ran = [name for name in systems if name not in not_run]
    assert "| " + " | ".join(ran) + " |" in text
    overall = next(line for line in text.splitlines() if line.startswith("| **overall**"))
    assert overall.count("|") == 3 + len(ran)
    chart = tmp_path / "quality_locomo_peers_quick_recall.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The time cue, for each engine that takes one, on conv-26's 8 questions that name a date, month or
    # year: no cue / cue / extra as finite NDCGs, a row per cue kind, the verdict, the honesty check.
    cue = _section(text, "## Time cue: no cue / cue / the same number of extra uncued rows")
    assert "- **bm25**: takes no period" in cue
    assert "- **dense**: takes no period" in cue
    rows: dict[str, list[list[str]]] = {}
    for line in cue.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 10 and cells[1].isdigit():
            rows.setdefault(cells[2], []).append(cells)
    for engine in ("cpersona", "cpersona-2.6.14"):
        if engine in not_run:
            assert f"- **{engine}: cue runs not done**: the system did not run: {not_run[engine]}" in cue
            assert engine not in rows
            continue
        overall_row, *kinds = rows[engine]
        assert overall_row[:2] == ["LoCoMo (names a date, month or year)", "8"]
        no_cue, cued, extra, delta = (float(cell) for cell in overall_row[3:7])
        assert all(0.0 <= value <= 1.0 for value in (no_cue, cued, extra)), overall_row
        assert math.isclose(delta, cued - no_cue, abs_tol=2e-4)
        # The verdict column follows the seed's rule (checked where four decimals can tell).
        if abs(cued - max(no_cue, extra)) > 1e-4:
            assert overall_row[9] == ("yes" if cued > max(no_cue, extra) else "no")
        # The kind rows split the same 8 questions.
        assert kinds
        assert all(row[0].startswith("LoCoMo/") for row in kinds)
        assert sum(int(row[1]) for row in kinds) == 8
        assert f"- **{engine}**, LoCoMo (names a date, month or year) (n = 8): cue {cued:.4f}" in cue
        honesty = next(
            line for line in cue.splitlines() if line.startswith(f"| {engine} | LoCoMo (names a date")
        )
        same, seats, changed = (cell.strip() for cell in honesty.split("|")[3:6])
        assert same.startswith("8/8")
        # A cue that changed the score must have moved a row or filled a seat, as the harness counts them.
        if abs(cued - no_cue) > 1e-4:
            assert int(seats) + int(changed) > 0


# ------------------------------------------------------------------------------------------ store cache


class _TimedUnit:
    def __init__(self, unit_id: str, content: str, timestamp: float) -> None:
        self.unit_id = unit_id
        self.content = content
        self.timestamp = timestamp
        self.metadata: dict[str, object] = {"turn": unit_id}


@pytest.mark.slow
async def test_cpersona_store_cache_builds_once_and_answers_the_same(tmp_path: Path) -> None:
    import anyio.to_thread
    from benchmarks.quality.systems import Cpersona, corpora_key

    texts = ["Ann: we adopted a puppy called Rex", "Bo: the weather was awful", "Ann: Rex chewed my shoes"]
    # The last unit repeats the first: the engine folds it into the same record, and the mapping kept
    # in the cache must still credit both unit ids.
    units = [_TimedUnit(str(i), text, 1.68e9 + 3600 * i) for i, text in enumerate([*texts, texts[0]])]
    corpora = [("a", units), ("b", units[:2])]
    key = await anyio.to_thread.run_sync(corpora_key, corpora)
    answers = []
    for expected_hit in (False, True):
        system = Cpersona(store_cache=tmp_path)
        try:
            assert await system.preload(corpora) is expected_hit
            assert system.cache_info is not None
            assert system.cache_info["key"] == key
            # A preloaded corpus is not stored twice; other units under its key are refused.
            await system.index("a", units)
            with pytest.raises(ValueError, match="preloaded with other units"):
                await system.index("a", units[:1])
            answers.append(await system.search("a", "What is the puppy called?", 10))
            memory = await system.engine()
            assert (await memory.stats("a"))["memories"] == 3
            assert (await memory.stats("b"))["memories"] == 2
        finally:
            await system.aclose()
    assert answers[0] == answers[1]
    assert {"0", "3"} <= set(answers[0])
    folders = await anyio.to_thread.run_sync(lambda: sorted(p.name for p in tmp_path.iterdir()))
    # One finished store and nothing half-built left beside it.
    assert folders == [key]


# ------------------------------------------------------------------------------------------ time cue


def test_cue_command_line() -> None:
    from benchmarks.quality.__main__ import build_parser

    args = build_parser().parse_args(["cue", "--quick", "--sets", "tmd"])
    assert (args.dataset, args.quick, args.sets) == ("cue", True, "tmd")
    from benchmarks.quality.cue_bench import sets_arg

    assert sets_arg("LoCoMo, tmd,tmd") == ["locomo", "tmd"]
    with pytest.raises(SystemExit):
        sets_arg("tmd,lme")


@pytest.mark.slow
@needs_data
def test_cue_quick_run_end_to_end(tmp_path: Path) -> None:
    import anyio
    from benchmarks.quality.cue_bench import cue_unsupported
    from benchmarks.quality.tmd import DEFAULT_TMD

    reason = anyio.run(cue_unsupported)
    if reason is not None:
        pytest.skip(f"the cue benchmark needs an engine that takes time_cue: {reason}")
    if not (DEFAULT_TMD / "ConversationData").is_dir():
        pytest.skip(f"TMD data not found at {DEFAULT_TMD}")
    pytest.importorskip("matplotlib", reason="needs the bench extra: pip install -e '.[bench]'")
    from benchmarks.quality.__main__ import main

    report = main(["cue", "--quick", "--out", str(tmp_path), "--no-progress"])
    assert report == tmp_path / "quality_cue_quick.md"
    text = report.read_text(encoding="utf-8")
    assert "**--quick**" in text
    headline = text.split("## NDCG over the returned rows", 1)[1].split("### Verdicts", 1)[0]
    rows = table_rows(headline)
    # TMD log 26 has 73 questions with a cue; LoCoMo conv-26 has 8 that name a date, month or year.
    assert rows["TMD overall"][0].strip() == "73"
    assert rows["LoCoMo (names a date, month or year)"][0].strip() == "8"
    no_cue, cue, extra = (float(cell) for cell in rows["TMD overall"][1:4])
    assert 0.0 <= min(no_cue, cue, extra) <= max(no_cue, cue, extra) <= 1.0
    # On TMD's time questions a correct stated time lifts the evidence (seed §2.11); a cue that reached
    # the engine but changed nothing would leave cue == no cue.
    assert cue > no_cue
    for heading in ("## Questions", "### Verdicts", "## Honesty", "## Cost of the cue", "## Method"):
        assert heading in text
    honesty = text.split("## Honesty", 1)[1].split("## Cost of the cue", 1)[0]
    overall = next(line for line in honesty.splitlines() if line.startswith("| TMD overall"))
    cells = [cell.strip() for cell in overall.split("|")[1:-1]]
    # The engine's invariant (seed §2.6): the rows a cued recall returns, seats aside, are those of the
    # recall without the cue.
    assert cells[7].startswith("73/73")
    # The cue did something on TMD: rows were seated or moved.
    assert int(cells[5]) + int(cells[6]) > 0
    assert len([line for line in text.splitlines() if line.startswith("- **TMD")]) == 3
    chart = tmp_path / "quality_cue_quick.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
