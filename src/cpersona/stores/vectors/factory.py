"""Opening a vector store: the adapter is picked from the settings.

The embedded Qdrant engine (``qdrant-edge``, on disk under ``<data_dir>/qdrant/<name>``) when
``CPERSONA_QDRANT_URL`` is unset, a Qdrant server through ``qdrant-client`` otherwise (``:memory:`` selects
the client's in-process local mode, which the tests use as the stand-in for a server).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import anyio.to_thread

from cpersona.errors import InvalidSetting, VectorStoreUnavailable

if TYPE_CHECKING:
    from cpersona.settings import Settings
    from cpersona.stores.protocols import VectorStore

__all__ = ["drop_vector_store", "open_vector_store"]


async def open_vector_store(
    settings: Settings, name: str, dim: int, *, binary_quantized: bool = False
) -> VectorStore:
    """Open (creating if absent) the collection ``name`` of ``dim``-d cosine vectors.

    Embedded ``qdrant-edge`` when ``settings.qdrant_url`` is ``None``; otherwise a Qdrant server at that
    URL, or the client's in-process local mode for ``":memory:"``. ``binary_quantized`` keeps a 1-bit
    copy of the vectors for the first search pass and rescores its candidates with the originals.
    Close the store with ``aclose()``.

    Raises :class:`~cpersona.VectorStoreUnavailable` when the backend cannot be opened within
    ``qdrant_timeout_secs`` or holds the collection with a different dimension, and
    :class:`~cpersona.InvalidSetting` for a URL that is neither ``http(s)://...`` nor ``:memory:``.
    """
    # The adapters are imported here, not at the top: qdrant-client takes over a second to import and an
    # embedded setup never needs it, while a server setup never needs the Rust engine.
    if settings.qdrant_url is None:
        from cpersona.stores.vectors.edge import EdgeVectorStore

        return await EdgeVectorStore.open(
            settings.data_dir / "qdrant",
            name,
            dim,
            timeout_secs=settings.qdrant_timeout_secs,
            binary_quantized=binary_quantized,
            process=settings.qdrant_process,
        )
    url = settings.qdrant_url.strip()
    if url != ":memory:" and not url.lower().startswith(("http://", "https://")):
        raise InvalidSetting(
            "CPERSONA_QDRANT_URL", f"must be an http:// or https:// URL or ':memory:'; got {url!r}"
        )
    from cpersona.stores.vectors.remote import RemoteVectorStore

    return await RemoteVectorStore.open(
        url,
        name,
        dim,
        api_key=settings.qdrant_api_key,
        timeout_secs=settings.qdrant_timeout_secs,
        binary_quantized=binary_quantized,
    )


async def drop_vector_store(settings: Settings, name: str) -> None:
    """Delete the collection ``name`` with every vector in it, if it exists (a re-embedding starts the
    collections again, since another model's vectors may have another length).

    Raises :class:`~cpersona.VectorStoreUnavailable` when a Qdrant server cannot delete it.
    """
    if settings.qdrant_url is None:
        # The engine holds the data dir's lock and has not opened the shard: nothing else reads it.
        shard = settings.data_dir / "qdrant" / name
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(shard, ignore_errors=True))
        return
    url = settings.qdrant_url.strip()
    if url == ":memory:":
        return  # each open of the in-process engine starts empty
    from cpersona.stores.vectors.remote_client import new_client

    client = await anyio.to_thread.run_sync(
        new_client, url, settings.qdrant_api_key, settings.qdrant_timeout_secs
    )
    try:
        with anyio.fail_after(settings.qdrant_timeout_secs):
            await client.delete_collection(name)
    except Exception as exc:
        raise VectorStoreUnavailable(f"cannot delete the vector collection {name!r} at {url}: {exc}") from exc
    finally:
        await client.close()
