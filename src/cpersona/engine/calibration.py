"""Calibrating an agent's gate from its own store, deterministically.

The heuristic gate compares a vector-found row's cosine with ``min_score(pool)``, which knows nothing of
the embedding model or of the agent's data. Calibration measures both: it samples the agent's memories,
embeds them, and looks for the cosine that best separates pairs that belong together (stored within
``calibrate_window_minutes`` of each other; nearest neighbours when there are too few) from random pairs,
maximising ``TPR + beta * (1 - FPR)``. ``beta`` comes from the precision: strict 2.0, balanced 1.0,
lenient 0.5.

The gate compares a question's vector with stored ones, so the pairs are measured the same way: each
sampled memory is embedded as a stored text and as a query, and a pair's cosine is the earlier memory's
query vector against the later one's stored vector. For a model without prefixes (all-MiniLM-L6-v2) the
two are the same vectors, and the cosines those of the stored texts with each other; for one with them
(multilingual-e5-small, whose ``query: `` and ``passage: `` vectors differ) this is the range the gate reads.

Decision: CPersona samples with ``ORDER BY RANDOM()``, so two installs with the same data calibrate
differently. Here the sample is drawn by a generator seeded from the agent id over the memories in
insertion order, so the same store always gives the same gate. The result is stored per agent in Redis,
selected at once, and can be switched off again (``select_gate(agent, "heuristic")``).
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from cpersona.errors import InvalidRequest
from cpersona.recall.stages.gate import separation_threshold

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.agent_requests import Gate, Precision
    from cpersona.recall.policy import Policy
    from cpersona.stores.protocols import Embedder, RecordStore, Vector

__all__ = ["calibrate", "select_gate"]

_MIN_POSITIVES = 5
_MIN_SAMPLE = 10


def _seed(agent_id: str) -> int:
    return int.from_bytes(hashlib.sha256(("calibrate:" + agent_id).encode()).digest()[:8], "big")


async def calibrate(
    records: RecordStore,
    embedder: Embedder | None,
    policy: Policy,
    agent_id: str,
    precision: Precision,
) -> dict[str, Any]:
    """Compute, store and select the agent's calibrated gate; return what was stored."""
    if embedder is None:
        raise InvalidRequest("agent_id", "calibration needs an embedder (CPERSONA_EMBEDDING_MODE is none)")
    gate = policy.gate
    beta = gate.precision_beta[precision]
    members = await records.memory_ids(agent_id)
    if len(members) < _MIN_SAMPLE:
        raise InvalidRequest(
            "agent_id", f"has {len(members)} memories; calibration needs at least {_MIN_SAMPLE}"
        )
    samples = await records.memory_samples(_sample(members, gate.calibrate_sample, agent_id))
    texts = [text for text, _ in samples]
    times = np.array([stamp for _, stamp in samples], dtype=np.float64)
    stored = await embedder.embed(texts)
    same = embedder.query_prefix == embedder.passage_prefix
    sims = _similarities(stored, stored if same else await embedder.embed_queries(texts))
    upper = np.triu_indices(len(texts), k=1)
    null = sims[upper]
    positives, positive_kind = _positives(sims, times, gate.calibrate_window_minutes * 60)
    threshold = separation_threshold(
        null, positives, beta=beta, candidates=gate.calibrate_candidates, floor=gate.calibrate_floor
    )
    doc = {
        "threshold": threshold,
        "selected": True,
        "signal": "cosine",
        "precision": precision,
        "beta": beta,
        "sample": len(texts),
        "null_pairs": int(null.size),
        "positive_pairs": int(positives.size),
        "positives": positive_kind,
        "embedder": embedder.name,
        "policy": policy.name,
        "calibrated_at": time.time(),
    }
    await records.put_calibration(agent_id, doc)
    return doc


def _sample(members: list[str], size: int, agent_id: str) -> list[str]:
    """A sample of the agent's memories drawn by a generator seeded from the agent id, in insertion order."""
    rng = np.random.default_rng(_seed(agent_id))
    picked = sorted(rng.choice(len(members), size=min(size, len(members)), replace=False).tolist())
    return [members[i] for i in picked]


def _similarities(stored: Sequence[Vector], asked: Sequence[Vector]) -> npt.NDArray[np.float64]:
    """``[i, j]``: the cosine of memory ``i`` asked as a query with memory ``j`` as stored (renormalised
    in float64)."""
    passages = _unit(stored)
    if asked is stored:
        # A model without prefixes: one matrix times its own transpose, as before queries were embedded.
        same: npt.NDArray[np.float64] = passages @ passages.T
        return same
    sims: npt.NDArray[np.float64] = _unit(asked) @ passages.T
    return sims


def _unit(embedded: Sequence[Vector]) -> npt.NDArray[np.float64]:
    vectors = np.stack(embedded).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: npt.NDArray[np.float64] = vectors / np.where(norms == 0, 1.0, norms)
    return unit


def _positives(
    sims: npt.NDArray[np.float64], times: npt.NDArray[np.float64], window_secs: float
) -> tuple[npt.NDArray[np.float64], str]:
    """The cosines of pairs that belong together: stored within the window of each other, or, when
    there are too few of those, each memory's nearest neighbour."""
    upper = np.triu_indices(len(times), k=1)
    close = np.abs(times[:, None] - times[None, :]) <= window_secs
    positives: npt.NDArray[np.float64] = sims[upper][close[upper]]
    if positives.size >= _MIN_POSITIVES:
        return positives, "temporal"
    masked = sims.copy()
    np.fill_diagonal(masked, -np.inf)
    nearest: npt.NDArray[np.float64] = masked.max(axis=1)
    return nearest, "nearest_neighbour"


async def select_gate(records: RecordStore, agent_id: str, choice: Gate) -> dict[str, Any]:
    """Switch an agent between its calibrated gate and the heuristic one."""
    stored = await records.calibration(agent_id)
    if choice == "calibrated" and not stored:
        raise InvalidRequest("gate", "this agent has no calibrated gate yet; run calibrate first")
    doc = None
    if stored:
        await records.select_calibration(agent_id, choice == "calibrated")
        doc = {**stored, "selected": choice == "calibrated"}
    return {"agent_id": agent_id, "gate": choice, "calibration": doc}
