"""Every ``CPERSONA_*`` setting in one frozen pydantic-settings object.

Settings are read once, at the edge (``Settings.from_env``), and then passed down as a value. No other
module reads the environment, and ``Settings(...)`` built in code reads only its arguments. A bad value
is refused at start with an error that names the variable, and so is a ``CPERSONA_*`` variable that is
no setting (a typo), so a typo never turns silently into a default.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import platformdirs
from pydantic import BeforeValidator, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from cpersona.errors import InvalidSetting

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "FIDELITY_STABILITY_HOURS",
    "EmbeddingMode",
    "FutureTimestampMode",
    "KeysMode",
    "RecallMode",
    "ReconstructSequence",
    "Settings",
]

EmbeddingMode = Literal["onnx", "none", "http", "api"]
KeysMode = Literal["auto", "on", "off"]
FutureTimestampMode = Literal["warn", "reject", "off"]
RecallMode = Literal["rrf", "rsf", "cascade"]
ReconstructSequence = Literal["items", "evidence", "whole"]

PREFIX = "CPERSONA_"
FIDELITY_STABILITY_HOURS = 24.0
# Variables of the repository's own tooling (the test suite's Redis, the golden refresh): they share the
# prefix but configure no engine, so they are not typos.
_TOOLING = ("CPERSONA_TEST_", "CPERSONA_UPDATE_GOLDEN")


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("cpersona", appauthor=False))


def _choice(value: object) -> object:
    # The choice settings are read case-insensitively, as they always were.
    return value.strip().lower() if isinstance(value, str) else value


_Positive = Annotated[float, Field(gt=0)]
_Count = Annotated[int, Field(ge=1)]


class Settings(BaseSettings):
    """The engine's configuration. Field ``x`` is read from ``CPERSONA_X``."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, frozen=True, extra="forbid", env_ignore_empty=True, validate_default=True
    )

    data_dir: Path = Field(default_factory=_default_data_dir)
    redis_url: str | None = None
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    key_prefix: str = "cpersona"
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65_535)] = 8077
    # Server processes of ``cpersona serve`` on the one port; above 1 they need the shared engines
    # (CPERSONA_REDIS_URL, and CPERSONA_QDRANT_URL unless the embedder is off).
    workers: _Count = 1
    # The running server the CLI talks to (the CLI also finds one that holds the data dir by itself).
    url: str | None = None
    # The agent of an HTTP request that names none (no agent_id, no X-Cpersona-Agent header): a server
    # serving one agent to a client without scopes (the Cerememory SDK). Unset, such a request is a 400.
    default_agent: Annotated[str, Field(min_length=1)] | None = None
    # API keys (edges/http/auth.py): "auto" asks for a key whenever the server binds beyond loopback.
    keys: Annotated[KeysMode, BeforeValidator(_choice)] = "auto"
    # A server bound beyond loopback with keys off is refused at start unless this says it is meant
    # (serve --insecure-no-keys); then it starts with a warning.
    insecure_no_keys: bool = False
    # Requests per second each key may make on average, and how many it may make at once (GCRA, kept in
    # Redis so that it holds across workers); 0 turns the limit off. No key in force, no limit.
    rate_limit_per_sec: Annotated[float, Field(ge=0)] = 50.0
    rate_limit_burst: _Count = 100
    # The key the CLI sends to a running server that asks for one (Authorization: Bearer).
    api_key: SecretStr | None = None

    embedding_mode: Annotated[EmbeddingMode, BeforeValidator(_choice)] = "onnx"
    embedding_url: str | None = None
    embedding_api_url: str = "https://api.openai.com/v1/embeddings"
    embedding_api_key: str | None = None
    embedding_api_model: str = "text-embedding-3-small"
    embedding_timeout_secs: _Positive = 30.0
    embedding_cache_size: int = 256
    embedding_cache_ttl_secs: float = 300.0
    embedding_threads: int = 2
    embedding_coalesce: bool = True

    max_content_length: _Count = 16_000
    max_metadata_length: _Count = 8_000
    max_key_length: _Count = 256
    future_timestamp_mode: Annotated[FutureTimestampMode, BeforeValidator(_choice)] = "warn"
    future_timestamp_slack_secs: float = 300.0
    batch_max: _Count = 1_000
    # One association declaration's bounds (entities, aliases per entity, relations).
    max_association_entities: _Count = 64
    max_association_aliases: _Count = 32
    max_association_relations: _Count = 128
    # The largest HTTP request body read; the server stops reading past it (413).
    max_body_bytes: _Count = 8 * 1024 * 1024
    # Slow clients (edges/http/connections.py, edges/http/body_deadline.py): a request's head must arrive
    # within this of its connection opening or the previous response ending (else the connection is
    # closed), and its body within this of its head (else 408); one worker holds at most this many
    # connections (a request on one more is a 503).
    http_header_timeout_secs: _Positive = 10.0
    http_body_timeout_secs: _Positive = 30.0
    http_max_connections: _Count = 512

    redis_timeout_secs: _Positive = 5.0
    redis_startup_timeout_secs: _Positive = 20.0
    qdrant_timeout_secs: _Positive = 10.0
    # The embedded vector engine's shards each run in a child process (their own interpreter lock);
    # false keeps them in this process, in worker threads.
    qdrant_process: bool = True

    max_memories: _Count | None = None
    # Writes are refused while an embedded store's disk has less free space than this (0: no check).
    min_free_mb: Annotated[int, Field(ge=0)] = 256

    recall_mode: Annotated[RecallMode, BeforeValidator(_choice)] = "rrf"
    recall_policy: str = "single-pass-v1"
    recall_cue_policy: str = "cued-v0.4"
    recall_cue_time_limit_ms: _Positive = 1_000.0
    recall_depth_floor: Annotated[int, Field(ge=0)] | None = None
    recall_arm_timeout_ms: _Positive = 2_000.0
    recall_max_limit: _Count = 10_000

    # reconstruct's bounds (the reference's CPERSONA_RECONSTRUCT_* variables): defaults and the soft caps
    # a request is clamped to, with the clamp reported. The hard ranges live in its request model.
    reconstruct_default_count: Annotated[int, Field(ge=0, le=100)] = 10
    reconstruct_max_count: Annotated[int, Field(ge=1, le=100)] = 10
    reconstruct_top_k: Annotated[int, Field(ge=1, le=10_000)] = 20
    reconstruct_default_budget: Annotated[int, Field(ge=1, le=20_000)] = 4_000
    reconstruct_max_budget: Annotated[int, Field(ge=1, le=20_000)] = 20_000
    reconstruct_quote_chars: Annotated[int, Field(ge=1, le=20_000)] = 800
    reconstruct_full_quotes: Annotated[int, Field(ge=0)] = 5
    reconstruct_tail_quote_chars: Annotated[int, Field(ge=1, le=20_000)] = 400
    reconstruct_excerpt_chars: Annotated[int, Field(ge=1, le=20_000)] = 500
    reconstruct_adjacency_seconds: Annotated[float, Field(ge=0)] = 60.0
    reconstruct_sequence: Annotated[ReconstructSequence, BeforeValidator(_choice)] = "items"
    # The modes' token caps (§4.1): cl100k tokens of the whole returned JSON.
    reconstruct_lite_cap: Annotated[int, Field(ge=1)] = 3_000
    reconstruct_pro_cap: Annotated[int, Field(ge=1)] = 5_000

    # The AES-256-GCM key of sealed raw entries (64 hex digits or base64 of 32 bytes). Unset, an engine with
    # an embedded Redis makes <data_dir>/sealed.key (0600) once; one on a shared Redis refuses sealed writes.
    sealed_key: SecretStr | None = None

    trace_queue_size: _Count = 1_000
    trace_sample: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    trace_sample_seed: int | None = None
    # Trace streams (GET /v1/traces/stream) one worker serves at once; each holds a Redis connection.
    trace_streams_max: _Count = 64

    # A decay tick deletes the memories it finds below the prune threshold only when this is on; off, they
    # are kept as *decayed* (hidden by the recall operations unless include_decayed).
    decay_prune: bool = False
    # The reference counts stability in seconds (a fresh memory at .086 after an hour, hidden after weeks);
    # here one unit of it lasts this long (model/fidelity.py).
    fidelity_stability_hours: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        default=FIDELITY_STABILITY_HOURS,
        description=(
            "How long one unit of a memory's stability lasts, in hours. A memory of stability S (1 when "
            "stored, about 2.5 after its first recall, 5.6 after its second) keeps (1 + t/(S*h))^-0.3 of "
            "its fidelity t hours after it was stored or last recalled. At the default (24) a memory never "
            "recalled reads 0.81 after a day, about 0.5 after nine days and 0.17 after a year, and falls "
            "below the 0.01 at which the recall operations hide it only after thousands of years; a "
            "smaller value makes memories fade faster (below 0.0019, about 7 seconds, one is hidden "
            "within a year). The reference engine's value is one second (1/3600)."
        ),
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise _invalid(exc) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only ``from_env`` reads the environment (through ``_Environ``); code that builds settings gets
        # exactly what it passed, whatever the shell exports.
        return (init_settings,)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _expand(cls, value: object) -> object:
        return Path(value).expanduser() if isinstance(value, str | Path) else value

    @model_validator(mode="after")
    def _cross_field(self) -> Settings:
        if self.embedding_mode == "http" and not self.embedding_url:
            raise InvalidSetting("CPERSONA_EMBEDDING_URL", "is required when CPERSONA_EMBEDDING_MODE=http")
        if self.embedding_mode == "api" and not self.embedding_api_key:
            raise InvalidSetting("CPERSONA_EMBEDDING_API_KEY", "is required when CPERSONA_EMBEDDING_MODE=api")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise InvalidSetting("CPERSONA_URL", "must be an http:// or https:// URL")
        if not self.key_prefix or ":" in self.key_prefix:
            raise InvalidSetting("CPERSONA_KEY_PREFIX", "must be non-empty and contain no ':'")
        agent = self.default_agent
        if agent is not None and (
            not agent.strip() or not agent.isprintable() or len(agent) > self.max_key_length
        ):
            # Checked here, not on each request: a default no request could use would refuse them all.
            raise InvalidSetting(
                "CPERSONA_DEFAULT_AGENT",
                "must be a non-blank agent id of printable characters, at most CPERSONA_MAX_KEY_LENGTH long",
            )
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Build settings from ``CPERSONA_*`` variables, then apply keyword overrides.

        Raises :class:`~cpersona.InvalidSetting` naming the variable when a value cannot be read, or
        when a ``CPERSONA_*`` variable names no setting.
        """
        env = os.environ if environ is None else environ
        _refuse_unknown(env)
        return cls(**{**_Environ(cls, env)(), **overrides})

    def with_(self, **changes: object) -> Settings:
        """A copy with ``changes`` applied, validated like any other settings."""
        return type(self)(**{**self.model_dump(), **changes})

    @property
    def embedded_redis(self) -> bool:
        return self.redis_url is None

    @property
    def embedded_qdrant(self) -> bool:
        return self.qdrant_url is None


class _Environ(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value for name, value in self._environ.items() if value != ""}


def _refuse_unknown(environ: Mapping[str, str]) -> None:
    known = {PREFIX + name.upper() for name in Settings.model_fields}
    for name in sorted(environ):
        if not name.startswith(PREFIX) or name in known or name.startswith(_TOOLING):
            continue
        near = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        raise InvalidSetting(name, f"is not a setting{hint}")


def _invalid(exc: ValidationError) -> InvalidSetting:
    """The first problem of ``exc`` as an :class:`InvalidSetting` naming its variable."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "settings"
    if error["type"] == "extra_forbidden":
        return InvalidSetting(name, "is not a setting")
    return InvalidSetting(
        PREFIX + name.upper(), f"{_problem(error['type'], error.get('ctx') or {})}; got {error['input']!r}"
    )


def _problem(kind: str, ctx: Mapping[str, object]) -> str:
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be an integer"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    bounds = {"greater_than": "more than", "greater_than_equal": "at least", "less_than_equal": "at most"}
    if kind in bounds:
        return f"must be {bounds[kind]} {next(iter(ctx.values()), '')}"
    return f"cannot be read ({kind})"
