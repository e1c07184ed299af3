"""Every ``CPERSONA_*`` setting in one frozen object.

Settings are read once, at the edge (``Settings.from_env``), and then passed down as a value. No other
module reads the environment. A bad value is refused at start with an error that names the variable, so
a typo never turns silently into a default.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import platformdirs

from cpersona.errors import InvalidSetting

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["EmbeddingMode", "FutureTimestampMode", "RecallMode", "Settings"]

EmbeddingMode = Literal["onnx", "none", "http", "api"]
FutureTimestampMode = Literal["warn", "reject", "off"]
RecallMode = Literal["rrf", "rsf", "cascade"]

_T = TypeVar("_T")


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("cpersona", appauthor=False))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The engine's configuration. Field ``x`` is read from ``CPERSONA_X``."""

    data_dir: Path = dataclasses.field(default_factory=_default_data_dir)
    redis_url: str | None = None
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    key_prefix: str = "cpersona"
    host: str = "127.0.0.1"
    port: int = 8077

    embedding_mode: EmbeddingMode = "onnx"
    embedding_url: str | None = None
    embedding_api_url: str = "https://api.openai.com/v1/embeddings"
    embedding_api_key: str | None = None
    embedding_api_model: str = "text-embedding-3-small"
    embedding_timeout_secs: float = 30.0
    embedding_cache_size: int = 256
    embedding_cache_ttl_secs: float = 300.0
    embedding_threads: int = 2

    max_content_length: int = 16_000
    max_metadata_length: int = 8_000
    max_key_length: int = 256
    future_timestamp_mode: FutureTimestampMode = "warn"
    future_timestamp_slack_secs: float = 300.0
    batch_max: int = 1_000

    redis_timeout_secs: float = 5.0
    redis_startup_timeout_secs: float = 20.0
    qdrant_timeout_secs: float = 10.0

    max_memories: int | None = None

    recall_mode: RecallMode = "rrf"
    recall_policy: str = "single-pass-v0"
    recall_cue_policy: str = "cued-v0.3"
    recall_cue_time_limit_ms: float = 1_000.0
    recall_depth_floor: int | None = None
    recall_arm_timeout_ms: float = 2_000.0
    recall_max_limit: int = 10_000

    trace_queue_size: int = 1_000
    trace_sample: float = 0.0
    trace_sample_seed: int | None = None

    def __post_init__(self) -> None:
        # Accept a plain string for the data dir from Python callers; everything downstream wants a Path.
        if not isinstance(self.data_dir, Path):
            object.__setattr__(self, "data_dir", Path(self.data_dir).expanduser())

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Build settings from ``CPERSONA_*`` variables, then apply keyword overrides.

        Raises :class:`~cpersona.InvalidSetting` naming the variable when a value cannot be read.
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            name = "CPERSONA_" + field.name.upper()
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            values[field.name] = _parse(name, field.name, raw)
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InvalidSetting(sorted(unknown)[0], "is not a setting")
        values.update(overrides)
        settings = cls(**values)  # type: ignore[arg-type]
        settings.validate()
        return settings

    def validate(self) -> None:
        """Check cross-field rules; raise :class:`~cpersona.InvalidSetting` on the first broken one."""
        if self.embedding_mode == "http" and not self.embedding_url:
            raise InvalidSetting("CPERSONA_EMBEDDING_URL", "is required when CPERSONA_EMBEDDING_MODE=http")
        if self.embedding_mode == "api" and not self.embedding_api_key:
            raise InvalidSetting("CPERSONA_EMBEDDING_API_KEY", "is required when CPERSONA_EMBEDDING_MODE=api")
        for name in ("port",):
            value = getattr(self, name)
            if not 0 <= value <= 65_535:
                raise InvalidSetting("CPERSONA_" + name.upper(), f"must be a port number, got {value}")
        for name in (
            "embedding_timeout_secs",
            "redis_timeout_secs",
            "redis_startup_timeout_secs",
            "qdrant_timeout_secs",
            "recall_arm_timeout_ms",
            "recall_cue_time_limit_ms",
        ):
            if getattr(self, name) <= 0:
                raise InvalidSetting("CPERSONA_" + name.upper(), "must be greater than 0")
        for name in (
            "max_content_length",
            "max_metadata_length",
            "max_key_length",
            "batch_max",
            "max_memories",
            "recall_max_limit",
            "trace_queue_size",
        ):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidSetting("CPERSONA_" + name.upper(), "must be at least 1")
        if not 0.0 <= self.trace_sample <= 1.0:
            raise InvalidSetting("CPERSONA_TRACE_SAMPLE", f"must be between 0 and 1, got {self.trace_sample}")
        if self.recall_depth_floor is not None and self.recall_depth_floor < 0:
            raise InvalidSetting("CPERSONA_RECALL_DEPTH_FLOOR", "must be 0 or more")
        if not self.key_prefix or ":" in self.key_prefix:
            raise InvalidSetting("CPERSONA_KEY_PREFIX", "must be non-empty and contain no ':'")

    @property
    def embedded_redis(self) -> bool:
        return self.redis_url is None

    @property
    def embedded_qdrant(self) -> bool:
        return self.qdrant_url is None


_CHOICES: dict[str, tuple[str, ...]] = {
    "embedding_mode": ("onnx", "none", "http", "api"),
    "future_timestamp_mode": ("warn", "reject", "off"),
    "recall_mode": ("rrf", "rsf", "cascade"),
}


def _parse(env_name: str, field_name: str, raw: str) -> object:
    if field_name in _CHOICES:
        choices = _CHOICES[field_name]
        value = raw.strip().lower()
        if value not in choices:
            raise InvalidSetting(env_name, f"must be one of {', '.join(choices)}; got {raw!r}")
        return value
    annotation = Settings.__dataclass_fields__[field_name].type
    if annotation == "Path":
        return Path(raw).expanduser()
    if annotation in ("int", "int | None"):
        return _convert(env_name, raw, int, "an integer")
    if annotation == "float":
        return _convert(env_name, raw, float, "a number")
    return raw


def _convert(env_name: str, raw: str, kind: Callable[[str], _T], what: str) -> _T:
    try:
        return kind(raw.strip())
    except ValueError:
        raise InvalidSetting(env_name, f"must be {what}; got {raw!r}") from None
