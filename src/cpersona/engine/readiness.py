"""Whether the engine can serve now, component by component: Redis, each vector collection, the embedder.

A component is ``up``, ``down`` or ``off`` (the engine runs without it: no embedder, no vectors). Redis is
asked (a ping); a vector collection says whether its shard can answer (an embedded shard's child process
is running: while its supervisor restarts it, it is down); the embedder runs in this process and is up
whenever the engine has one. The engine is ready when nothing is down. Beside the components, the write
mode: ``read-only`` while writes are refused for want of disk (:mod:`~cpersona.engine.disk`; reads go on,
so the engine is still ready), else ``read-write``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from cpersona.engine.disk import WriteMode, write_mode
from cpersona.errors import BackendUnavailable, VectorStoreUnavailable

if TYPE_CHECKING:
    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.stores.protocols import VectorStore

__all__ = ["ComponentState", "Readiness", "readiness"]

ComponentState = Literal["up", "down", "off"]


@dataclasses.dataclass(frozen=True, slots=True)
class Readiness:
    """Each component's state (``redis``, ``vectors.records``, ``vectors.blocks``, ``embedder``), and the
    failure of the first one that is down (``None``: ready)."""

    components: dict[str, ComponentState]
    failure: BackendUnavailable | None
    mode: WriteMode = "read-write"

    @property
    def ready(self) -> bool:
        return self.failure is None


def _vector_state(store: VectorStore | None) -> ComponentState:
    if store is None:
        return "off"
    # Duck-typed like optimize(): only the embedded adapter has a process of its own to lose; the remote
    # one is asked by its calls.
    return "up" if getattr(store, "available", True) else "down"


async def readiness(life: Lifecycle) -> Readiness:
    b = life.backends
    components: dict[str, ComponentState] = {}
    failure: BackendUnavailable | None = None
    try:
        await b.records.ping()
        components["redis"] = "up"
    except BackendUnavailable as exc:
        components["redis"], failure = "down", exc
    for name, store in (("records", b.vectors), ("blocks", b.blocks)):
        state = components[f"vectors.{name}"] = _vector_state(store)
        if state == "down" and failure is None:
            failure = VectorStoreUnavailable(f"the {name} collection's shard is down (being restarted)")
    components["embedder"] = "off" if b.embedder is None else "up"
    return Readiness(components, failure, await write_mode(life.settings))
