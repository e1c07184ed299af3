"""Recall policies as data: one TOML file per policy in ``stages/``, loaded once at start.

A policy holds every number a recall process fixes (depths, floors, gate constants, seats, margins) and
names the stages its recall runs after the arms, in order (``chain``). The engine reads the files when it
opens; a file with a missing, unknown or mistyped key, or a chain that names an unknown stage, wires two
stages that do not fit or lacks a table one of its stages reads, is refused then, naming the file and the
key, so a policy never runs half-read. Every recall names the policy it ran under, and an older policy can
be named again to replay a result.

A file may start from another with ``extends = "<policy>"`` and give only what it changes: its tables are
merged into the base's key by key (an inner table is merged too, so no key can be removed this way), a
list such as ``chain`` is replaced whole, and ``name`` is never inherited. The merged result is checked
exactly like a file that stands alone. The ``[cue]`` table is the one optional table: a policy without it
takes no time cue.

The schema itself (:class:`~cpersona.model.policy.Policy` and its tables) lives in ``cpersona.model`` as
plain values; it is re-exported here for the callers that load policies.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from cpersona.errors import InvalidSetting
from cpersona.model.policy import CuePolicy, Policy
from cpersona.model.time_cue import CONFIDENCES
from cpersona.recall.stages.chain import build_chain

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["CuePolicy", "Policy", "load_policies", "policy_dir"]

_T = TypeVar("_T")


def policy_dir() -> Path:
    """Where the policy files are: inside the installed package, or ``stages/`` of a source checkout."""
    here = Path(__file__).resolve().parents[1]  # the package folder, cpersona/
    for candidate in (here / "stages", here.parents[1] / "stages"):
        if candidate.is_dir():
            return candidate
    raise InvalidSetting("CPERSONA_POLICY_DIR", f"no policy files found next to {here}")


def load_policies(directory: Path | None = None) -> dict[str, Policy]:
    """Read every ``*.toml`` policy in ``directory``; refuse a malformed one naming the file and key."""
    folder = policy_dir() if directory is None else directory
    raws: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            raws[path.stem] = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise InvalidSetting(f"policy file {path.name}", f"is not valid TOML: {exc}") from None
    if not raws:
        raise InvalidSetting("CPERSONA_POLICY_DIR", f"{folder} holds no policy files")
    chains = {stem: _chain(stem, raws) for stem in raws}
    policies: dict[str, Policy] = {}
    # Bases are built before the files that extend them, so a fault in a base is reported against the
    # base's own file rather than against the first file that happens to extend it.
    for stem in sorted(raws, key=lambda s: (len(chains[s]), s)):
        filename = f"{stem}.toml"
        merged: dict[str, Any] = {}
        for link in chains[stem]:
            # The name says which file this is, so it is the one key a file never takes from its base.
            own = {key: value for key, value in raws[link].items() if key not in ("extends", "name")}
            merged = _merge(merged, own)
        if "name" in raws[stem]:
            merged["name"] = raws[stem]["name"]
        policy = _build(Policy, merged, filename, "")
        if policy.name != stem:
            raise InvalidSetting(f"policy file {filename}", f"names itself {policy.name!r}")
        if policy.cue is not None:
            _check_cue(policy.cue, filename)
        # Built here only to be checked: a chain that cannot run is refused before the engine opens.
        build_chain(policy)
        policies[policy.name] = policy
    return policies


def _chain(stem: str, raws: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    """The files a policy is made of, its root base first and itself last, following ``extends``."""
    chain = [stem]
    while "extends" in raws[chain[-1]]:
        filename = f"{chain[-1]}.toml"
        base = raws[chain[-1]]["extends"]
        if not isinstance(base, str):
            raise InvalidSetting(f"policy file {filename}", "extends must be a string naming another policy")
        if base not in raws:
            known = ", ".join(sorted(raws))
            raise InvalidSetting(
                f"policy file {filename}", f"extends {base!r}, which is not a policy here ({known})"
            )
        if base in chain:
            loop = " -> ".join((*chain[chain.index(base) :], base))
            raise InvalidSetting(f"policy file {filename}", f"extends itself through {loop}")
        chain.append(base)
    return tuple(reversed(chain))


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _build(cls: type[_T], raw: dict[str, Any], filename: str, where: str) -> _T:
    hints = get_type_hints(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    for key in raw:
        if key not in names:
            raise InvalidSetting(f"policy file {filename}", f"has an unknown key {where}{key}")
    values: dict[str, Any] = {}
    for field in fields:
        name = field.name
        hint, optional = _unwrap_optional(hints[name])
        if name not in raw:
            # Only an optional table may be left out; it then reads as absent (None).
            if optional:
                continue
            raise InvalidSetting(f"policy file {filename}", f"is missing {where}{name}")
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            section = raw[name]
            if not isinstance(section, dict):
                raise InvalidSetting(f"policy file {filename}", f"needs a [{where}{name}] table")
            values[name] = _build(hint, section, filename, f"{where}{name}.")
        else:
            values[name] = _check(raw[name], hint, filename, f"{where}{name}")
    return cls(**values)


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if get_origin(hint) in (Union, types.UnionType):
        args = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return args[0], True
    return hint, False


def _check_cue(cue: CuePolicy, filename: str) -> None:
    """Ranges the types alone do not give: no negative lift or seat, a merge vote that cannot divide by 0."""
    where = f"policy file {filename}"
    for table in ("margins", "lift", "seats"):
        words = getattr(cue, table)
        missing = [word for word in CONFIDENCES if word not in words]
        extra = sorted(word for word in words if word not in CONFIDENCES)
        if extra:
            raise InvalidSetting(where, f"cue.{table} has an unknown confidence {extra[0]!r}")
        if missing:
            raise InvalidSetting(where, f"cue.{table} is missing {missing[0]!r}")
        for word, value in words.items():
            if value < 0:
                raise InvalidSetting(where, f"cue.{table}.{word} must be at least 0, got {value}")
    for key in ("recent_only_hours", "depth", "vector_floor_factor", "revisions"):
        if getattr(cue, key) < 0:
            raise InvalidSetting(where, f"cue.{key} must be at least 0, got {getattr(cue, key)}")
    if cue.merge_k < 1:
        raise InvalidSetting(where, f"cue.merge_k must be at least 1, got {cue.merge_k}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# A scalar type of the schema: what a TOML value must be to stand for it, and what is said when it is not.
_SCALARS: dict[Any, tuple[Callable[[Any], bool], str]] = {
    bool: (lambda value: isinstance(value, bool), "must be true or false"),
    int: (_is_int, "must be an integer"),
    float: (_is_number, "must be a finite number"),
    str: (lambda value: isinstance(value, str), "must be a string"),
}


def _check(value: Any, hint: Any, filename: str, key: str) -> Any:
    where = f"policy file {filename}"
    if hint in _SCALARS:
        accepts, problem = _SCALARS[hint]
        if not accepts(value):
            raise InvalidSetting(where, f"{key} {problem}")
        return float(value) if hint is float else value
    origin = get_origin(hint)
    if origin is Literal:
        if value not in get_args(hint):
            raise InvalidSetting(where, f"{key} must be one of {', '.join(map(str, get_args(hint)))}")
        return value
    if origin is tuple:
        item = get_args(hint)[0]
        if not isinstance(value, list):
            raise InvalidSetting(where, f"{key} must be an array")
        return tuple(_check(v, item, filename, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        item = get_args(hint)[1]
        if not isinstance(value, dict):
            raise InvalidSetting(where, f"{key} must be a table")
        return {str(k): _check(v, item, filename, f"{key}.{k}") for k, v in value.items()}
    raise InvalidSetting(where, f"{key} has an unsupported type")  # pragma: no cover - schema error
