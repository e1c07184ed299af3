"""The behaviour golden: a fixed corpus and question set whose full ordered output is pinned.

Changes that must not alter recall (a trace not requested, a cue not given, a refactor) are proven not to
by this file. A deliberate change of behaviour regenerates it, reviewed like code::

    CPERSONA_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_golden.py

Rows are named by the caller ids of the corpus (episodes by their position in it), so the golden does not
depend on the random record ids; scores are rounded to 4 decimals.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

import cpersona
from cpersona import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

HERE = Path(__file__).parent / "golden"
CORPUS = orjson.loads((HERE / "corpus.json").read_bytes())
# One golden per policy without a cue; each cued policy must match the one it is built on when no cue
# is given. The default policy is single-pass-v1.
GOLDENS = {"single-pass-v0": HERE / "single-pass-v0.json", "single-pass-v1": HERE / "single-pass-v1.json"}
CUED_ON = {
    "cued-v0": "single-pass-v0",
    "cued-v0.1": "single-pass-v0",
    "cued-v0.2": "single-pass-v0",
    "cued-v0.3": "single-pass-v0",
    "cued-v0.4": "single-pass-v1",
}


@pytest.fixture
async def engine(
    redis: object, redis_url: str, key_prefix: str, model_dir: Path
) -> AsyncIterator[tuple[cpersona.Engine, dict[str, str]]]:
    settings = Settings(data_dir=model_dir, redis_url=redis_url, key_prefix=key_prefix, qdrant_url=":memory:")
    agent = CORPUS["agent_id"]
    async with cpersona.open(settings, background=False) as memory:
        names: dict[str, str] = {}
        batch = await memory.store_batch([{**m, "agent_id": agent} for m in CORPUS["memories"]])
        for row, result in zip(CORPUS["memories"], batch.results, strict=True):
            names[result.ref] = row["id"]
        for n, episode in enumerate(CORPUS["episodes"]):
            result = await memory.archive_episode(agent_id=agent, **episode)
            names[result.ref] = f"episode-{n}"
        await memory.update_profile(agent, CORPUS["profile"])
        await memory.drain_blocks()
        yield memory, names


def _summary(result: cpersona.RecallResult, names: dict[str, str]) -> dict[str, Any]:
    rows = []
    for row in result.rows:
        reason = dict(row.match_reason)
        rows.append(
            {
                "row": "profile" if row.kind == "profile" else names[row.ref],
                "signal": reason.get("signal"),
                "admission": reason.get("admission"),
                "score": None if row.score is None else round(row.score, 4),
                "cosine": None if reason.get("cosine") is None else round(reason["cosine"], 4),
            }
        )
    return {
        "policy": dict(result.policy),
        "mode": result.mode,
        "depth": result.depth,
        "degraded": [d.arm for d in result.degraded],
        "rows": rows,
    }


@pytest.mark.parametrize("policy", [None, *GOLDENS])
async def test_recall_matches_the_golden(
    engine: tuple[cpersona.Engine, dict[str, str]], policy: str | None
) -> None:
    memory, names = engine
    golden = GOLDENS[policy or "single-pass-v1"]
    observed = []
    for question in CORPUS["questions"]:
        query = question["query"]
        fields = {k: v for k, v in question.items() if k != "query"}
        result = await memory.recall(query, agent_id=CORPUS["agent_id"], policy=policy, **fields)
        observed.append({"question": question, **_summary(result, names)})
    if os.environ.get("CPERSONA_UPDATE_GOLDEN") == "1" and policy is not None:
        golden.write_bytes(orjson.dumps(observed, option=orjson.OPT_INDENT_2) + b"\n")
        pytest.skip("golden regenerated; review the diff and commit it")
    expected = orjson.loads(golden.read_bytes())
    for want, got in zip(expected, observed, strict=True):
        assert got == want, want["question"]


@pytest.mark.parametrize("policy", CUED_ON)
async def test_a_cued_policy_without_a_cue_matches_the_golden(
    engine: tuple[cpersona.Engine, dict[str, str]], policy: str
) -> None:
    # Every cued policy is a single-pass policy plus a [cue] table: with no cue given, not one row may
    # differ from that policy's golden.
    memory, names = engine
    expected = orjson.loads(GOLDENS[CUED_ON[policy]].read_bytes())
    for want in expected:
        question = want["question"]
        fields = {k: v for k, v in question.items() if k != "query"}
        result = await memory.recall(question["query"], agent_id=CORPUS["agent_id"], policy=policy, **fields)
        got = {"question": question, **_summary(result, names)}
        assert got["policy"] == {**want["policy"], "process": policy}
        assert {**got, "policy": want["policy"]} == want, (policy, question)


# ------------------------------------------------------------------------------------------ reconstruct

RECONSTRUCT_GOLDEN = HERE / "reconstruct.json"


def _reconstructed(result: cpersona.ReconstructResult, names: dict[str, str]) -> dict[str, Any]:
    """What the golden pins of a reconstruct: every item's head, claims, roles and quoted spans by name."""

    def name(ref: str) -> str:
        return "profile" if ref.startswith("profile:") else names[ref]

    items = []
    for item in result.items:
        items.append(
            {
                "head": name(item.head_ref),
                "why": item.independence_reason,
                "admission": item.admission,
                "quoted": [len(item.content), item.content_len],
                "claims": [
                    {
                        "row": name(claim.ref),
                        "why": claim.why,
                        "hops": claim.hops,
                        "roles": [[name(r.ref), r.role] for r in claim.roles or ()],
                    }
                    for claim in item.claims
                ],
                "excerpts": [[name(e.ref), list(e.span)] for e in item.excerpts or ()],
            }
        )
    return {
        "effective_count": result.effective_count,
        "returned_count": result.returned_count,
        "shortfall_reason": result.shortfall_reason,
        "items": items,
    }


async def test_reconstruct_matches_its_golden(engine: tuple[cpersona.Engine, dict[str, str]]) -> None:
    # reconstruct's own behaviour golden, over the recall golden's corpus and questions.
    memory, names = engine
    observed = []
    for question in CORPUS["questions"]:
        result = await memory.reconstruct(question["query"], agent_id=CORPUS["agent_id"])
        observed.append({"query": question["query"], **_reconstructed(result, names)})
    if os.environ.get("CPERSONA_UPDATE_GOLDEN") == "1":
        RECONSTRUCT_GOLDEN.write_bytes(orjson.dumps(observed, option=orjson.OPT_INDENT_2) + b"\n")
        pytest.skip("golden regenerated; review the diff and commit it")
    expected = orjson.loads(RECONSTRUCT_GOLDEN.read_bytes())
    for want, got in zip(expected, observed, strict=True):
        assert got == want, want["query"]
