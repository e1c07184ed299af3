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
frozen pydantic models, which do the checking; it is re-exported here for the callers that load policies.
A refusal names the file and every entry at fault in it, each with pydantic's own words
(``limit.default: Input should be a valid integer``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cpersona.errors import InvalidSetting
from cpersona.model.policy import CuePolicy, Policy
from cpersona.recall.stages.chain import build_chain

__all__ = ["CuePolicy", "Policy", "load_policies", "policy_dir"]


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
        try:
            policy = Policy.model_validate(merged)
        except ValidationError as exc:
            raise InvalidSetting(f"policy file {filename}", _faults(exc)) from None
        if policy.name != stem:
            raise InvalidSetting(f"policy file {filename}", f"names itself {policy.name!r}")
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


def _faults(exc: ValidationError) -> str:
    """Each entry pydantic refused, as the file spells its key (``cue.lift.sure``, ``chain[1]``), with the
    value the file gave it where there is one to show."""
    faults = []
    for error in exc.errors():
        fault = f"{_entry(error['loc'])}: {error['msg']}"
        if error["type"] not in ("missing", "extra_forbidden"):
            fault += f", got {error['input']!r}"
        faults.append(fault)
    return "; ".join(faults)


def _entry(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
