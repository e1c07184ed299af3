"""The remote embedders: CPersona's ``/embed`` contract (``http``), an OpenAI-compatible route (``api``)."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

import anyio
import httpx
import numpy as np
import orjson

from cpersona.errors import EmbedderUnavailable
from cpersona.stores.embedding.base import DEFAULT_BATCH_SIZE, BaseEmbedder, chunks, unit_vector

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from cpersona.stores.embedding.base import QueryCache
    from cpersona.stores.protocols import Vector

__all__ = ["ApiEmbedder", "HttpEmbedder"]

_ERROR_BODY_CHARS = 200
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class RemoteEmbedder(BaseEmbedder):
    """POSTs batches to an embedding service with a total deadline per request.

    httpx's own timeouts bound each connect and each read separately; the ``anyio.fail_after`` around the
    whole exchange bounds a server that trickles bytes, too.
    """

    def __init__(
        self,
        url: str,
        timeout: float,
        cache: QueryCache,
        *,
        headers: dict[str, str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        super().__init__(cache)
        if timeout <= 0:
            raise ValueError("timeout must be greater than 0")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._url = url
        self._timeout = timeout
        self._batch_size = batch_size
        self._dim = 0
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            headers={"content-type": "application/json", **(headers or {})},
            follow_redirects=False,
        )

    @property
    def dim(self) -> int:
        """The vector length of the first answer; 0 until a call has succeeded."""
        return self._dim

    @abc.abstractmethod
    def _body(self, texts: Sequence[str]) -> object: ...

    @abc.abstractmethod
    def _vectors(self, payload: object, count: int) -> list[Vector]:
        """Read ``count`` vectors from the decoded answer; raise ``ValueError`` naming what is wrong."""

    async def _encode(self, texts: Sequence[str]) -> list[Vector]:
        vectors: list[Vector] = []
        for chunk in chunks(texts, self._batch_size):
            vectors.extend(await self._embed_chunk(chunk))
        return vectors

    async def _embed_chunk(self, texts: Sequence[str]) -> list[Vector]:
        content = orjson.dumps(self._body(texts))
        try:
            with anyio.fail_after(self._timeout):
                response = await self._client.post(self._url, content=content)
        except TimeoutError:
            raise EmbedderUnavailable(f"POST {self._url}: no answer within {self._timeout:g}s") from None
        except httpx.TimeoutException as exc:
            raise EmbedderUnavailable(f"POST {self._url}: no answer within {self._timeout:g}s") from exc
        except httpx.ConnectError as exc:
            raise EmbedderUnavailable(f"POST {self._url}: cannot connect ({exc})") from exc
        except httpx.HTTPError as exc:
            raise EmbedderUnavailable(f"POST {self._url}: {type(exc).__name__}: {exc}") from exc
        if not response.is_success:
            body = response.text[:_ERROR_BODY_CHARS]
            raise EmbedderUnavailable(f"POST {self._url} answered HTTP {response.status_code}: {body}")
        try:
            vectors = self._vectors(orjson.loads(response.content), len(texts))
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise EmbedderUnavailable(f"POST {self._url} gave an unusable answer: {exc}") from exc
        width = len(vectors[0])
        if self._dim and width != self._dim:
            raise EmbedderUnavailable(
                f"POST {self._url} changed vector length from {self._dim} to {width} between calls"
            )
        self._dim = width
        return vectors

    async def aclose(self) -> None:
        self.cache.clear()
        await self._client.aclose()


def read_vectors(rows: object, count: int, where: str) -> list[npt.NDArray[np.float32]]:
    """Check ``rows`` is ``count`` equal-length, non-empty lists of finite numbers and convert them."""
    if not isinstance(rows, list):
        raise ValueError(f"{where} is not a list")
    if len(rows) != count:
        raise ValueError(f"{where} has {len(rows)} vectors for {count} texts")
    width = -1
    vectors = []
    for index, row in enumerate(rows):
        if not isinstance(row, list) or not row:
            raise ValueError(f"{where}[{index}] is not a non-empty list")
        if width == -1:
            width = len(row)
        elif len(row) != width:
            raise ValueError(f"{where}[{index}] has {len(row)} numbers, {where}[0] has {width}")
        # type() rather than isinstance(): bool is an int subclass, and true/false are not vector components.
        if not all(type(x) is float or type(x) is int for x in row):
            raise ValueError(f"{where}[{index}] holds something other than numbers")
        wide = np.asarray(row, dtype=np.float64)
        if not np.all(np.abs(wide) <= _FLOAT32_MAX):
            raise ValueError(f"{where}[{index}] holds a number out of float32 range")
        vectors.append(wide.astype(np.float32))
    return vectors


class HttpEmbedder(RemoteEmbedder):
    """CPersona's ``/embed`` contract: ``{"texts": [...]}`` in, ``{"embeddings": [[...], ...]}`` out.

    Vectors are kept exactly as the server returns them (CPersona does not normalise them either); the
    length is learned from the first answer.
    """

    def __init__(
        self, url: str, timeout: float, cache: QueryCache, *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> None:
        super().__init__(url, timeout, cache, batch_size=batch_size)

    @property
    def name(self) -> str:
        return f"http:{self._url}"

    def _body(self, texts: Sequence[str]) -> object:
        return {"texts": list(texts)}

    def _vectors(self, payload: object, count: int) -> list[Vector]:
        if not isinstance(payload, dict) or "embeddings" not in payload:
            raise ValueError("the answer has no 'embeddings' field")
        return read_vectors(payload["embeddings"], count, "embeddings")


class ApiEmbedder(RemoteEmbedder):
    """An OpenAI-compatible ``/v1/embeddings`` route: ``{"model", "input"}`` with a Bearer key.

    Results are put back in input order by their ``index`` and L2-normalised here, as CPersona does.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        model: str,
        timeout: float,
        cache: QueryCache,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        super().__init__(
            url, timeout, cache, headers={"authorization": f"Bearer {api_key}"}, batch_size=batch_size
        )
        self._model = model

    @property
    def name(self) -> str:
        return f"api:{self._model}"

    def _body(self, texts: Sequence[str]) -> object:
        return {"model": self._model, "input": list(texts)}

    def _vectors(self, payload: object, count: int) -> list[Vector]:
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            raise ValueError("the answer has no 'data' list")
        items: list[object] = payload["data"]
        by_index: dict[int, object] = {}
        for position, item in enumerate(items):
            if not isinstance(item, dict) or type(item.get("index")) is not int or "embedding" not in item:
                raise ValueError(f"data[{position}] lacks an integer 'index' or an 'embedding'")
            by_index[item["index"]] = item["embedding"]
        if sorted(by_index) != list(range(count)) or len(items) != count:
            raise ValueError(f"data indexes {sorted(by_index)} do not cover the {count} inputs once each")
        raw = read_vectors([by_index[i] for i in range(count)], count, "data[].embedding")
        return [unit_vector(vector) for vector in raw]
