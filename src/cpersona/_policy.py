"""Recall policies as data: one TOML file per policy in ``stages/``, loaded once at start.

A policy holds every number a recall process fixes (depths, floors, gate constants, seats, margins). The
engine reads the files when it opens; a file with a missing, unknown or mistyped key is refused then,
naming the file and the key, so a policy never runs half-read. Every recall names the policy it ran under,
and an older policy can be named again to replay a result.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any, Literal, TypeVar, get_type_hints

from cpersona._errors import InvalidSetting

__all__ = ["Policy", "load_policies", "policy_dir"]

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True, slots=True)
class DepthPolicy:
    floor: int
    max: int


@dataclasses.dataclass(frozen=True, slots=True)
class LimitPolicy:
    default: int
    max: int


@dataclasses.dataclass(frozen=True, slots=True)
class VectorPolicy:
    min_similarity: float
    rrf_threshold_factor: float
    scan_window: int
    reach: int
    far_limit: int
    far_weight: float


@dataclasses.dataclass(frozen=True, slots=True)
class FusionPolicy:
    rrf_k: int


@dataclasses.dataclass(frozen=True, slots=True)
class GatePolicy:
    start: float
    span: float
    saturation: int
    deep_factor: float
    lexical_arms: int
    profile_min_pool: int
    unscored_min_pool: int
    calibrate_sample: int
    calibrate_window_minutes: float
    calibrate_candidates: int
    calibrate_floor: float
    precision_beta: dict[str, float]


@dataclasses.dataclass(frozen=True, slots=True)
class AutocutPolicy:
    enabled: bool
    min_results: int
    min_gap_ratio: float


@dataclasses.dataclass(frozen=True, slots=True)
class ScoringPolicy:
    episode_penalty: bool
    episode_decay_rate: float
    episode_decay_floor: float
    prior_age_rate: float
    prior_age_floor: float
    prior_age_anchor: Literal["newest", "now"]


@dataclasses.dataclass(frozen=True, slots=True)
class SeatPolicy:
    block: int


@dataclasses.dataclass(frozen=True, slots=True)
class BlockPolicy:
    max_per_record: int
    max_chars: int


@dataclasses.dataclass(frozen=True, slots=True)
class ExcludePolicy:
    prefix_min_chars: int


@dataclasses.dataclass(frozen=True, slots=True)
class RenderPolicy:
    preview_chars: int


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """One recall policy, exactly as its file says."""

    name: str
    scoring: str
    depth: DepthPolicy
    limit: LimitPolicy
    vector: VectorPolicy
    fusion: FusionPolicy
    gate: GatePolicy
    autocut: AutocutPolicy
    score_adjust: ScoringPolicy
    seats: SeatPolicy
    blocks: BlockPolicy
    exclude: ExcludePolicy
    render: RenderPolicy


def policy_dir() -> Path:
    """Where the policy files are: inside the installed package, or ``stages/`` of a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "stages", here.parents[1] / "stages"):
        if candidate.is_dir():
            return candidate
    raise InvalidSetting("CPERSONA_POLICY_DIR", f"no policy files found next to {here}")


def load_policies(directory: Path | None = None) -> dict[str, Policy]:
    """Read every ``*.toml`` policy in ``directory``; refuse a malformed one naming the file and key."""
    folder = policy_dir() if directory is None else directory
    policies: dict[str, Policy] = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise InvalidSetting(f"policy file {path.name}", f"is not valid TOML: {exc}") from None
        policy = _build(Policy, raw, path.name, "")
        if policy.name != path.stem:
            raise InvalidSetting(f"policy file {path.name}", f"names itself {policy.name!r}")
        policies[policy.name] = policy
    if not policies:
        raise InvalidSetting("CPERSONA_POLICY_DIR", f"{folder} holds no policy files")
    return policies


def _build(cls: type[_T], raw: dict[str, Any], filename: str, where: str) -> _T:
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    for key in raw:
        if key not in names:
            raise InvalidSetting(f"policy file {filename}", f"has an unknown key {where}{key}")
    values: dict[str, Any] = {}
    for name in names:
        if name not in raw:
            raise InvalidSetting(f"policy file {filename}", f"is missing {where}{name}")
        hint = hints[name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            section = raw[name]
            if not isinstance(section, dict):
                raise InvalidSetting(f"policy file {filename}", f"needs a [{where}{name}] table")
            values[name] = _build(hint, section, filename, f"{where}{name}.")
        else:
            values[name] = _check(raw[name], hint, filename, f"{where}{name}")
    return cls(**values)


def _check(value: Any, hint: Any, filename: str, key: str) -> Any:
    where = f"policy file {filename}"
    if hint is bool:
        if not isinstance(value, bool):
            raise InvalidSetting(where, f"{key} must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidSetting(where, f"{key} must be an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidSetting(where, f"{key} must be a number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise InvalidSetting(where, f"{key} must be a string")
        return value
    if getattr(hint, "__origin__", None) is Literal:
        if value not in hint.__args__:
            raise InvalidSetting(where, f"{key} must be one of {', '.join(map(str, hint.__args__))}")
        return value
    if getattr(hint, "__origin__", None) is dict:
        if not isinstance(value, dict) or not all(isinstance(v, int | float) for v in value.values()):
            raise InvalidSetting(where, f"{key} must be a table of numbers")
        return {str(k): float(v) for k, v in value.items()}
    raise InvalidSetting(where, f"{key} has an unsupported type")  # pragma: no cover - schema error
