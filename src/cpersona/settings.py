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

from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS, embedding_model
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
RecallMode = Literal["rrf", "rsf", "informed", "cascade"]
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

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the embedded Redis and vector shards keep their data, beside the engine's lock "
        "and the sealing key (default: the user data directory, `~/.local/share/cpersona` on Linux); "
        "owner-only, repaired when an engine opens it",
    )
    redis_url: str | None = Field(
        None,
        description="An external Redis 7.2+ with the query engine and JSON (`redis://`, `rediss://`, "
        "`unix://`) instead of the embedded one; it must fsync an append-only file",
    )
    qdrant_url: str | None = Field(
        None,
        description="A Qdrant server (`http://host:6333`) instead of the embedded engine; `:memory:` runs "
        "qdrant-client's in-process engine",
    )
    qdrant_api_key: str | None = Field(None, description="API key of the Qdrant server")
    key_prefix: str = Field(
        "cpersona", description="Prefix of every Redis key, index and channel (non-empty, no `:`)"
    )
    host: str = Field("127.0.0.1", description="HTTP listen address")
    port: Annotated[int, Field(ge=0, le=65_535)] = Field(8077, description="HTTP listen port")
    workers: _Count = Field(
        1,
        description="Server processes of `cpersona serve` on the one port (`--workers`); above 1 needs "
        "`CPERSONA_REDIS_URL`, and `CPERSONA_QDRANT_URL` unless the embedder is off",
    )
    url: str | None = Field(
        None,
        description="The running server (`http://host:port`) the CLI commands talk to; unset, they find "
        "the server that holds the data dir, else open the engine themselves",
    )
    default_agent: Annotated[str, Field(min_length=1)] | None = Field(
        None,
        description="The agent of an HTTP request that names none and sends no `X-Cpersona-Agent` header "
        "(a server for one agent, a client without scopes); unset, such a request is a 400",
    )
    keys: Annotated[KeysMode, BeforeValidator(_choice)] = Field(
        "auto",
        description="API keys: `on`, `off`, or `auto` (on whenever `CPERSONA_HOST` is not loopback)",
    )
    insecure_no_keys: bool = Field(
        False,
        description="Lets `cpersona serve` bind beyond loopback with keys off (`--insecure-no-keys`), with "
        "a warning; otherwise that start is refused",
    )
    rate_limit_per_sec: Annotated[float, Field(ge=0)] = Field(
        50.0,
        description="Requests a second each key may make on average, across every worker on the Redis; "
        "`0` turns the limit off (nothing is limited with keys off)",
    )
    rate_limit_burst: _Count = Field(
        100, description="Requests a key may make at once before the rate applies"
    )
    api_key: SecretStr | None = Field(
        None,
        description="The key the CLI sends (`Authorization: Bearer`) to a running server with keys in force",
    )

    embedding_mode: Annotated[EmbeddingMode, BeforeValidator(_choice)] = Field(
        "onnx",
        description="The embedder: `onnx` (the model `CPERSONA_EMBEDDING_MODEL` names, in-process), `none` "
        "(keyword search only), `http` (a CPersona-style `/embed` service), `api` (an OpenAI-compatible "
        "endpoint)",
    )
    embedding_model: str = Field(
        DEFAULT_EMBEDDING_MODEL,
        description="The model of the `onnx` embedder: "
        + ", ".join(f"`{name}`" for name in EMBEDDING_MODELS)
        + ". A store keeps the model its vectors were made with and refuses to open with another "
        "(`cpersona reembed` re-embeds it with this one)",
    )
    models_dir: Path | None = Field(
        None,
        description="Where the `onnx` embedder keeps the encoder graph it builds on first use (and the "
        "files it derives from the shipped weights); unset, `<data_dir>/models`. The data dirs of one user "
        "may share one: a graph is named by a hash of its weights and written whole or not at all",
    )
    embedding_url: str | None = Field(
        None, description="The `/embed` URL of the `http` embedder (required there)"
    )
    embedding_api_url: str = Field(
        "https://api.openai.com/v1/embeddings", description="The endpoint of the `api` embedder"
    )
    embedding_api_key: str | None = Field(
        None, description="Bearer key of the `api` embedder (required there)"
    )
    embedding_api_model: str = Field(
        "text-embedding-3-small", description="Model name the `api` embedder asks for"
    )
    embedding_timeout_secs: _Positive = Field(30.0, description="Deadline of one embedding call, in seconds")
    embedding_cache_size: int = Field(256, description="Query vectors kept in the in-process cache")
    embedding_cache_ttl_secs: float = Field(
        300.0, description="How long a cached query vector is reused, in seconds"
    )
    embedding_threads: int = Field(
        2, description="onnxruntime's intra-op threads for the `onnx` embedder (they sleep between runs)"
    )
    embedding_coalesce: bool = Field(
        True,
        description="The `onnx` embedder embeds the questions of concurrent recalls together (a lone "
        "question never waits); `false` embeds each in a call of its own",
    )

    max_content_length: _Count = Field(
        16_000, description="Characters of content a record may hold; longer is refused (413)"
    )
    max_metadata_length: _Count = Field(8_000, description="Characters of serialised metadata or meta-memory")
    max_key_length: _Count = Field(
        256, description="Characters of an id, agent, project, channel or source field"
    )
    future_timestamp_mode: Annotated[FutureTimestampMode, BeforeValidator(_choice)] = Field(
        "warn",
        description="A timestamp ahead of the clock: `warn` (stored, with a warning), `reject` (400), "
        "`off` (stored silently)",
    )
    future_timestamp_slack_secs: float = Field(
        300.0, description="How far ahead, in seconds, a timestamp may be before that applies"
    )
    batch_max: _Count = Field(1_000, description="Records in one batch store")
    max_association_entities: _Count = Field(64, description="Entities in one association declaration")
    max_association_aliases: _Count = Field(32, description="Aliases of one declared entity")
    max_association_relations: _Count = Field(128, description="Relations in one association declaration")
    max_body_bytes: _Count = Field(
        8 * 1024 * 1024,
        description="Bytes of one HTTP request body; the server stops reading past it and answers 413",
    )
    # Slow clients (edges/http/connections.py, edges/http/body_deadline.py).
    http_header_timeout_secs: _Positive = Field(
        10.0,
        description="Seconds a connection may take to send a request's head, from its opening or the "
        "previous response; then it is closed",
    )
    http_body_timeout_secs: _Positive = Field(
        30.0,
        description="Seconds a request's body may take to arrive whole after its head; then it is a 408 "
        "and the connection is closed",
    )
    http_max_connections: _Count = Field(
        512, description="Connections one worker holds at once; a request on one more is answered 503"
    )

    redis_timeout_secs: _Positive = Field(
        5.0,
        description="Deadline of one Redis call, in seconds; a write not confirmed on disk within half of "
        "it fails (503)",
    )
    redis_startup_timeout_secs: _Positive = Field(
        20.0, description="Seconds the embedded Redis may take to answer its first PING"
    )
    qdrant_timeout_secs: _Positive = Field(10.0, description="Deadline of one vector-store call, in seconds")
    qdrant_process: bool = Field(
        True,
        description="Embedded engine only: each collection's shard runs in a child process of its own "
        "(its own interpreter lock); `false` runs them in worker threads of this process",
    )

    max_memories: _Count | None = Field(
        None,
        description="The recall's vector scan window: the newest memories (and, apart, episodes) by "
        "insertion; unset, the policy's (10,000)",
    )
    min_free_mb: Annotated[int, Field(ge=0)] = Field(
        256,
        description="Free space (MB) an embedded store's disk must keep; under it every write is refused "
        "(507) and reads go on; `0`: no check (a remote store is never checked)",
    )

    recall_mode: Annotated[RecallMode, BeforeValidator(_choice)] = Field(
        "informed",
        description="Fusion: `rrf`, `rsf`, `informed` (rsf weighted by how informative each arm is for "
        "the query) or `cascade` (a request's `mode` overrides it)",
    )
    recall_policy: str = Field(
        "single-pass-v2",
        description="The policy in `stages/` a recall runs under (a request's `policy` overrides it)",
    )
    recall_cue_policy: str = Field(
        "cued-v0.5",
        description="The policy a recall with a time cue runs under (a request's `policy` overrides it)",
    )
    recall_cue_time_limit_ms: _Positive = Field(
        1_000.0,
        description="The time cue's loop may run this long from the start of the recall: no widening "
        "starts after it, and a cue arm still searching is stopped",
    )
    recall_depth_floor: Annotated[int, Field(ge=0)] | None = Field(
        None,
        description="Rows each arm hands to fusion: `max(limit, floor)` under rrf and rsf; unset, the "
        "policy's (0)",
    )
    recall_arm_timeout_ms: _Positive = Field(
        2_000.0,
        description="Deadline of each retrieval arm; a late or failed arm is named in `degraded`",
    )
    recall_max_limit: _Count = Field(
        10_000, description="The largest `limit` a library caller may ask for (HTTP allows 100)"
    )

    # reconstruct's bounds (the reference's CPERSONA_RECONSTRUCT_* variables): defaults and the soft caps
    # a request is clamped to, with the clamp reported. The hard ranges live in its request model.
    reconstruct_default_count: Annotated[int, Field(ge=0, le=100)] = Field(
        10, description="reconstruct's items when a request names no `count`"
    )
    reconstruct_max_count: Annotated[int, Field(ge=1, le=100)] = Field(
        10, description="The most items a reconstruct returns; more is clamped and said in `count_policy`"
    )
    reconstruct_top_k: Annotated[int, Field(ge=1, le=10_000)] = Field(
        20, description="Rows of reconstruct's one recall when a request names no `top_k`"
    )
    reconstruct_default_budget: Annotated[int, Field(ge=1, le=20_000)] = Field(
        4_000,
        description="Characters of quoted text by default (or the window's head quotes, if more)",
    )
    reconstruct_max_budget: Annotated[int, Field(ge=1, le=20_000)] = Field(
        20_000, description="The most characters of quoted text; more is clamped and said in `budget_policy`"
    )
    reconstruct_quote_chars: Annotated[int, Field(ge=1, le=20_000)] = Field(
        800, description="Characters of a head quote for the first `CPERSONA_RECONSTRUCT_FULL_QUOTES` items"
    )
    reconstruct_full_quotes: Annotated[int, Field(ge=0)] = Field(
        5, description="How many items get the full head quote; the rest get the tail size"
    )
    reconstruct_tail_quote_chars: Annotated[int, Field(ge=1, le=20_000)] = Field(
        400, description="Characters of a head quote after the first items"
    )
    reconstruct_excerpt_chars: Annotated[int, Field(ge=1, le=20_000)] = Field(
        500, description="Characters of an excerpt of another claim"
    )
    reconstruct_adjacency_seconds: Annotated[float, Field(ge=0)] = Field(
        60.0,
        description="Rows of one source within this many seconds of their burst's first row bundle as "
        "`cluster:adjacent`",
    )
    reconstruct_sequence: Annotated[ReconstructSequence, BeforeValidator(_choice)] = Field(
        "items",
        description="How quotes are cut to the budget: `items` (heads in item order, then excerpts in "
        "turn), `evidence` (the heads' passages fused over item and passage rank), `whole` (heads that "
        "fit whole first, then as `evidence`)",
    )
    reconstruct_lite_cap: Annotated[int, Field(ge=1)] = Field(
        3_000, description="The `lite` mode's cap: cl100k tokens of the whole returned JSON"
    )
    reconstruct_pro_cap: Annotated[int, Field(ge=1)] = Field(
        5_000, description="The `pro` mode's cap: cl100k tokens of the whole returned JSON"
    )

    sealed_key: SecretStr | None = Field(
        None,
        description="The AES-256-GCM key of sealed raw entries: 32 bytes as 64 hex digits or base64. Unset, "
        "an engine with the embedded Redis makes `<data_dir>/sealed.key` once; one on a shared Redis "
        "refuses sealed writes",
    )

    trace_queue_size: _Count = Field(
        1_000,
        description="Traces waiting for the publisher; when full, a trace is dropped and counted "
        "(`/health` → `traces`)",
    )
    trace_sample: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.0,
        description="Fraction of untraced recalls that are traced and published anyway (their answers "
        "carry no trace); `1` traces every recall",
    )
    trace_sample_seed: int | None = Field(
        None, description="Seed of the trace sampler, to repeat which recalls a run samples; unset, random"
    )
    trace_streams_max: _Count = Field(
        64,
        description="Trace streams (`GET /v1/traces/stream`, the trace page) one worker serves at once, "
        "each on its own Redis connection; one more is a 503",
    )

    decay_prune: bool = Field(
        False,
        description="Whether a decay tick deletes the memories it finds below the prune threshold (0.01); "
        "off, they stay, as decayed (hidden by the recall operations unless `include_decayed`)",
    )
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

    @field_validator("data_dir", "models_dir", mode="before")
    @classmethod
    def _expand(cls, value: object) -> object:
        return Path(value).expanduser() if isinstance(value, str | Path) else value

    @field_validator("embedding_model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        return embedding_model(value).name

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

    @property
    def embedding_models_dir(self) -> Path:
        """The folder the ``onnx`` embedder builds its graph into: :attr:`models_dir`, else
        ``<data_dir>/models``."""
        return self.data_dir / "models" if self.models_dir is None else self.models_dir

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
