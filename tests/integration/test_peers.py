"""The benchmark peers (``benchmarks/peers``): loopback embeddings, the worker protocol, the installs, and
CPersona 2.6.14 and mem0 run end to end through the quality harness.

The loopback server and the worker protocol are tested against our own interpreter with small worker
scripts written here, so they need nothing installed. The peer tests install ``cpersona==2.6.14`` and
``mem0ai`` into their venvs under ``benchmarks/.cache/peers`` from the package registry (once; later
tests of the run reuse them); they carry the ``peers`` mark and run only with ``pytest -m peers``, where
a failed install fails them (``tests/peer_installs.py``). Their end-to-end run uses a small LoCoMo-shaped
file written here (one
conversation, a few questions), so they need no evaluation data either; the speed smoke run measures both
engines on 300 memories with a handful of recalls, the cost of a requested trace and of a time cue
included (figures not checked, only that they are there and are positive ratios).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
import httpx
import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.peers import PEER_SYSTEMS, PeerError, make_peer  # noqa: E402
from benchmarks.peers._process import open_worker  # noqa: E402
from benchmarks.peers._venv import PeerVenv  # noqa: E402
from benchmarks.peers.checks import agreement  # noqa: E402
from benchmarks.peers.cpersona_ref import PINS, CPersonaRef, iso_utc  # noqa: E402
from benchmarks.peers.embed_server import EmbedServer, serve_embeddings  # noqa: E402
from benchmarks.peers.mem0_peer import Mem0, expected_ranking  # noqa: E402
from benchmarks.quality.embed_cache import EmbeddingCache, text_key  # noqa: E402

from peer_installs import install_peers, peer_installs  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Sequence

PEERS_DIR = REPO_ROOT / "benchmarks" / "peers"

# float32 values whose shortest decimal spelling differs from their double widening's: a server that
# rounded through a short repr would not hand them back bit for bit.
VECTORS = {
    "alpha": np.array([0.1, 1 / 3, -2.718281828], dtype=np.float32),
    "beta": np.array([1e-8, 0.7071067811865476, 123.456], dtype=np.float32),
}

PLAIN = "all-MiniLM-L6-v2"
"""A model without prefixes: a hand-written cache keys each text by the digest of the text itself."""


async def _table_source(texts: Sequence[str]) -> np.ndarray[Any, Any]:
    return np.stack([VECTORS[t] for t in texts])


# ------------------------------------------------------------------------------------------ loopback server


async def test_embed_route_returns_the_exact_float32_values() -> None:
    async with serve_embeddings(_table_source, model="table") as server, httpx.AsyncClient() as client:
        assert server.embed_url.startswith("http://127.0.0.1:")
        reply = await client.post(server.embed_url, json={"texts": ["beta", "alpha"]})
        assert reply.status_code == 200
        rows = reply.json()["embeddings"]
        assert np.array_equal(
            np.asarray(rows, dtype=np.float32), np.stack([VECTORS["beta"], VECTORS["alpha"]])
        )
        # Each value parses to the double that the float32 widens to, so nothing is rounded on the way.
        assert rows[1] == [float(x) for x in VECTORS["alpha"]]
        # A second request on the same kept-alive connection.
        again = await client.post(server.embed_url, json={"texts": []})
        assert again.json() == {"embeddings": []}
        assert (server.requests, server.texts) == (2, 2)


async def test_openai_route_answers_in_input_order_and_checks_dimensions() -> None:
    async with serve_embeddings(_table_source, model="table") as server, httpx.AsyncClient() as client:
        url = f"{server.openai_base_url}/embeddings"
        one = (await client.post(url, json={"input": "alpha", "model": "x"})).json()
        assert one["model"] == "table"
        assert [item["index"] for item in one["data"]] == [0]
        assert one["data"][0]["embedding"] == [float(x) for x in VECTORS["alpha"]]
        two = (await client.post(url, json={"input": ["beta", "alpha"], "dimensions": 3})).json()
        assert [item["embedding"][2] for item in two["data"]] == [
            float(VECTORS["beta"][2]),
            float(VECTORS["alpha"][2]),
        ]
        wrong = await client.post(url, json={"input": ["alpha"], "dimensions": 384})
        assert wrong.status_code == 400
        assert "dimensions 384 asked, this server serves 3" in wrong.json()["error"]


async def test_bad_requests_are_refused_not_guessed() -> None:
    async with serve_embeddings(_table_source, model="table") as server, httpx.AsyncClient() as client:
        base = f"http://{server.host}:{server.port}"
        assert (await client.get(f"{base}/capabilities")).status_code == 404
        assert (await client.post(f"{base}/count_tokens", json={"texts": ["a"]})).status_code == 404
        assert (await client.get(f"{base}/embed")).status_code == 405
        not_json = await client.post(f"{base}/embed", content=b"{nope")
        assert not_json.status_code == 400
        assert "not JSON" in not_json.json()["error"]
        not_texts = await client.post(f"{base}/embed", json={"texts": "alpha"})
        assert not_texts.json() == {"error": "texts must be a list of strings"}
        assert server.errors == 2


async def test_a_source_that_returns_the_wrong_shape_is_an_error() -> None:
    async def short(texts: Sequence[str]) -> np.ndarray[Any, Any]:
        return np.zeros((len(texts) - 1, 3), dtype=np.float32)

    async with serve_embeddings(short, model="short") as server, httpx.AsyncClient() as client:
        reply = await client.post(server.embed_url, json={"texts": ["a", "b"]})
        assert reply.status_code == 400
        assert "for 2 texts" in reply.json()["error"]


# ------------------------------------------------------------------------------------------ worker protocol

FAKE_WORKER = textwrap.dedent(
    """
    import os, sys
    from _wire import claim_stdout, serve
    channel = claim_stdout()
    print("a stray print goes to the log, not the protocol")
    import anyio
    if os.environ.get("FAIL_AT_START"):
        raise RuntimeError("cannot import the peer library")
    released = anyio.Event()

    async def echo(request):
        return {"echo": request["value"]}

    async def wait(request):
        await released.wait()
        return {"waited": True}

    async def release(request):
        released.set()
        return {}

    async def boom(request):
        raise ValueError("the peer refused: " + request["why"])

    async def hang(request):
        await anyio.sleep_forever()

    async def die(request):
        os._exit(3)

    ops = {"echo": echo, "wait": wait, "release": release, "boom": boom, "hang": hang, "die": die}
    anyio.run(serve, channel, {"peer": "fake", "argv": sys.argv[1:]}, ops)
    """
)


def _fake_env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin"), "PYTHONPATH": str(PEERS_DIR), **extra}


async def _fake_script(tmp_path: Path) -> Path:
    script = tmp_path / "fake_worker.py"
    await anyio.Path(script).write_text(FAKE_WORKER, encoding="utf-8")
    return script


async def test_worker_says_hello_answers_and_serves_calls_concurrently(tmp_path: Path) -> None:
    script = await _fake_script(tmp_path)
    async with open_worker(
        "fake",
        Path(sys.executable),
        script,
        env=_fake_env(),
        cwd=tmp_path,
        deadlines={"*": 60.0},
        arguments=["x", "y"],
    ) as worker:
        assert worker.hello == {"peer": "fake", "argv": ["x", "y"]}
        assert await worker.call("echo", value={"k": [1, "é"]}) == {"echo": {"k": [1, "é"]}}
        answers: list[str] = []

        async def waiter() -> None:
            await worker.call("wait")
            answers.append("wait")

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            # "wait" can only finish after "release" is served while it is still pending.
            await worker.call("release")
            answers.append("release")
        assert answers == ["release", "wait"]
    log = (tmp_path / "worker.log").read_text(encoding="utf-8")
    assert "a stray print goes to the log" in log


async def test_worker_errors_come_back_verbatim(tmp_path: Path) -> None:
    script = await _fake_script(tmp_path)
    async with open_worker(
        "fake", Path(sys.executable), script, env=_fake_env(), cwd=tmp_path, deadlines={"hang": 0.5}
    ) as worker:
        with pytest.raises(PeerError, match="fake boom failed: ValueError: the peer refused: no reason"):
            await worker.call("boom", why="no reason")
        with pytest.raises(PeerError, match="unknown op 'nope'"):
            await worker.call("nope")
        with pytest.raises(PeerError, match=r"hang got no reply within 0\.5 s"):
            await worker.call("hang")
        # The worker is still usable after a missed deadline.
        assert await worker.call("echo", value=1) == {"echo": 1}
        with pytest.raises(PeerError, match="the worker exited with code 3"):
            await worker.call("die")
        with pytest.raises(PeerError, match="exited with code 3"):
            await worker.call("echo", value=2)


async def test_worker_that_fails_to_start_reports_its_traceback(tmp_path: Path) -> None:
    script = await _fake_script(tmp_path)
    with pytest.raises(PeerError) as caught:
        async with open_worker(
            "fake",
            Path(sys.executable),
            script,
            env=_fake_env(FAIL_AT_START="1"),
            cwd=tmp_path,
            deadlines={"start": 60.0},
        ):
            pytest.fail("a worker that died on start must not be yielded")
    message = str(caught.value)
    assert "the worker exited with code 1" in message
    assert "RuntimeError: cannot import the peer library" in message


# ------------------------------------------------------------------------------------------ installs


@pytest.mark.slow
async def test_failed_install_names_pips_error_and_leaves_no_marker(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-project"
    venv = PeerVenv("broken", (str(missing),), root=tmp_path / "peers")
    with pytest.raises(PeerError) as caught:
        await venv.ensure()
    message = str(caught.value)
    assert message.startswith(f"broken: pip install {missing} failed (exit 1):")
    assert "no-such-project" in message.split(":", 2)[2]
    assert venv.installed() is None
    assert not venv.marker.exists()


def test_install_record_must_match_the_requirements(tmp_path: Path) -> None:
    venv = PeerVenv("p", ("pkg==1",), root=tmp_path)
    venv.python.parent.mkdir(parents=True)
    venv.python.write_text("", encoding="utf-8")
    venv.marker.write_text(json.dumps({"requirements": ["pkg==1"]}), encoding="utf-8")
    assert venv.installed() == {"requirements": ["pkg==1"]}
    assert PeerVenv("p", ("pkg==2",), root=tmp_path).installed() is None
    venv.python.unlink()
    assert venv.installed() is None


# ------------------------------------------------------------------------------------------ peer settings


def test_cpersona_environment_pins_the_gate_and_drops_our_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CPERSONA_RECALL_MODE", "cascade")
    peer = CPersonaRef(_table_source)
    server = EmbedServer("127.0.0.1", 4321, "m")
    env = peer.environment(server, Path("/tmp/w"))
    assert env["CPERSONA_FUSED_GATE_ENABLED"] == "false"
    assert env["CPERSONA_AUTOCUT_ENABLED"] == "false"
    assert env["CPERSONA_EMBEDDING_URL"] == "http://127.0.0.1:4321/embed"
    assert env["CPERSONA_DB_PATH"] == "/tmp/w/cpersona.db"
    assert "CPERSONA_RECALL_MODE" not in env


def test_cpersona_refuses_to_run_when_a_pin_did_not_take() -> None:
    peer = CPersonaRef(_table_source)
    config = {name: wanted for _, _, name, wanted in PINS}
    peer.check_hello({"version": "2.6.14", "config": config})
    with pytest.raises(PeerError, match=r"FUSED_GATE_ENABLED=True \(wanted False\)"):
        peer.check_hello({"version": "2.6.14", "config": {**config, "FUSED_GATE_ENABLED": True}})
    with pytest.raises(PeerError, match=r"version '2\.6\.13'"):
        peer.check_hello({"version": "2.6.13", "config": config})


def test_mem0_refuses_to_run_with_telemetry_on() -> None:
    peer = Mem0(_table_source)
    with pytest.raises(PeerError, match="telemetry is True"):
        peer.check_hello({"version": "2.2.1", "telemetry": True})


def test_iso_utc_and_mem0s_expected_ranking() -> None:
    assert iso_utc(0.0) == "1970-01-01T00:00:00+00:00"
    assert iso_utc(1_683_554_160.0) == "2023-05-08T13:56:00+00:00"
    # Top 3 by cosine (ties by position), then the threshold: 0.05 never qualifies.
    assert expected_ranking([0.5, 0.05, 0.9, 0.5], 3) == [2, 0, 3]
    assert expected_ranking([0.5, 0.05, 0.9, 0.5], 4) == [2, 0, 3]
    assert expected_ranking([0.5, 0.05, 0.9, 0.5], 4, threshold=0.0) == [2, 0, 3, 1]


def test_a_run_with_a_peer_embeds_with_the_peers_model() -> None:
    from benchmarks.quality.__main__ import _settle_model, build_parser

    from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL

    parser = build_parser()

    def model(*argv: str) -> str:
        args = parser.parse_args(["locomo", *argv])
        _settle_model(parser, args)
        return str(args.embedding_model)

    assert model("--systems", "dense,cpersona-2.6.14") == PLAIN
    assert model("--systems", "dense,cpersona") == DEFAULT_EMBEDDING_MODEL != PLAIN
    assert model("--systems", "cpersona", "--embedding-model", PLAIN) == PLAIN
    with pytest.raises(SystemExit):
        model("--systems", "mem0", "--embedding-model", "multilingual-e5-small")


def test_peer_names_on_the_command_line() -> None:
    from benchmarks.quality.__main__ import build_parser

    args = build_parser().parse_args(["locomo", "--systems", "dense,CPersona-2.6.14, mem0"])
    assert args.systems == ["dense", "cpersona-2.6.14", "mem0"]
    with pytest.raises(ValueError, match="no peer called 'zep'"):
        make_peer("zep", EmbeddingCache(Path("/nonexistent"), progress=False))
    assert PEER_SYSTEMS == ("cpersona-2.6.14", "mem0")


async def test_agreement_allows_reordered_ties_and_a_threshold(tmp_path: Path) -> None:
    folder = tmp_path / "embeddings" / f"onnx_{PLAIN}"
    folder.mkdir(parents=True)
    vectors = {"q": [1.0, 0.0], "a": [1.0, 0.0], "b": [2.0, 0.0], "c": [0.0, 1.0], "d": [0.6, 0.8]}
    np.save(folder / "vectors.npy", np.asarray(list(vectors.values()), dtype=np.float32))
    index = {"model": f"onnx:{PLAIN}", "dim": 2, "probe": None, "keys": [text_key(t) for t in vectors]}
    (folder / "index.json").write_text(json.dumps(index), encoding="utf-8")
    cache = EmbeddingCache(tmp_path, progress=False, model=PLAIN)
    contents = {u: u for u in "abcd"}
    asked = [("q1", "q", contents), ("q2", "q", contents), ("q3", "q", contents)]
    # q1 identical; q2 a and b swapped (both cosine 1); q3 c (cosine 0) dropped by the floor.
    left = {"q1": ["a", "b", "d"], "q2": ["b", "a", "d"], "q3": ["a", "b", "d"]}
    right = {"q1": ["a", "b", "d"], "q2": ["a", "b", "d"], "q3": ["a", "b", "d", "c"]}
    result = agreement(asked, left, right, cache, floor=0.1)
    assert (result.identical, result.tie_reordered, result.differing) == (2, 1, ())
    assert result.describe("x", "y").startswith("PASS: x and y return the same list on 2/3, 1 more")
    strict = agreement(asked, left, right, cache)
    assert strict.differing == ("q3",)
    assert strict.describe("x", "y").startswith("FAIL")
    await cache.aclose()


# ------------------------------------------------------------------------------------------ the real peers

TINY_TURNS = [
    ("Ann", "I finally adopted a beagle from the shelter, his name is Biscuit."),
    ("Bo", "Congratulations! How old is Biscuit?"),
    ("Ann", "He is three and he already chewed my running shoes."),
    ("Bo", "I signed up for a pottery class on Thursday evenings."),
    ("Ann", "Pottery sounds relaxing. What are you making first?"),
    ("Bo", "A lopsided blue bowl for my grandmother."),
    ("Ann", "My locker code at the climbing gym is KX-442, remind me if I forget."),
    ("Bo", "Noted. Are you still training for the marathon in October?"),
    ("Ann", "Yes, I run twenty miles every Sunday morning."),
    ("Bo", "Thanks!"),
]
TINY_TURNS_2 = [
    ("Bo", "We booked a trip to Lisbon for the spring holidays."),
    ("Ann", "Lisbon has the best custard tarts, try Pasteis de Belem."),
    ("Bo", "My grandmother loved the blue bowl I made in pottery class."),
    ("Ann", "Biscuit learned to sit and to fetch the newspaper."),
    ("Bo", "Thanks!"),
]


def _tiny_locomo(path: Path) -> None:
    def session(turns: list[tuple[str, str]], number: int) -> list[dict[str, str]]:
        return [{"speaker": s, "dia_id": f"D{number}:{i}", "text": t} for i, (s, t) in enumerate(turns, 1)]

    sample = {
        "sample_id": "conv-tiny",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "8:00 pm on 1 May, 2023",
            "session_1": session(TINY_TURNS, 1),
            "session_2_date_time": "9:30 am on 20 June, 2023",
            "session_2": session(TINY_TURNS_2, 2),
        },
        "qa": [
            {
                "question": "What is the name of Ann's dog?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "What is Ann's locker code?",
                "answer": "KX-442",
                "evidence": ["D1:7"],
                "category": 4,
            },
            {
                "question": "What did Bo make in pottery class?",
                "answer": "a bowl",
                "evidence": ["D1:6; D2:3"],
                "category": 1,
            },
            {
                "question": "Where is Bo travelling in spring?",
                "answer": "Lisbon",
                "evidence": ["D2:1"],
                "category": 4,
            },
        ],
        "session_summary": {
            "session_1_summary": "Ann adopted Biscuit; Bo started pottery; Ann trains for a marathon.",
            "session_2_summary": "Bo is going to Lisbon; the bowl was a success; Biscuit learned tricks.",
        },
    }
    path.write_text(json.dumps([sample]), encoding="utf-8")


@pytest.mark.slow
@peer_installs
async def test_peers_map_rows_back_to_units(tmp_path: Path) -> None:
    """CPersona 2.6.14 folds a repeated turn into one row; both units must be credited for it."""
    await install_peers(CPersonaRef, Mem0)
    data_file = tmp_path / "tiny.json"
    _tiny_locomo(data_file)
    from benchmarks.quality.locomo import load_locomo

    [conv] = load_locomo(data_file).conversations
    cache = EmbeddingCache(progress=False)
    try:
        await cache.ensure([t.content for t in conv.turns] + [q.question for q in conv.questions])
        # One peer at a time: each holds task groups that must close in the order they opened.
        reference = make_peer("cpersona-2.6.14", cache)
        try:
            await reference.index(conv.conv_id, conv.turns)
            found = await reference.search(conv.conv_id, "Thanks!", 10)
            # "Bo: Thanks!" is stored once (D1:10); D2:5 repeats it and shares the row.
            assert found[:2] == ["D1:10", "D2:5"]
            assert (await reference.search(conv.conv_id, "What is Ann's locker code?", 10))[0] == "D1:7"
            stats = await reference.call("stats")
            assert stats == {"memories": len(conv.turns) - 1, "episodes": 0, "record_blocks": 0}
        finally:
            await reference.aclose()
        mem0 = make_peer("mem0", cache)
        try:
            await mem0.index(conv.conv_id, conv.turns)
            # mem0 keeps both copies as separate memories; its list is the direct cosine ranking.
            ranked = await mem0.search(conv.conv_id, "Thanks!", 10)
            assert set(ranked[:2]) == {"D1:10", "D2:5"}
            matrix = cache.lookup([t.content for t in conv.turns]).astype(np.float64)
            [query] = cache.lookup(["What is the name of Ann's dog?"]).astype(np.float64)
            cosines = (matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))).tolist()
            want = [conv.turns[i].unit_id for i in expected_ranking(cosines, 10)]
            assert await mem0.search(conv.conv_id, "What is the name of Ann's dog?", 10) == want
        finally:
            await mem0.aclose()
    finally:
        await cache.aclose()


@pytest.mark.slow
@peer_installs
def test_quick_run_with_both_peers(tmp_path: Path) -> None:
    anyio.run(install_peers, CPersonaRef, Mem0)
    from benchmarks.quality.__main__ import main

    data_file = tmp_path / "tiny.json"
    _tiny_locomo(data_file)
    args = [
        "locomo",
        "--quick",
        "--data",
        str(data_file),
        "--k",
        "10",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
    report = main([*args, "--systems", "dense,cpersona-2.6.14,mem0"])
    assert report is not None
    text = report.read_text(encoding="utf-8")
    assert "## Systems not run" not in text
    assert "| dense | cpersona-2.6.14 | mem0 |" in text
    assert "- mem0 (`infer=False`) vs the same direct cosine, cut at its default threshold: PASS: 4/4" in text
    assert "mem0 and dense return the same list on 4/4" in text
    assert "FUSED_GATE_ENABLED=False, AUTOCUT_ENABLED=False, BLOCK_BUILD_ENABLED=False" in text
    assert "hybrid extras installed: none (semantic search only)" in text
    # mem0 is dense here, cell for cell; the rows of the recall@10 table are (category, n, dense, ...).
    recall_10 = text.split("#### recall@10", 1)[1].split("####", 1)[0]
    for line in recall_10.splitlines():
        if line.startswith("| ") and not line.startswith("| category"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert cells[2] == cells[4], line
    # Sessions were indexed as a second corpus by both peers, too.
    assert "#### sessions: recall@1" in text


@pytest.mark.slow
def test_a_peer_that_cannot_install_is_listed_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.quality.__main__ import main

    missing = tmp_path / "no-such-project"
    monkeypatch.setattr(
        CPersonaRef, "venv", PeerVenv("broken-peer", (str(missing),), root=tmp_path / "peers")
    )
    data_file = tmp_path / "tiny.json"
    _tiny_locomo(data_file)
    args = [
        "locomo",
        "--quick",
        "--data",
        str(data_file),
        "--k",
        "10",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
    report = main([*args, "--systems", "dense,cpersona-2.6.14", "--no-episodes"])
    assert report is not None
    text = report.read_text(encoding="utf-8")
    assert f"- **cpersona-2.6.14**: broken-peer: pip install {missing} failed (exit 1):" in text
    # The run went on without it: dense is in the tables, the peer is not.
    assert "| category | n | dense |\n" in text


# ------------------------------------------------------------------------------------------ speed


@pytest.mark.slow
@peer_installs
def test_speed_quick_run_reports_both_systems_and_their_ratios(tmp_path: Path) -> None:
    anyio.run(install_peers, CPersonaRef)
    from benchmarks import speed_peers

    out = tmp_path / "speed.md"
    speed_peers.main(["--quick", "--sizes", "300", "--callers", "1,4", "--recalls", "6,8", "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| 300 |")]
    # Two latency rows (one per concurrency level) and one build row, all with the peer's figures.
    assert [row.split("|")[2].strip() for row in rows[:2]] == ["1", "4"]
    for row in rows[:2]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[4].count("/") == 2, row  # CPersona's p50 / p95 / p99
        assert float(cells[6].strip("*")) > 0.0  # p50 ratio
        assert float(cells[9].strip("*")) > 0.0  # throughput ratio
    assert "could not run" not in text
    returned = text.split("CPersona 2.6.14 returned ", 1)[1].split(" rows", 1)[0]
    assert 0.0 < float(returned) <= 10.0
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The trace and cue tables: every system, the six one-caller questions, positive finite ratios.
    systems = ["cpersona", "CPersona 2.6.14, seen from here", "CPersona 2.6.14, call alone"]
    trace = _cost_table(text, "### Trace", "### Time cue")
    assert [row[1] for row in trace] == systems
    cue = _cost_table(text, "| memories | system | questions | plain p50 / p95 (ms) | cued", "## Findings")
    assert [row[1] for row in cue] == systems
    for table_row in trace + cue:
        assert table_row[0] == "300", table_row
        assert table_row[2] == "6", table_row
        for cell in table_row[5:7]:
            ratio = float(cell.strip("*"))
            assert 0.0 < ratio < float("inf"), table_row
    assert trace[0][7].startswith("publish p50 ")
    # Both systems were handed the same "about 0 weeks ago" cue (the stores were built minutes ago) and
    # both applied it on every cued recall: not ignored, a period reported.
    assert '- 300 memories: cue `{"ago": {"unit": "weeks", "value": 0}, "confidence": "likely"}`' in text
    for table_row in cue:
        assert table_row[7] == "6/6", table_row
        assert float(table_row[8]) >= 0.0
        assert " to " in table_row[9], table_row
    findings = text.split("## Findings", 1)[1]
    assert "- 300 memories, one caller: a requested trace costs cpersona " in findings
    assert "a time cue costs cpersona " in findings


def _cost_table(text: str, start: str, end: str) -> list[list[str]]:
    """The cells of the rows of the first table after ``start`` and before ``end``."""
    section = text.split(start, 1)[1].split(end, 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_interleave_rotates_which_way_a_question_is_asked_first() -> None:
    from benchmarks import speed_peers

    asked: list[tuple[str, str]] = []

    async def ask(arm: speed_peers.Arm, question: str) -> speed_peers.Sample:
        asked.append((arm, question))
        return speed_peers.Sample(float(len(asked)))

    questions = [f"q{i}" for i in range(10)]
    samples = anyio.run(lambda: speed_peers.interleave(ask, questions, 4, warmup=2))
    # Warm-up: two questions from the second half, every way, not recorded.
    assert asked[:6] == [(arm, q) for q in ("q5", "q6") for arm in ("plain", "traced", "cued")]
    measured = asked[6:]
    assert [q for _, q in measured] == ["q0"] * 3 + ["q1"] * 3 + ["q2"] * 3 + ["q3"] * 3
    assert [arm for arm, _ in measured[::3]] == ["plain", "traced", "cued", "plain"]
    assert [arm for arm, _ in measured[3:6]] == ["traced", "cued", "plain"]
    assert {arm: len(found) for arm, found in samples.items()} == {"plain": 4, "traced": 4, "cued": 4}
    # Each sample is filed under the way it was asked.
    assert [s.ms for s in samples["traced"]] == [8.0, 10.0, 15.0, 17.0]


def test_time_cue_is_about_n_weeks_ago_from_the_newest_memory() -> None:
    from benchmarks import speed_peers

    now = 1_800_000_000.0
    day = 86_400.0
    weeks = [speed_peers.time_cue_for(now - days * day, now)["ago"]["value"] for days in (0, 3, 4, 10, 25)]
    assert weeks == [0, 0, 1, 1, 4]
    assert speed_peers.time_cue_for(now, now) == {
        "ago": {"unit": "weeks", "value": 0},
        "confidence": "likely",
    }
    # A clock behind the store (negative age) still asks for this week, never for the future.
    assert speed_peers.time_cue_for(now + 30 * day, now)["ago"]["value"] == 0


async def test_a_peer_without_a_trace_gets_no_traced_recalls_and_says_why() -> None:
    from benchmarks import speed_peers

    requests: list[dict[str, Any]] = []

    class OldPeer:
        takes_trace = False
        takes_time_cue = True
        hello: ClassVar[dict[str, Any]] = {"trace": {"parameter": False}}

        async def call(self, op: str, **fields: Any) -> dict[str, Any]:
            if op == "span":
                return {"memories": 3, "oldest": "2026-01-01T00:00:00+00:00", "newest": "2026-01-02T00:00:00"}
            requests.append(fields)
            return {
                "rows": [],
                "elapsed_ms": 2.0,
                "time_cue": {"policy": "p", "seated": 1, "period": ["a", "b"]},
            }

    cue = speed_peers.time_cue_for(0.0, 0.0)
    costs = await speed_peers.measure_peer_costs(OldPeer(), ["a", "b", "c"], 3, cue)  # type: ignore[arg-type]  # a fake peer
    assert not any("trace" in fields for fields in requests)
    assert [fields.get("time_cue") for fields in requests].count(cue) == len(requests) // 2
    assert set(costs.samples) == {"plain", "cued"}
    assert costs.not_offered["traced"] == (
        "not offered by 2.6.14: `memory_handlers.do_recall` has no `trace` parameter "
        "(worker hello: {'parameter': False})"
    )
    assert costs.span == "memories stored 2026-01-01 00:00:00 to 2026-01-02 00:00:00"
    assert costs.ratio("traced", 0.5) is None
    assert costs.ratio("cued", 0.5, inside=True) == 1.0

    # The report keeps the row and says why it has no figures; a failed run is listed with its error.
    from types import SimpleNamespace

    failed = speed_peers.Costs("cpersona", cue, error="RuntimeError: no trace")
    text = "\n".join(
        speed_peers.cost_sections(
            # Stand-ins for the size results: cost_sections reads only .size and .costs.
            [SimpleNamespace(size=300), SimpleNamespace(size=1000)],  # type: ignore[list-item]
            [SimpleNamespace(size=300, costs=costs)],  # type: ignore[list-item]
            {1000: failed},
        )
    )
    trace = text.split("### Trace", 1)[1].split("### Time cue", 1)[0]
    assert (
        "| 300 | CPersona 2.6.14 | not offered by 2.6.14: `memory_handlers.do_recall` has no `trace`" in trace
    )
    assert "| 1,000 | cpersona | cost runs failed: RuntimeError: no trace |" in trace
    cued = [line for line in text.splitlines() if line.startswith("| 300 | CPersona 2.6.14, call alone")]
    assert len(cued) == 1
    cells = [cell.strip() for cell in cued[0].strip("|").split("|")]
    assert cells[5:9] == ["**1.00**", "**1.00**", "3/3", "1.0"]
