"""Every Redis key, index and channel name, in one place.

All names start with the configured prefix (``CPERSONA_KEY_PREFIX``, default ``cpersona``) so that
several deployments, or parallel test runs, can share one Redis. No other module spells out a key.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Keys"]


@dataclasses.dataclass(frozen=True, slots=True)
class Keys:
    prefix: str = "cpersona"

    # Records (RedisJSON documents) and their search indexes.
    def memory(self, record_id: str) -> str:
        return f"{self.prefix}:mem:{record_id}"

    def episode(self, record_id: str) -> str:
        return f"{self.prefix}:ep:{record_id}"

    def raw(self, record_id: str) -> str:
        return f"{self.prefix}:raw:{record_id}"

    def profile(self, agent_id: str) -> str:
        return f"{self.prefix}:profile:{agent_id}"

    @property
    def memory_prefix(self) -> str:
        return f"{self.prefix}:mem:"

    @property
    def episode_prefix(self) -> str:
        return f"{self.prefix}:ep:"

    @property
    def raw_prefix(self) -> str:
        return f"{self.prefix}:raw:"

    @property
    def memory_index(self) -> str:
        return f"{self.prefix}:idx:mem"

    @property
    def episode_index(self) -> str:
        return f"{self.prefix}:idx:ep"

    @property
    def raw_index(self) -> str:
        return f"{self.prefix}:idx:raw"

    # Counters and bookkeeping.
    @property
    def sequence(self) -> str:
        """INCR counter handing out insertion sequence numbers (shared by memories and episodes)."""
        return f"{self.prefix}:seq"

    @property
    def vector_pending(self) -> str:
        """Set of record keys written to Redis whose vector is not yet confirmed in Qdrant."""
        return f"{self.prefix}:pending:vector"

    @property
    def writes_in_flight(self) -> str:
        """Sorted set of writes whose claims are taken and whose document is not yet written (by start)."""
        return f"{self.prefix}:inflight:writes"

    def agent_fence(self, agent_id: str) -> str:
        """How many deletes of one agent's data are under way (a counter whose short lifetime each of them
        renews): while it exists, every record write of the agent is refused."""
        return f"{self.prefix}:fence:{_part(agent_id)}"

    def agent_fence_seq(self, agent_id: str) -> str:
        """The insertion sequence number at which the agent's latest delete began or ended (with a
        lifetime): a record of the agent numbered at or below it was begun before that delete, and is
        refused."""
        return f"{self.prefix}:fence-seq:{_part(agent_id)}"

    def reconsolidated(self, request_id: str, record_id: str) -> str:
        """Marker (with a TTL) that one recall.query request strengthened one memory: a repeat of the
        request (same request id) finds it and strengthens nothing again."""
        return f"{self.prefix}:recon:{_part(request_id)}:{record_id}"

    def msg_id_claim(self, agent_id: str, project_id: str, msg_id: str) -> str:
        """Dedup claim for a caller id within agent and project (value: the record id)."""
        return f"{self.prefix}:dedup:msg:{_part(agent_id)}:{_part(project_id)}:{_part(msg_id)}"

    def content_claim(self, agent_id: str, project_id: str, channel: str, digest: str) -> str:
        """Dedup claim for identical content within agent, project and channel (value: the record id)."""
        return f"{self.prefix}:dedup:content:{_part(agent_id)}:{_part(project_id)}:{_part(channel)}:{digest}"

    def claims_of_agent(self, agent_id: str) -> tuple[str, str]:
        """SCAN glob patterns matching every dedup claim of one agent (and no other agent's)."""
        part = _glob_escape(_part(agent_id))
        return (f"{self.prefix}:dedup:msg:{part}:*", f"{self.prefix}:dedup:content:{part}:*")

    def calibration(self, agent_id: str) -> str:
        """The agent's calibrated gate and whether it is selected (a JSON document)."""
        return f"{self.prefix}:calib:{_part(agent_id)}"

    # The associative layer: every key of one agent's graph starts with ``assoc_agent``.
    def assoc_agent(self, agent_id: str) -> str:
        return f"{self.prefix}:assoc:{_part(agent_id)}"

    def assoc_scopes(self, agent_id: str) -> str:
        """Set of the ``[project, channel]`` pairs (JSON) where the agent declared associations."""
        return f"{self.assoc_agent(agent_id)}:scopes"

    def assoc_entities(self, agent_id: str, project_id: str, channel: str) -> str:
        """Hash of one scope's entities: name key → the name as first declared."""
        return f"{self.assoc_agent(agent_id)}:ent:{_part(project_id)}:{_part(channel)}"

    def assoc_aliases(self, agent_id: str, project_id: str, channel: str) -> str:
        """Hash of one scope's aliases: ``[alias key, entity key]`` (JSON) → the alias as declared."""
        return f"{self.assoc_agent(agent_id)}:alias:{_part(project_id)}:{_part(channel)}"

    def assoc_mentions(self, agent_id: str, project_id: str, channel: str, entity: str) -> str:
        """Set of the refs of the records that mention one entity, declared in one scope."""
        return f"{self.assoc_agent(agent_id)}:men:{_part(project_id)}:{_part(channel)}:{_part(entity)}"

    def assoc_relations(self, agent_id: str, project_id: str, channel: str, entity: str) -> str:
        """Set of one entity's relations in one scope: ``[direction, predicate, other entity]`` (JSON)."""
        return f"{self.assoc_agent(agent_id)}:rel:{_part(project_id)}:{_part(channel)}:{_part(entity)}"

    def assoc_record(self, agent_id: str, ref: str) -> str:
        """Set of what is declared about one record: its mentions and its record relations (JSON)."""
        return f"{self.assoc_agent(agent_id)}:rec:{ref}"

    def assoc_of_agent(self, agent_id: str) -> str:
        """SCAN glob pattern matching every association key of one agent (and no other agent's)."""
        return f"{self.prefix}:assoc:{_glob_escape(_part(agent_id))}:*"

    # API keys and rate limits (edges/http/auth.py).
    def api_key(self, key_id: str) -> str:
        """One API key: its SHA-256 digest, agents, name and admin flag (a JSON document, redis-om's)."""
        return f"{self.prefix}:apikey:{key_id}"

    @property
    def api_key_ids(self) -> str:
        """Set of the ids of every API key."""
        return f"{self.prefix}:apikeys"

    def rate_limit(self, subject: str) -> str:
        """The rate limiter's state for one key id (its theoretical arrival time, GCRA)."""
        return f"{self.prefix}:ratelimit:{_part(subject)}"

    @property
    def vector_model(self) -> str:
        """The embedding model the store's vectors were made with: its name and dimension (JSON)."""
        return f"{self.prefix}:vector-model"

    @property
    def schema_version(self) -> str:
        return f"{self.prefix}:schema"

    # Streams and channels.
    @property
    def block_stream(self) -> str:
        """Stream of 'build blocks for this record' events consumed by the block worker."""
        return f"{self.prefix}:stream:blocks"

    @property
    def block_group(self) -> str:
        """The consumer group of the block workers on :attr:`block_stream`."""
        return f"{self.prefix}:block-builders"

    def trace_channel(self, agent_id: str) -> str:
        return f"{self.prefix}:trace:{agent_id}"

    @property
    def trace_pattern(self) -> str:
        return f"{self.prefix}:trace:*"


def _part(value: str) -> str:
    # Key parts are caller text: escape the separator so 'a:b' + 'c' never collides with 'a' + 'b:c'.
    return value.replace("%", "%25").replace(":", "%3A")


def _glob_escape(value: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in value)
