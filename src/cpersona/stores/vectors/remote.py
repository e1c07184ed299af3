"""The vector store on a Qdrant server, through ``qdrant-client``'s ``AsyncQdrantClient``.

One store is one collection of cosine vectors. Opening it checks that the server answers, creates the
collection when absent (or checks its dimension when present) and creates the missing payload indexes.
Every request carries the client's HTTP timeout and runs under an ``anyio.fail_after`` deadline of the
same length, so an unreachable or stalled server gives :class:`~cpersona.VectorStoreUnavailable` instead
of a hang. Writes are sent with ``wait=True``: they return once the server has applied them, and are as
durable as the server's write-ahead log makes them.

``url=":memory:"`` selects the client's in-process local mode, the tests' stand-in for a server. That
mode searches exactly (by brute force) and keeps no payload indexes or quantised vectors; it warns when
asked for either, so search parameters are not sent to it and its index warning is silenced.

Making the client and turning filters and index kinds into the client's models is :mod:`.remote_client`.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
from qdrant_client import AsyncQdrantClient, models

from cpersona.errors import VectorStoreUnavailable
from cpersona.stores.vectors.common import (
    BQ_OVERSAMPLING,
    HIT_FIELDS,
    PAYLOAD_INDEXES,
    IndexKind,
    chunked,
    finite_timeout,
    hit_from_payload,
    matches_nothing,
    point_id,
    prepare_points,
    query_vector,
    stored_vector,
    top_hits,
    validate_collection,
)
from cpersona.stores.vectors.remote_client import display_url, index_schema, new_client, remote_filter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from types import TracebackType

    from cpersona.stores.protocols import Vector, VectorFilter, VectorHit, VectorPoint

__all__ = ["RemoteVectorStore"]

_T = TypeVar("_T")

_WRITE_CHUNK = 256
"""Points per upsert request: keeps each request well inside the deadline and the server's body limit."""

_IDS_PER_REQUEST = 1024
"""Ids per retrieve or delete request."""

_LOCAL_INDEX_WARNING = "Payload indexes have no effect in the local Qdrant"


class RemoteVectorStore:
    """A :class:`~cpersona.stores.protocols.VectorStore` on one collection of a Qdrant server.

    Use :meth:`open`."""

    def __init__(
        self,
        client: AsyncQdrantClient,
        *,
        owns_client: bool,
        url: str,
        name: str,
        dim: int,
        timeout_secs: float,
        binary_quantized: bool,
    ) -> None:
        self._client = client
        self._owns_client = owns_client
        self._local = url == ":memory:"
        self._where = url if self._local else display_url(url)
        self._name = name
        self._dim = dim
        self._timeout = timeout_secs
        self._binary_quantized = binary_quantized
        self._engine_name = "qdrant-client local :memory:" if self._local else f"qdrant-server {self._where}"
        self._label = f"vector collection {name!r} on {self._where}"
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        name: str,
        dim: int,
        *,
        api_key: str | None = None,
        timeout_secs: float = 10.0,
        binary_quantized: bool = False,
        client: AsyncQdrantClient | None = None,
    ) -> RemoteVectorStore:
        """Connect to the server at ``url`` (or ``":memory:"``) and open the collection ``name``.

        Creates the collection (``dim``-d, cosine) when absent and the missing payload indexes.
        ``binary_quantized`` makes a new collection keep a 1-bit copy of the vectors, adds one to an
        existing collection that has none, and makes searches rescore the 1-bit candidates with the
        original vectors. ``client`` shares one client (one connection pool) between collections: it
        must point at ``url``, and the store leaves it open when it closes. Raises
        :class:`~cpersona.VectorStoreUnavailable` when the server does not answer within
        ``timeout_secs`` or holds the collection with another dimension or metric.
        """
        validate_collection(name, dim)
        timeout = finite_timeout(timeout_secs)
        owns_client = client is None
        if client is None:
            # Building the client loads the TLS certificates from disk: in a worker thread.
            client = await anyio.to_thread.run_sync(new_client, url, api_key, timeout)
        store = cls(
            client,
            owns_client=owns_client,
            url=url,
            name=name,
            dim=dim,
            timeout_secs=timeout,
            binary_quantized=binary_quantized,
        )
        try:
            await store._prepare()
        except BaseException:
            # Release the connection pool whatever went wrong; the original error is the one to report.
            with anyio.CancelScope(shield=True), contextlib.suppress(VectorStoreUnavailable):
                await store.aclose()
            raise
        return store

    async def _prepare(self) -> None:
        if not self._local:
            version = await self._run("server version", self._client.info)
            self._engine_name = f"qdrant-server {version.version} {self._where}"
        if not await self._run(
            "collection lookup", functools.partial(self._client.collection_exists, self._name)
        ):
            await self._create_collection()
        info = await self._run("collection info", functools.partial(self._client.get_collection, self._name))
        params = info.config.params.vectors
        if not (
            isinstance(params, models.VectorParams)
            and params.size == self._dim
            and params.distance == models.Distance.COSINE
        ):
            raise VectorStoreUnavailable(
                f"{self._label} already exists with a different vector configuration than the {self._dim}-d "
                f"cosine vectors requested (a different embedding model?); use another collection name or "
                f"delete the collection. Found: {params!r}"
            )
        if self._binary_quantized and not self._local and info.config.quantization_config is None:
            await self._run(
                "enable quantisation",
                functools.partial(
                    self._client.update_collection, self._name, quantization_config=self._quantization()
                ),
            )
        present = set(info.payload_schema)
        for key, kind in PAYLOAD_INDEXES.items():
            if key not in present:
                await self._create_index(key, kind)

    def _quantization(self) -> models.BinaryQuantization:
        return models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))

    async def _create_collection(self) -> None:
        create = functools.partial(
            self._client.create_collection,
            self._name,
            vectors_config=models.VectorParams(size=self._dim, distance=models.Distance.COSINE),
            quantization_config=self._quantization() if self._binary_quantized else None,
        )
        try:
            await self._run("create collection", create)
        except VectorStoreUnavailable:
            # Another worker may have created it between the lookup and the create.
            if not await self._run(
                "collection lookup", functools.partial(self._client.collection_exists, self._name)
            ):
                raise

    async def _create_index(self, key: str, kind: IndexKind) -> None:
        create = functools.partial(
            self._client.create_payload_index, self._name, key, field_schema=index_schema(kind), wait=True
        )
        if not self._local:
            await self._run(f"create payload index {key!r}", create)
            return
        # The local mode records the index and warns that it has no effect. Nothing awaits inside that
        # call, so the filter below cannot leak into another task.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_LOCAL_INDEX_WARNING, category=UserWarning)
            await self._run(f"create payload index {key!r}", create)

    @property
    def engine_name(self) -> str:
        return self._engine_name

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def binary_quantized(self) -> bool:
        return self._binary_quantized

    async def __aenter__(self) -> RemoteVectorStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self, what: str, call: Callable[[], Awaitable[_T]]) -> _T:
        """Make one request under the deadline, mapping every failure to ``VectorStoreUnavailable``."""
        if self._closed:
            raise VectorStoreUnavailable(f"{what} on {self._label}: the store is closed")
        # Every call is a cancellation point, also in the local mode, whose calls never suspend.
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            with anyio.fail_after(self._timeout):
                return await call()
        except VectorStoreUnavailable:
            raise
        except TimeoutError as exc:
            raise VectorStoreUnavailable(
                f"{what} on {self._label} got no answer within {self._timeout}s"
            ) from exc
        except Exception as exc:
            raise VectorStoreUnavailable(f"{what} on {self._label} failed: {exc}") from exc

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points; applied by the server when it returns (``wait=True``).

        A batch larger than one request is sent in chunks; if a later chunk fails, the earlier ones
        stay written (upserting the same points again is harmless).
        """
        prepared = prepare_points(points, self._dim)
        for chunk in prepared.chunks(_WRITE_CHUNK):
            structs = [
                models.PointStruct(id=pid, vector=vector, payload=payload)
                for pid, vector, payload in chunk.rows()
            ]
            await self._run(
                "upsert", functools.partial(self._client.upsert, self._name, points=structs, wait=True)
            )

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points by id; unknown ids are ignored."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        for chunk in chunked(wanted, _IDS_PER_REQUEST):
            selector = models.PointIdsList(points=list(chunk))
            await self._run(
                "delete",
                functools.partial(self._client.delete, self._name, points_selector=selector, wait=True),
            )

    async def delete_where(self, flt: VectorFilter) -> None:
        """Delete every point that matches the filter."""
        if matches_nothing(flt):
            return
        selector = models.FilterSelector(filter=remote_filter(flt))
        await self._run(
            "delete by filter",
            functools.partial(self._client.delete, self._name, points_selector=selector, wait=True),
        )

    async def search(
        self, vector: Vector, flt: VectorFilter, limit: int, *, open_tail: bool = False
    ) -> list[VectorHit]:
        """The ``limit`` nearest points that match ``flt``, best first (ties: lower ``seq`` first)."""
        if limit < 0:
            raise ValueError(f"search limit must be at least 0, got {limit}")
        vector_list = query_vector(vector, self._dim)
        if limit == 0 or matches_nothing(flt):
            return []
        server_filter = remote_filter(flt)
        params = (
            models.SearchParams(
                quantization=models.QuantizationSearchParams(rescore=True, oversampling=BQ_OVERSAMPLING)
            )
            if self._binary_quantized and not self._local
            else None
        )

        async def query(n: int) -> list[VectorHit]:
            response = await self._client.query_points(
                self._name,
                query=vector_list,
                query_filter=server_filter,
                search_params=params,
                limit=n,
                with_payload=list(HIT_FIELDS),
                with_vectors=False,
            )
            return [hit_from_payload(p.id, p.score, p.payload) for p in response.points]

        async def fetch(n: int) -> list[VectorHit]:
            return await self._run("search", functools.partial(query, n))

        return await top_hits(fetch, limit, open_tail=open_tail)

    async def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids have a point (in canonical UUID form)."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        found: set[str] = set()
        for chunk in chunked(wanted, _IDS_PER_REQUEST):
            records = await self._run(
                "existing",
                functools.partial(
                    self._client.retrieve, self._name, list(chunk), with_payload=False, with_vectors=False
                ),
            )
            found.update(point_id(str(record.id)) for record in records)
        return found

    async def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored (unit-length) vectors of those of these ids that have a point."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        found: dict[str, Vector] = {}
        for chunk in chunked(wanted, _IDS_PER_REQUEST):
            records = await self._run(
                "retrieve",
                functools.partial(
                    self._client.retrieve, self._name, list(chunk), with_payload=False, with_vectors=True
                ),
            )
            found.update((point_id(str(r.id)), stored_vector(r.vector, self._dim)) for r in records)
        return found

    async def count(self, flt: VectorFilter) -> int:
        """How many points match the filter (exact)."""
        if matches_nothing(flt):
            return 0
        result = await self._run(
            "count",
            functools.partial(self._client.count, self._name, count_filter=remote_filter(flt), exact=True),
        )
        return result.count

    async def count_all(self) -> int:
        """How many points the collection holds (exact)."""
        result = await self._run("count", functools.partial(self._client.count, self._name, exact=True))
        return result.count

    async def aclose(self) -> None:
        """Close the client's connections, unless the client was passed in. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._owns_client:
            return
        try:
            # Shielded: a cancelled caller must still release the connection pool.
            with anyio.fail_after(self._timeout, shield=True):
                await self._client.close()
        except TimeoutError as exc:
            raise VectorStoreUnavailable(f"closing the client for {self._label} timed out") from exc
        except Exception as exc:
            raise VectorStoreUnavailable(f"closing the client for {self._label} failed: {exc}") from exc
