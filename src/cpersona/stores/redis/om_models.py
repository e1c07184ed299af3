"""redis-om's JSON models (``aredis_om.JsonModel``) bound to one engine's Redis client and key names.

A record kind that is one plain JSON document under one key (a profile, an API key) is declared as a
``JsonModel`` subclass of its record (:class:`~.documents.ProfileDocument`,
:class:`~.api_keys.ApiKeyDocument`), and redis-om reads, writes and deletes it (``get``, ``save``,
``delete``). redis-om keeps a model's connection and key prefix on the class (``Meta``), so each engine
gets its own subclass of every such model from :func:`bind`, built when the engine opens:

- ``Meta.database`` is the engine's client (:func:`~.connection.new_client`), so every call redis-om makes
  has the client's deadlines and is closed with the engine. The declared models hold :data:`UNBOUND`
  there instead, so that a model used before it is bound fails at once rather than reach for the default
  client redis-om would otherwise build (``localhost:6379``, no deadline).
- The key of a document is named by :class:`~cpersona.keys.Keys` (``make_key`` is overridden with the
  name's method), not by redis-om's ``<global prefix>:<model prefix>:<pk>``, so keys stay where they were.
- redis-om gives a document a key only if its model is declared ``index=True`` (``key()`` refuses
  otherwise); that flag also lists the model for redis-om's ``Migrator``, which is never run here (the
  search indexes are :mod:`.indexes`, and these documents are read by key, never searched), so the
  bound model is taken off that list again, and no index is made for it.

Every such model derives from :class:`JsonDocument`, not from ``JsonModel`` itself: ``JsonModel.__init__``
calls redis-om's ``has_redis_json`` probe, an ``async`` function (cached per client by ``lru_cache``),
without awaiting it, which leaves a coroutine that never runs and is reported when the process exits.
pydantic runs a model's own ``__init__`` from ``model_validate`` too, so no way of making an instance
avoids it; :class:`JsonDocument` skips it. The probe has nothing to find out here:
:func:`~.connection.connect_redis` refuses a Redis without RedisJSON before any engine opens.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from aredis_om import JsonModel, RedisModel
from aredis_om.model.model import model_registry

if TYPE_CHECKING:
    from collections.abc import Callable

    from cpersona.stores.redis.connection import RedisClient

__all__ = ["UNBOUND", "JsonDocument", "bind"]

Model = TypeVar("Model")


class _Unbound:
    """The ``Meta.database`` of a declared model: any use says it was not bound to a client."""

    def __getattr__(self, name: str) -> NoReturn:
        raise RuntimeError("a redis-om model was used before it was bound to an engine's client")


UNBOUND: Any = _Unbound()


class JsonDocument(JsonModel):
    """redis-om's ``JsonModel`` without the ``has_redis_json`` probe of its ``__init__`` (see the module)."""

    class Meta:
        database = UNBOUND

    def __init__(self, **data: Any) -> None:
        # What JsonModel.__init__ does after its probe.
        RedisModel.__init__(self, **data)


def bind(model: type[Model], client: RedisClient, key_of: Callable[[str], str]) -> type[Model]:
    """A subclass of the JSON model ``model`` that reads and writes through ``client``, its document of
    primary key ``pk`` kept under ``key_of(pk)``."""

    class Meta:
        database = client

    def body(namespace: dict[str, Any]) -> None:
        namespace["Meta"] = Meta
        namespace["make_key"] = classmethod(lambda _cls, part: key_of(part))
        namespace["__module__"] = model.__module__

    bound = types.new_class(model.__name__, (model,), {"index": True}, body)
    model_registry.pop(f"{bound.__module__}.{bound.__qualname__}", None)
    return bound
