"""Calibrating an agent's gate from its own store, deterministically.

The heuristic gate compares a vector-found row's cosine with ``min_score(pool)``, which knows nothing of
the embedding model or of the agent's data. Calibration measures both: it samples the agent's memories,
embeds them, and looks for the cosine that best separates pairs that belong together (stored within
``calibrate_window_minutes`` of each other; nearest neighbours when there are too few) from random pairs,
maximising ``TPR + beta * (1 - FPR)``. ``beta`` comes from the precision: strict 2.0, balanced 1.0,
lenient 0.5.

Decision: CPersona samples with ``ORDER BY RANDOM()``, so two installs with the same data calibrate
differently. Here the sample is drawn by a generator seeded from the agent id over the memories in
insertion order, so the same store always gives the same gate. The result is stored per agent in Redis,
selected at once, and can be switched off again (``select_gate(agent, "heuristic")``).
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from cpersona.errors import InvalidRequest
from cpersona.model.scope import ReadScope
from cpersona.recall.stages.gate import separation_threshold
from cpersona.stores.redis.connection import command, json_ops, redis_errors
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.recall.policy import Policy
    from cpersona.stores.protocols import Embedder
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["GateChoice", "Precision", "calibrate", "select_gate"]

Precision = Literal["strict", "balanced", "lenient"]
PRECISIONS: tuple[Precision, ...] = ("strict", "balanced", "lenient")
GateChoice = Literal["calibrated", "heuristic"]
GATE_CHOICES: tuple[GateChoice, ...] = ("calibrated", "heuristic")

_PAGE = 5_000
_MIN_POSITIVES = 5
_MIN_SAMPLE = 10


async def _memory_keys(redis: RedisClient, keys: Keys, agent_id: str) -> list[str]:
    """Every memory key of the agent, in insertion order."""
    query = scope_query(ReadScope(agent_id), with_source=False)
    out: list[str] = []
    async with redis_errors():
        while True:
            reply = await command(
                redis, "FT.SEARCH", keys.memory_index, query, "NOCONTENT", "SORTBY", "seq", "ASC",
                "LIMIT", len(out), _PAGE, "DIALECT", 2,
            )  # fmt: skip
            page = [k.decode() if isinstance(k, bytes) else str(k) for k in reply[1:]]
            out.extend(page)
            if len(page) < _PAGE:
                return out


def _seed(agent_id: str) -> int:
    return int.from_bytes(hashlib.sha256(("calibrate:" + agent_id).encode()).digest()[:8], "big")


async def calibrate(
    redis: RedisClient,
    keys: Keys,
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
    members = await _memory_keys(redis, keys, agent_id)
    if len(members) < _MIN_SAMPLE:
        raise InvalidRequest(
            "agent_id", f"has {len(members)} memories; calibration needs at least {_MIN_SAMPLE}"
        )
    rng = np.random.default_rng(_seed(agent_id))
    count = min(gate.calibrate_sample, len(members))
    picked = sorted(rng.choice(len(members), size=count, replace=False).tolist())
    chosen = [members[i] for i in picked]
    async with redis_errors():
        contents = await json_ops(redis).mget(chosen, "$.content")
        stamps = await json_ops(redis).mget(chosen, "$.ts")
    texts = [c[0] for c in contents if c]
    times = np.array([t[0] for t in stamps if t], dtype=np.float64)
    vectors = np.stack(await embedder.embed(texts)).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    sims = vectors @ vectors.T
    upper = np.triu_indices(len(texts), k=1)
    null = sims[upper]
    close = np.abs(times[:, None] - times[None, :]) <= gate.calibrate_window_minutes * 60
    positives = sims[upper][close[upper]]
    positive_kind = "temporal"
    if positives.size < _MIN_POSITIVES:
        masked = sims.copy()
        np.fill_diagonal(masked, -np.inf)
        positives = masked.max(axis=1)
        positive_kind = "nearest_neighbour"
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
    async with redis_errors():
        await json_ops(redis).set(keys.calibration(agent_id), "$", doc)
    return doc


async def select_gate(redis: RedisClient, keys: Keys, agent_id: str, choice: GateChoice) -> dict[str, Any]:
    """Switch an agent between its calibrated gate and the heuristic one."""
    async with redis_errors():
        doc = await json_ops(redis).get(keys.calibration(agent_id))
        if choice == "calibrated" and not doc:
            raise InvalidRequest("gate", "this agent has no calibrated gate yet; run calibrate first")
        if doc:
            await json_ops(redis).set(keys.calibration(agent_id), "$.selected", choice == "calibrated")
            doc["selected"] = choice == "calibrated"
    return {"agent_id": agent_id, "gate": choice, "calibration": doc or None}
