"""JSQuAD in the quality harness (``python -m benchmarks quality jsquad``): the loader on a small
JSQuAD-shaped file, the bigram BM25 baseline, the command's system names and a run of the command with
the baseline alone (nothing is embedded, so it is quick).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.quality.jsquad import SCOPE, load_jsquad  # noqa: E402
from benchmarks.quality.systems import BM25Bigram  # noqa: E402

from test_quality_harness import table_rows  # noqa: E402

PARAGRAPHS = {
    "富士山": [
        (
            "富士山 [SEP] 富士山は静岡県と山梨県にまたがる活火山で、標高は3776メートルである。",
            ["富士山の標高は"],
        ),
        ("富士山 [SEP] 山頂には浅間大社の奥宮があり、夏には多くの登山者が訪れる。", ["奥宮があるのはどこ"]),
    ],
    "梅雨": [
        (
            "梅雨 [SEP] 梅雨は五月から七月にかけての雨の多い期間のことである。",
            ["雨が多い期間は", "梅雨はいつ"],
        ),
    ],
}


def write_small(path: Path) -> Path:
    data = [
        {
            "title": title,
            "paragraphs": [
                {
                    "context": context,
                    "qas": [
                        {"question": q, "id": f"{title}-{p}-{i}", "answers": [], "is_impossible": False}
                        for i, q in enumerate(questions)
                    ],
                }
                for p, (context, questions) in enumerate(paragraphs)
            ],
        }
        for title, paragraphs in PARAGRAPHS.items()
    ]
    path.write_text(json.dumps({"data": data}, ensure_ascii=False), encoding="utf-8")
    return path


def test_loader_puts_every_paragraph_in_one_scope_and_each_question_on_its_paragraph(tmp_path: Path) -> None:
    data = load_jsquad(write_small(tmp_path / "valid.json"))
    [scope] = data.conversations
    assert scope.conv_id == SCOPE
    assert scope.sessions == ()
    assert [p.unit_id for p in data.paragraphs] == ["0-0", "0-1", "1-0"]
    assert data.paragraphs[0].content.startswith("富士山\n富士山は静岡県")
    assert "[SEP]" not in data.paragraphs[0].content
    assert data.paragraphs[2].metadata == {"title": "梅雨"}
    stamps = [p.timestamp for p in data.paragraphs]
    assert stamps == sorted(set(stamps))
    assert [(q.question, q.evidence) for q in data.recall_questions()] == [
        ("富士山の標高は", ("0-0",)),
        ("奥宮があるのはどこ", ("0-1",)),
        ("雨が多い期間は", ("1-0",)),
        ("梅雨はいつ", ("1-0",)),
    ]
    assert (data.articles, data.total_questions) == (2, 4)
    # a sample takes every n-th question, the same each time
    sample = load_jsquad(tmp_path / "valid.json", questions=2)
    assert [q.qid for q in sample.questions] == ["富士山-0-0", "梅雨-0-0"]
    assert sample.total_questions == 4


def test_loader_refuses_a_missing_file_and_a_bad_count(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--jsquad"):
        load_jsquad(tmp_path / "nothing.json")
    with pytest.raises(ValueError, match="questions"):
        load_jsquad(write_small(tmp_path / "valid.json"), questions=0)


def test_bigram_tokens() -> None:
    # NFKC folds the full-width digits and letters; whitespace splits runs; a one-character run stays
    assert BM25Bigram.tokenize(["標高３７ＡＢ は 何"]) == [["標高", "高3", "37", "7a", "ab", "は", "何"]]


def test_bigram_bm25_finds_the_paragraph_that_shares_the_question_s_characters(tmp_path: Path) -> None:
    pytest.importorskip("bm25s", reason="needs the bench extra: pip install -e '.[bench]'")
    data = load_jsquad(write_small(tmp_path / "valid.json"))

    async def ranked() -> list[list[str]]:
        system = BM25Bigram()
        await system.index(SCOPE, data.paragraphs)
        return [await system.search(SCOPE, q.question, 3) for q in data.questions]

    answers = anyio.run(ranked)
    assert [ids[0] for ids in answers] == [q.gold for q in data.questions]


def test_system_names() -> None:
    from benchmarks.quality.__main__ import JSQUAD_SYSTEMS, build_parser

    args = build_parser().parse_args(["jsquad"])
    assert args.systems == list(JSQUAD_SYSTEMS)
    assert "cpersona:rrf" in args.systems
    args = build_parser().parse_args(["jsquad", "--systems", "bm25-bigram,cpersona:rsf,cpersona:informed"])
    assert args.systems == ["bm25-bigram", "cpersona:rsf", "cpersona:informed"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["jsquad", "--systems", "cpersona:hybrid"])


def test_command_with_the_baseline_writes_the_summary(tmp_path: Path) -> None:
    pytest.importorskip("bm25s", reason="needs the bench extra: pip install -e '.[bench]'")
    pytest.importorskip("matplotlib", reason="needs the bench extra: pip install -e '.[bench]'")
    from benchmarks.quality.__main__ import main

    path = write_small(tmp_path / "valid.json")
    args = ["jsquad", "--jsquad", str(path), "--systems", "bm25-bigram", "--k", "10", "--no-progress"]
    report = main([*args, "--out", str(tmp_path)])
    assert report == tmp_path / "quality_jsquad.md"
    text = report.read_text(encoding="utf-8")
    summary = table_rows(text.split("## Summary\n", 1)[1].split("##", 1)[0])
    assert [cell.strip() for cell in summary["bm25-bigram"][:4]] == ["1.000", "1.000", "1.000", "1.000"]
    assert "all 4 questions" in text
    assert "k1 1.5, b 0.75" in text
    quick = main([*args, "--out", str(tmp_path), "--questions", "2"])
    assert quick == tmp_path / "quality_jsquad_subset.md"
    assert "**2 of 4 questions**" in quick.read_text(encoding="utf-8")
    assert "- embedder: multilingual-e5-small (" in text
    # The header names the model the run was given (bm25-bigram embeds nothing, so this costs no model).
    minilm = main([*args, "--out", str(tmp_path / "minilm"), "--embedding-model", "all-MiniLM-L6-v2"])
    assert minilm == tmp_path / "minilm" / "quality_jsquad.md"
    header = minilm.read_text(encoding="utf-8")
    assert "- embedder: all-MiniLM-L6-v2 (" in header
    assert "multilingual-e5-small" not in header
