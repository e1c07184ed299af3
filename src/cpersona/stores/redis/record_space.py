"""What every role adapter of the records shares: one client, one key prefix, the redis-om model of the
profile documents bound to them (:mod:`.om_models`), and the sealer of raw entries.

Built once per engine (:meth:`RecordSpace.bind`) and handed to each adapter, so the adapters share one
bound model. The write transactions
(:class:`~.writes.Writer`, stateless) are built by the adapters that write.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.stores.redis.documents import ProfileDocument
from cpersona.stores.redis.om_models import bind

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.sealing import Sealer

__all__ = ["RecordRole", "RecordSpace"]


@dataclasses.dataclass(frozen=True, slots=True)
class RecordSpace:
    """The records of one engine in one Redis."""

    client: RedisClient
    keys: Keys
    profiles: type[ProfileDocument]
    sealer: Sealer | None = None

    @classmethod
    def bind(cls, client: RedisClient, keys: Keys, sealer: Sealer | None = None) -> RecordSpace:
        return cls(client, keys, bind(ProfileDocument, client, keys.profile), sealer)


class RecordRole:
    """The base of a role adapter: the space it works in, and its client and keys at hand."""

    def __init__(self, space: RecordSpace) -> None:
        self.space = space
        self.client = space.client
        self.keys = space.keys
