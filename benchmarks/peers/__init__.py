"""The peers of the side-by-side benchmarks: CPersona 2.6.14 and mem0, each run as its users run it.

Each peer is installed by the benchmark into its own virtual environment under
``benchmarks/.cache/peers/`` (gitignored) from the package registry, runs in its own interpreter as a
worker subprocess (JSON lines over stdin/stdout), and gets its vectors over HTTP from a loopback server
in the benchmark process that answers from the same MiniLM embeddings the other systems use.

* :mod:`.cpersona_ref`: ``cpersona==2.6.14`` through its library API, gate pinned to its heuristic regime;
* :mod:`.mem0_peer`: ``mem0ai`` with ``infer=False``, local Qdrant, telemetry off;
* :mod:`.embed_server`: the loopback server (CPersona's ``/embed`` and an OpenAI-compatible route);
* :mod:`.checks`: whole-run agreement of two systems' rankings (mem0 against dense);
* :mod:`._venv`, :mod:`._process`, :mod:`._system`: install, worker process, shared lifecycle;
  ``_wire.py`` and the ``_*_worker.py`` scripts run inside the peers' interpreters.

Both systems implement the quality harness's ``RetrievalSystem`` protocol; anything that stops a peer is
a :class:`PeerError` whose message the reports print as it is. ``benchmarks/speed_peers.py`` times
CPersona 2.6.14 against cpersona on the same corpus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchmarks.peers._process import PeerError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from benchmarks.peers._system import PeerSystem
    from benchmarks.quality.embed_cache import EmbeddingCache

__all__ = ["PEER_MODEL", "PEER_SYSTEMS", "PeerError", "make_peer"]

PEER_SYSTEMS = ("cpersona-2.6.14", "mem0")
"""The names the quality harness accepts in ``--systems``."""
PEER_MODEL = "all-MiniLM-L6-v2"
"""The model the peers are fed the vectors of: CPersona 2.6.14's own (a run with them embeds with it)."""


def make_peer(name: str, cache: EmbeddingCache) -> PeerSystem:
    """The peer system called ``name`` (one of :data:`PEER_SYSTEMS`), fed from ``cache``."""

    async def source(texts: Sequence[str]) -> Any:
        return await cache.embed(texts, desc=f"{name}: embedding")

    if name == "cpersona-2.6.14":
        from benchmarks.peers.cpersona_ref import CPersonaRef

        return CPersonaRef(source, name=name)
    if name == "mem0":
        from benchmarks.peers.mem0_peer import Mem0

        return Mem0(source, name=name)
    raise ValueError(f"no peer called {name!r}; choose from {', '.join(PEER_SYSTEMS)}")
