"""The TMD side-by-side run (``python -m benchmarks quality tmd``): grouping by question set, the report,
the time cue for the systems that take one, and the quick mode end to end.

The grouping and the cue bookkeeping are checked on hand-made questions. A small TMD-shaped folder written
here runs the command with bm25 and dense (it embeds a handful of texts, so it is marked slow). The quick
run over the real TMD log 26 with all six systems, the peers' time cue included, is skipped when the TMD
folder is not beside the repository or the peers cannot be installed from the package registry, as the
LoCoMo and peer quick runs are. The ``all`` command (LoCoMo, then TMD, same options) runs on the small
TMD folder and a tiny LoCoMo-shaped file with dense and CPersona 2.6.14.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.peers import PeerError  # noqa: E402
from benchmarks.peers.cpersona_ref import CPersonaRef  # noqa: E402
from benchmarks.peers.mem0_peer import Mem0  # noqa: E402
from benchmarks.quality import cue_bench, cue_peers, tmd_peers  # noqa: E402
from benchmarks.quality.__main__ import SystemRun, _turn_scores  # noqa: E402
from benchmarks.quality.tmd import DEFAULT_TMD, TIME_SETS, TmdQuestion, load_tmd  # noqa: E402

from peer_installs import install_peers, peer_installs  # noqa: E402
from test_quality_harness import assert_dense_check_passed, table_rows  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------ grouping


def test_a_time_question_counts_in_its_set_and_in_all_time_sets_but_once_overall() -> None:
    questions = [
        TmdQuestion(
            "tmd-26", "c", "content_time_qs", "What did Ann paint?", ("What did Ann paint?",), ("a",)
        ),
        TmdQuestion("tmd-26", "d", "dates", "What about May 8th?", ("What about May 8th?",), ("b", "c")),
        TmdQuestion("tmd-26", "m", "month", "What about May?", ("What about May?",), ("d",)),
    ]
    run = SystemRun("s", turns={"c": ["a", "x"], "d": ["b", "x"], "m": ["x", "d"]})
    scores = _turn_scores(run, questions, (1, 2), tmd_peers.TMD_LAYOUT)
    recall_1 = {group: values["recall@1"] for group, values in scores.items()}
    # content 1; dates 1/2; month 0 at rank 1 (its hit is second).
    assert recall_1 == {
        "content_time_qs": 1.0,
        "time_qs": 0.25,
        "dates": 0.5,
        "month": 0.0,
        "overall": 0.5,
    }
    counts = {group: values["count"] for group, values in scores.items()}
    assert counts == {"content_time_qs": 1, "time_qs": 2, "dates": 1, "month": 1, "overall": 3}
    assert scores["month"]["recall@2"] == 1.0


def _write_small_tmd(folder: Path) -> None:
    """Log 26 only: four turns over two days, one content question and two "what did we discuss" ones."""
    (folder / "ConversationData").mkdir(parents=True)
    said = [
        ("Ann", "I started a pottery class this week", "09:00:00 AM on Monday 08 May, 2023"),
        ("Bo", "Nice, I went hiking up the coast", "09:05:00 AM on Monday 08 May, 2023"),
        ("Ann", "My pottery bowl cracked in the kiln", "06:00:00 PM on Tuesday 09 May, 2023"),
        ("Bo", "Try a slower cooling next time", "06:02:00 PM on Tuesday 09 May, 2023"),
    ]
    turns = [
        {"speaker": who, "text": text, "date_time": when, "dia_id": f"D1:{n + 1}", "response_number": n}
        for n, (who, text, when) in enumerate(said)
    ]
    log = {"speaker_a": "Ann", "speaker_b": "Bo", "session_1": turns}
    (folder / "ConversationData" / "26.json").write_text(json.dumps(log), encoding="utf-8")
    (folder / "TestData" / "content_time_qs").mkdir(parents=True)
    (folder / "TestData" / "time_qs").mkdir()
    content = {"file_26": [{"questions": ["What cracked in the kiln on May 9th?"], "relevant_docs": [2]}]}
    path = folder / "TestData" / "content_time_qs" / "content_time_qs.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    dates = {
        "file_26": [
            {"questions": ["What did we talk about on May 8th?"], "relevant_docs": [0, 1]},
            {"questions": ["What did we talk about on May 9th?"], "relevant_docs": [2, 3]},
        ]
    }
    (folder / "TestData" / "time_qs" / "test_dates.json").write_text(json.dumps(dates), encoding="utf-8")
    # The loader reads every set's file; the other time sets have no items for this log.
    for name in TIME_SETS:
        if name != "dates":
            (folder / "TestData" / "time_qs" / f"test_{name}.json").write_text("{}", encoding="utf-8")


def test_tmd_reads_the_way_the_harness_reads_locomo(tmp_path: Path) -> None:
    _write_small_tmd(tmp_path)
    data = load_tmd(tmp_path, logs=[26])
    [conv] = data.conversations
    assert conv.sessions == ()
    assert data.recall_questions() == data.questions
    assert [(q.category, q.evidence) for q in data.questions] == [
        ("content_time_qs", ("2",)),
        ("dates", ("0", "1")),
        ("dates", ("2", "3")),
    ]


@pytest.mark.slow
def test_command_on_a_small_folder_writes_tables_by_set_and_passes_the_dense_check(tmp_path: Path) -> None:
    pytest.importorskip("bm25s", reason="needs the bench extra: pip install -e '.[bench]'")
    pytest.importorskip("matplotlib", reason="needs the bench extra: pip install -e '.[bench]'")
    from benchmarks.quality.__main__ import main

    folder = tmp_path / "tmd"
    _write_small_tmd(folder)
    args = ["tmd", "--quick", "--tmd", str(folder), "--systems", "bm25,dense", "--k", "10", "--no-cue"]
    report = main([*args, "--out", str(tmp_path), "--no-progress"])
    assert report == tmp_path / "quality_tmd_peers_quick.md"
    text = report.read_text(encoding="utf-8")
    assert_dense_check_passed(text, 3)
    recall_10 = text.split("#### recall@10\n", 1)[1].split("####", 1)[0]
    rows = table_rows(recall_10)
    assert rows["question set"] == [" n ", " bm25 ", " dense "]
    assert [cell.strip() for cell in rows["**overall**"][:1]] == ["3"]
    assert [cell.strip() for cell in rows["time_qs, all 11 sets"][:1]] == ["2"]
    assert [cell.strip() for cell in rows["time_qs/dates"][:1]] == ["2"]
    # Four turns and k = 10: dense returns them all, so it holds all the gold; BM25 finds the content
    # question ("cracked", "kiln") and returns nothing for the two that share no word with any turn.
    assert [cell.strip() for cell in rows["**overall**"][1:]] == ["0.333", "1.000"]
    assert "Not run (`--no-cue`)." in text
    assert "- **mem0**" not in text
    assert (tmp_path / "quality_tmd_peers_quick.png").read_bytes()[:8] == PNG


# ------------------------------------------------------------------------------------------ the cue


def test_a_peer_without_time_cue_is_recorded_and_keeps_its_plain_run() -> None:
    selection = cue_bench.Selection("tmd", (SimpleNamespace(qid="q"),), {}, ())  # type: ignore[arg-type]  # a stand-in question
    runs = cue_peers.CueRuns(selection, progress=False, unsupported={"cpersona": "no time_cue yet"})
    old = SimpleNamespace(
        name="cpersona-2.6.14", takes_time_cue=False, hello={"time_cue": {"parameter": False}}
    )
    anyio.run(runs, old, None)
    anyio.run(runs, SimpleNamespace(name="cpersona"), None)  # already known not to take it: not asked
    anyio.run(runs, SimpleNamespace(name="bm25"), None)  # takes no period: nothing to do
    assert runs.outcomes == {}
    assert runs.errors["cpersona"] == "no time_cue yet"
    assert "no time_cue parameter" in runs.errors["cpersona-2.6.14"]
    text = "\n".join(cue_peers.cue_sections(runs, ["bm25", "cpersona", "cpersona-2.6.14"]))
    assert "- **cpersona-2.6.14: cue runs not done**: the running release has no time_cue parameter" in text
    assert "- **bm25**: takes no period" in text
    assert "No system ran the cue." in text


def test_a_peer_failing_in_its_cue_runs_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    async def failing(*args: Any, **kwargs: Any) -> list[cue_bench.Outcome]:
        raise PeerError("cpersona-2.6.14: worker died")

    monkeypatch.setattr(cue_bench, "run_questions", failing)
    selection = cue_bench.Selection("tmd", (SimpleNamespace(qid="q"),), {}, ())  # type: ignore[arg-type]  # a stand-in question
    runs = cue_peers.CueRuns(selection, progress=False)
    peer = SimpleNamespace(name="cpersona-2.6.14", takes_time_cue=True, hello={})
    anyio.run(runs, peer, None)
    assert runs.errors == {"cpersona-2.6.14": "cpersona-2.6.14: worker died"}


# ------------------------------------------------------------------------------------------ quick run


def _table(text: str, heading: str) -> dict[str, list[str]]:
    """The first table at or after ``heading``: first cell -> the rest of each row, joined by " | "."""
    after = text[text.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(after) if line.startswith("|"))
    rows: dict[str, list[str]] = {}
    for line in after[start:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.setdefault(cells[0], []).append(" | ".join(cells[1:]))
    return rows


@pytest.mark.slow
@peer_installs
def test_quick_run_side_by_side_with_the_time_cue(tmp_path: Path) -> None:
    if not (DEFAULT_TMD / "ConversationData").is_dir():
        pytest.skip(f"TMD data not found at {DEFAULT_TMD} (evaluation data, not shipped)")
    pytest.importorskip("bm25s", reason="needs the bench extra: pip install -e '.[bench]'")
    pytest.importorskip("matplotlib", reason="needs the bench extra: pip install -e '.[bench]'")
    anyio.run(install_peers, CPersonaRef, Mem0)
    from benchmarks.quality.__main__ import main

    systems = "bm25,dense,rrf,cpersona,cpersona-2.6.14,mem0"
    args = ["tmd", "--quick", "--systems", systems, "--store-cache", "--out", str(tmp_path), "--no-progress"]
    report = main(args)
    assert report == tmp_path / "quality_tmd_peers_quick.md"
    text = report.read_text(encoding="utf-8")
    assert "**--quick: log 26 only" in text
    assert "## Systems not run" not in text
    for line in ("- command: ", "- date: ", "- git commit: ", "- 1-minute load average: "):
        assert line in text
    # The harness's honesty checks, on TMD's questions.
    assert "- dense through the harness vs a direct cosine: PASS: 8/8" in text
    assert "- mem0 (`infer=False`) vs the same direct cosine, cut at its default threshold: PASS: 8/8" in text
    assert "PASS: mem0 and dense return the same list on 124/124" in text
    recall_10 = _table(text, "#### recall@10\n")
    assert recall_10["question set"] == ["n | bm25 | dense | rrf | cpersona | cpersona-2.6.14 | mem0"]
    for heading in (
        "#### recall@1\n",
        "#### recall@5\n",
        "#### recall@20\n",
        "#### any-hit@10\n",
        "#### NDCG@10",
    ):
        overall = _table(text, heading)["**overall**"][0].split(" | ")
        assert overall[0] == "124"
        assert all(0.0 <= float(cell) <= 1.0 for cell in overall[1:]), heading

    # The cue: both CPersonas take it, on the same 73 cued questions of log 26.
    cue = _table(text, "| set | n | system | no cue |")
    assert [row.split(" | ")[:2] for row in cue["TMD overall"]] == [
        ["73", "cpersona"],
        ["73", "cpersona-2.6.14"],
    ]
    for row in cue["TMD overall"]:
        no_cue, cued, extra = (float(cell) for cell in row.split(" | ")[2:5])
        # A correct stated time lifts TMD's evidence in both releases, beyond what extra rows do.
        assert cued > max(no_cue, extra), row
    honesty = _table(text, "| system | set | same returned rows")
    for system in ("cpersona", "cpersona-2.6.14"):
        overall_row = next(r for r in honesty[system] if r.startswith("TMD overall"))
        same, seats = overall_row.split(" | ")[1:3]
        assert same.startswith("73/73")
        assert int(seats) > 0
    assert "- **mem0**: takes no period" in text
    assert "Policy each system reported: cpersona `cued-v0.5`; cpersona-2.6.14 `cued-v0.3`." in text
    assert (tmp_path / "quality_tmd_peers_quick.png").read_bytes()[:8] == PNG


# ------------------------------------------------------------------------------------------ all


def test_all_defaults_to_both_peers_and_runs_tmd_when_locomo_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.quality import __main__ as command

    args = command.build_parser().parse_args(["all", "--quick", "--store-cache"])
    assert args.systems == ["bm25", "dense", "rrf", "cpersona", "cpersona-2.6.14", "mem0"]
    assert (args.quick, args.store_cache, args.no_cue, args.conversations) == (True, True, False, None)
    ran: list[str] = []

    def locomo(args: Any, command_line: str, *, stem: str) -> Path:
        ran.append(f"locomo {stem} {command_line}")
        raise SystemExit("the dense honesty check failed: see the report")

    def tmd(args: Any, command_line: str) -> Path:
        ran.append("tmd")
        return tmp_path / "quality_tmd_peers_quick.md"

    monkeypatch.setattr(command, "_locomo_main", locomo)
    monkeypatch.setattr(command, "_tmd_main", tmd)
    with pytest.raises(SystemExit, match=r"^LoCoMo: the dense honesty check failed: see the report$"):
        command.main(["all", "--quick", "--systems", "dense"])
    assert ran[0].startswith("locomo quality_locomo_peers ")
    assert ran[0].endswith(" -m benchmarks quality all --quick --systems dense")
    assert ran[1:] == ["tmd"]


@pytest.mark.slow
@peer_installs
def test_all_writes_the_locomo_and_tmd_reports_side_by_side(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="needs the bench extra: pip install -e '.[bench]'")
    anyio.run(install_peers, CPersonaRef)
    from benchmarks.quality.__main__ import main

    from test_peers import _tiny_locomo

    folder = tmp_path / "tmd"
    _write_small_tmd(folder)
    locomo_file = tmp_path / "tiny.json"
    _tiny_locomo(locomo_file)
    args = ["all", "--quick", "--systems", "dense,cpersona-2.6.14", "--k", "10", "--tmd", str(folder)]
    report = main([*args, "--data", str(locomo_file), "--out", str(tmp_path), "--no-progress"])
    assert report == tmp_path / "quality_tmd_peers_quick.md"
    command_line = "-m benchmarks quality all --quick --systems dense,cpersona-2.6.14 --k 10"
    for name, title, questions in (
        ("quality_locomo_peers_quick", "# Retrieval quality on LoCoMo", 4),
        ("quality_tmd_peers_quick", "# Retrieval quality on TMD, side by side", 3),
    ):
        text = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        assert text.startswith(title), name
        assert command_line in text
        assert "## Systems not run" not in text
        assert_dense_check_passed(text, questions)
        recall_10 = _table(text, "#### recall@10\n")
        # LoCoMo labels its row "**overall** (non-adversarial)", TMD "**overall**".
        overall = next(v for k, v in recall_10.items() if k.startswith("**overall**"))[0].split(" | ")
        assert overall[0] == str(questions)
        assert [0.0 <= float(cell) <= 1.0 for cell in overall[1:]] == [True, True], name
    chart = tmp_path / "quality_locomo_peers_quick_recall.png"
    assert chart.read_bytes()[:8] == PNG
    assert (tmp_path / "quality_tmd_peers_quick.png").read_bytes()[:8] == PNG
    # TMD's cue ran for the peer, on its three cued questions; the LoCoMo report has its sessions too.
    tmd_text = report.read_text(encoding="utf-8")
    cue = _table(tmd_text, "| set | n | system | no cue |")
    assert [row.split(" | ")[:2] for row in cue["TMD overall"]] == [["3", "cpersona-2.6.14"]]
    locomo_text = (tmp_path / "quality_locomo_peers_quick.md").read_text(encoding="utf-8")
    assert "#### sessions: recall@1" in locomo_text
