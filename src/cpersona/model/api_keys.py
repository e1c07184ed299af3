"""API keys as values: the request that creates one, what is known of a key (never its secret), and the
answers of the key operations (``POST/GET /v1/keys``, ``DELETE /v1/keys/{key_id}``, ``cpersona keys``).

A key is ``cpk_<key id>_<secret>``: the id (12 hex digits) finds the stored key, the secret (32 random
bytes, URL-safe base64) proves it. Only the SHA-256 of the whole token is stored, so what Redis holds
cannot be replayed; the token is shown once, when it is made.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cpersona.errors import InvalidRequest
from cpersona.model.epoch_time import KeptTime
from cpersona.model.fields import AgentId, KeyText, RequestModel
from cpersona.model.wording import pattern_in_words

__all__ = [
    "KEY_ID_PATTERN",
    "ApiKey",
    "CreateKeyRequest",
    "CreatedKey",
    "KeyId",
    "KeyListResponse",
    "RevokedKey",
    "parse_token",
]

KEY_ID_PATTERN = pattern_in_words("^[0-9a-f]{12}$", "a key id: 12 lowercase hex digits")
KeyId = Annotated[str, Field(pattern=KEY_ID_PATTERN, description="A key id: 12 hex digits")]
_TOKEN = re.compile(r"cpk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")
MAX_KEY_AGENTS = 1_000


class CreateKeyRequest(RequestModel):
    """A key bound to ``agents`` (it reads and writes only theirs), or an admin key (every agent, and it
    may create and revoke keys and delete agents)."""

    agents: Annotated[list[AgentId], Field(max_length=MAX_KEY_AGENTS)] = Field(
        default_factory=list, description="The agents the key may act for (none for an admin key)"
    )
    admin: bool = Field(default=False, description="Every agent, and the key and agent-deletion routes")
    name: KeyText | None = Field(default=None, description="A label for people (shown by keys list)")

    @model_validator(mode="after")
    def _bound(self) -> CreateKeyRequest:
        if self.admin and self.agents:
            raise InvalidRequest("agents", "must be empty for an admin key, which acts for every agent")
        if not self.admin and not self.agents:
            raise InvalidRequest("agents", "must name at least one agent (or make an admin key)")
        if len(set(self.agents)) != len(self.agents):
            raise InvalidRequest("agents", "names an agent more than once")
        return self


class ApiKey(BaseModel):
    """What is known of a key: never its secret."""

    model_config = ConfigDict(frozen=True)

    key_id: KeyId
    name: str | None = None
    agents: tuple[str, ...] = Field(description="The agents it may act for (empty for an admin key)")
    admin: bool
    created_at: KeptTime = Field(description="When the key was made, RFC 3339 in UTC")

    @property
    def scope(self) -> frozenset[str] | None:
        """The agents as the access seam takes them: ``None`` for an admin key (every agent)."""
        return None if self.admin else frozenset(self.agents)


class CreatedKey(BaseModel):
    """A key just made: its secret ``key``, shown this once."""

    ok: bool = True
    key: str = Field(description="The bearer token: send `Authorization: Bearer <key>`; it is not kept")
    info: ApiKey


class KeyListResponse(BaseModel):
    ok: bool = True
    keys: list[ApiKey]


class RevokedKey(BaseModel):
    ok: bool = True
    key_id: str
    revoked: bool = Field(description="False when no key had that id (Python, the CLI; over HTTP a 404)")


def parse_token(token: str) -> str | None:
    """The key id of a well-formed token, else ``None`` (it is then no key of ours)."""
    found = _TOKEN.fullmatch(token)
    return found.group(1) if found else None
