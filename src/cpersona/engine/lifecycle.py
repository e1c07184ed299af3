"""Opening and closing the engine's backends, and running its background workers.

The backends open in dependency order on one exit stack (Redis, its indexes, the embedder and the check
that the store's vectors are its model's (:mod:`~cpersona.engine.vector_model`), the vector collections,
the block builder, the trace publisher) and close in reverse, so a failure half way through closes what
was opened and nothing else. The last steps of an open sweep the writes a crash left
between their vector and their document (:func:`~cpersona.engine.vector_writes.sweep_abandoned`) and
finish the vector writes a crash left pending (:func:`~cpersona.engine.vector_writes.finish_pending`),
unless a disk is under the free-space floor: both write vectors, and a vector write on a full disk is
what kills the process, so on a tight disk they wait for the next start and the engine serves reads.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import TYPE_CHECKING

import anyio

from cpersona.engine.backends import Backends
from cpersona.engine.claims import reservation_secs
from cpersona.engine.disk import check_free_space, end_start, prepare_start
from cpersona.engine.vector_model import VectorModel, check_vector_model
from cpersona.engine.vector_writes import finish_pending, sweep_abandoned
from cpersona.engine.workers.blocks import BlockBuilder
from cpersona.errors import EngineClosed, InsufficientStorage, InvalidSetting
from cpersona.model.fidelity import FidelityCurve
from cpersona.operations.query.reconsolidation import ReconsolidationQueue
from cpersona.recall.policy import load_policies
from cpersona.recall.recaller import Recaller
from cpersona.recall.trace.publisher import TracePublisher
from cpersona.stores.backends import open_stores
from cpersona.stores.data_dir import DataDirLock
from cpersona.stores.embedding.embedders import open_embedder
from cpersona.stores.supervision import supervise as supervise_child
from cpersona.stores.vectors.edge import EdgeVectorStore
from cpersona.stores.vectors.factory import drop_vector_store, open_vector_store

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from cpersona.keys import Keys
    from cpersona.recall.arm_runner import ArmWrapper
    from cpersona.recall.policy import Policy
    from cpersona.settings import Settings
    from cpersona.stores.backends import Stores
    from cpersona.stores.protocols import Embedder, RecordStore, VectorStore

__all__ = ["Lifecycle", "checked_policies", "drain_blocks", "run_background", "run_block_worker"]

log = logging.getLogger("cpersona.engine")


def checked_policies(settings: Settings) -> dict[str, Policy]:
    """The policy files, once the two the settings name are known to exist (before any I/O)."""
    policies = load_policies()
    if settings.recall_policy not in policies:
        raise InvalidSetting("CPERSONA_RECALL_POLICY", f"names no policy file: {settings.recall_policy!r}")
    cue_policy = policies.get(settings.recall_cue_policy)
    if cue_policy is None or cue_policy.cue is None:
        raise InvalidSetting(
            "CPERSONA_RECALL_CUE_POLICY",
            f"must name a policy file with a [cue] table: {settings.recall_cue_policy!r}",
        )
    return policies


class Lifecycle:
    """Opens one engine's backends and closes them; holds them, and its recaller, while open.

    The engine's steps (:mod:`~cpersona.engine.writes`, :mod:`~cpersona.engine.reads`,
    :mod:`~cpersona.engine.deletes`) take it for what they read: the settings, keys and policies, which
    are fixed, and the backends, which exist only while the engine is open (else ``EngineClosed``).
    """

    def __init__(
        self, settings: Settings, keys: Keys, policies: dict[str, Policy], arm_wrapper: ArmWrapper | None
    ) -> None:
        self.settings = settings
        # How every reading of a memory's fidelity counts time (CPERSONA_FIDELITY_STABILITY_HOURS).
        self.curve = FidelityCurve.of(settings)
        self.keys = keys
        # The engine's own dict: a policy a tool adds to the engine reaches the recaller too.
        self.policies = policies
        self._arm_wrapper = arm_wrapper
        self._backends: Backends | None = None
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def backends(self) -> Backends:
        if self._backends is None:
            raise EngineClosed("the engine is not open; use 'async with cpersona.open(...) as memory:'")
        return self._backends

    @property
    def recaller(self) -> Recaller:
        return self.backends.recaller

    async def open(self, *, reembed: bool = False) -> None:
        """Open the backends. ``reembed`` opens a store whose vectors another model made, to make them all
        again (:mod:`~cpersona.engine.reembed`): every record is marked pending, the collections are
        emptied and the configured model is recorded before they reopen."""
        if self._stack is not None:
            raise RuntimeError("the engine is already open")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            await self._open_backends(stack, reembed=reembed)
            self._stack = stack
            # A re-embedding finishes its pending records itself, with its progress shown.
            await self._repair(finish=not reembed)
        except BaseException:
            self._backends = None
            self._stack = None
            with anyio.CancelScope(shield=True):
                await stack.aclose()
            raise

    async def _repair(self, *, finish: bool = True) -> None:
        """Sweep and (``finish``) finish what a crash left between a vector and its document, disk
        permitting."""
        try:
            await check_free_space(self.settings)
        except InsufficientStorage as exc:
            log.error("the start-up sweep of unfinished writes waits for the next start: %s", exc.detail)
            return
        await sweep_abandoned(self.backends, self._abandoned_after())
        if finish:
            await finish_pending(self.backends)

    def _abandoned_after(self) -> float:
        """How old a write in flight must be to count as abandoned at start. An embedded Redis has no
        other engine writing to it, so every write in flight at start is dead; a shared one may have
        writes of running engines in flight, which only their reservation's lapse shows dead."""
        return 0.0 if self.settings.embedded_redis else reservation_secs(self.settings)

    async def close(self) -> None:
        stack, self._stack, self._backends = self._stack, None, None
        if stack is not None:
            with anyio.CancelScope(shield=True):
                await stack.aclose()

    async def _open_backends(self, stack: contextlib.AsyncExitStack, *, reembed: bool) -> None:
        """Open every backend on ``stack`` and set ``_backends`` (the recaller among them)."""
        stores = await self._open_stores(stack)
        records = stores.records
        embedder = await open_embedder(self.settings)
        if reembed and embedder is None:
            raise InvalidSetting("CPERSONA_EMBEDDING_MODE", "is none: there is no model to re-embed with")
        vectors: VectorStore | None = None
        if embedder is not None:
            stack.push_async_callback(embedder.aclose)
            if embedder.dim == 0:
                # A remote embedder learns its vectors' length from its first answer; the collections and
                # the store's record of its model need it now.
                await embedder.embed(["cpersona"])
            if reembed:
                await self._restart_vectors(records, embedder)
            else:
                # Before the collections: a store of another model's vectors is refused in one line, not
                # by whichever collection finds another length first.
                await check_vector_model(records, embedder)
            vectors = await open_vector_store(self.settings, "records", embedder.dim)
            stack.push_async_callback(vectors.aclose)
        blocks, builder = await self._open_blocks(stack, stores, embedder, vectors)
        publisher = TracePublisher(
            stores.trace_sink,
            capacity=self.settings.trace_queue_size,
            timeout_secs=self.settings.redis_timeout_secs,
        )
        # Closed before the client (exit callbacks run last-in, first-out).
        stack.callback(publisher.close)
        reconsolidation = ReconsolidationQueue(
            stores.cues, self.curve, timeout_secs=self.settings.redis_timeout_secs
        )
        stack.callback(reconsolidation.close)
        recaller = Recaller(
            settings=self.settings,
            policies=self.policies,
            records=records,
            vectors=vectors,
            embedder=embedder,
            blocks=blocks,
            arm_wrapper=self._arm_wrapper,
        )
        self._backends = Backends(
            stores,
            vectors,
            embedder,
            recaller,
            blocks,
            builder,
            publisher=publisher,
            reconsolidation=reconsolidation,
        )

    async def _restart_vectors(self, records: RecordStore, embedder: Embedder) -> None:
        """Mark every record pending, empty both collections, record the configured model. In that order:
        a re-embedding stopped half way leaves a store of the new model whose records still to embed are
        pending, which the next start (or ``cpersona reembed`` again) finishes."""
        marked = await records.mark_all_pending(queue_blocks=True)
        for name in ("records", "blocks"):
            await drop_vector_store(self.settings, name)
        model = VectorModel.of(embedder)
        await records.record_vector_model(model.encoded(), replace=True)
        log.info("re-embedding %d records with %s", marked, model)

    async def _open_stores(self, stack: contextlib.AsyncExitStack) -> Stores:
        """The stores on Redis (:func:`~cpersona.stores.backends.open_stores`), after the data dir is locked
        and prepared when the engine keeps anything in it (its own Redis or its Qdrant shards)."""
        lock: DataDirLock | None = None
        # The embedded Qdrant shard lives in the data dir too: one engine per data dir.
        if self.settings.redis_url is None or (
            self.settings.embedded_qdrant and self.settings.embedding_mode != "none"
        ):
            lock = await stack.enter_async_context(DataDirLock(self.settings.data_dir))
            # Locked first: the reserve of a data dir is its engine's to spend.
            stack.callback(end_start, self.settings)
            await prepare_start(self.settings)
        return await open_stores(stack, self.settings, self.keys, lock=lock)

    async def _open_blocks(
        self,
        stack: contextlib.AsyncExitStack,
        stores: Stores,
        embedder: Embedder | None,
        vectors: VectorStore | None,
    ) -> tuple[VectorStore | None, BlockBuilder | None]:
        """The block collection and its builder; none without an embedder (no vectors, no blocks)."""
        if embedder is None:
            return None, None
        blocks = await open_vector_store(self.settings, "blocks", embedder.dim, binary_quantized=True)
        stack.push_async_callback(blocks.aclose)
        rules = self.policies[self.settings.recall_policy].blocks
        builder = BlockBuilder(
            records=stores.records,
            queue=stores.block_queue,
            blocks=blocks,
            embedder=embedder,
            max_per_record=rules.max_per_record,
            max_chars=rules.max_chars,
            redis_timeout_secs=self.settings.redis_timeout_secs,
            guard=functools.partial(check_free_space, self.settings),
            record_vectors=vectors,
        )
        await builder.ensure_group()
        # Runs before the client closes (exit callbacks run last-in, first-out).
        stack.push_async_callback(builder.release)
        return blocks, builder


async def run_block_worker(b: Backends, task_status: TaskStatus[None]) -> None:
    """Build block vectors until cancelled; report started at once when the engine builds none."""
    builder = b.builder
    if builder is None:
        task_status.started()
        return
    await builder.run(task_status=task_status)


async def drain_blocks(b: Backends) -> int:
    builder = b.builder
    return 0 if builder is None else await builder.drain()


async def run_background(b: Backends, task_status: TaskStatus[None]) -> None:
    """The engine's workers (block builder, trace publisher, the supervisors of the embedded Redis and of
    the vector shards' child processes) in one task group, until cancelled."""
    async with anyio.create_task_group() as tg:
        await tg.start(b.stores.supervise)
        for store, recover in ((b.vectors, functools.partial(_finish_pending, b)), (b.blocks, None)):
            # A block write that failed stays queued and the block worker retries it by itself.
            if isinstance(store, EdgeVectorStore) and store.process_id is not None:
                what = f"the process of {store.label}"
                await tg.start(functools.partial(supervise_child, store, what, recover=recover))
        await tg.start(run_block_worker, b)
        await tg.start(b.trace_publisher.run)
        if b.reconsolidation is not None:
            await tg.start(b.reconsolidation.run)
        task_status.started()


async def _finish_pending(b: Backends) -> None:
    """After the records' shard came back: write the vectors the stores made during its outage left
    pending, so recall stops missing them."""
    await finish_pending(b)
