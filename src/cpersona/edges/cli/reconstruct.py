"""``cpersona reconstruct "question" --agent A``: the items reconstruct returns, rendered to be read (each
item's head quote, its claims newest first with their time, how they joined and their roles, and its
excerpts), or with ``--json`` the HTTP API's JSON as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.edges.cli.flags import with_given
from cpersona.edges.cli.outcomes import show

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    from cpersona.edges.cli.service import Service

__all__ = ["reconstruct_command", "render_reconstruct"]

_QUOTE = 400  # characters of a head quote shown (the JSON has it whole)
_EXCERPT = 160


def _body(args: argparse.Namespace) -> dict[str, Any]:
    return with_given(
        {"query": args.question, "agent_id": args.agent},
        (
            ("mode", args.mode),
            ("count", args.count),
            ("budget", args.budget),
            ("project_id", args.project),
            ("channel", args.channel),
        ),
    )


async def reconstruct_command(service: Service, args: argparse.Namespace) -> int:
    return show(await service.reconstruct(_body(args)), as_json=args.json, render=render_reconstruct)


def _short(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _headline(result: Mapping[str, Any]) -> str:
    line = f"{len(result['items'])} item(s), {result['returned_count']} of {result['effective_count']}"
    if result.get("shortfall_reason"):
        line += f" ({result['shortfall_reason']})"
    if result.get("reserved_count"):
        line += f", {result['reserved_count']} held"
    if result.get("mode"):
        line += f"; mode {result['mode']}, {result['used_tokens']} of {result['cap']} tokens"
    elif result.get("used_budget") is not None:
        line += f"; {result['used_budget']} of {result['effective_budget']} characters"
    return line


def _claim(claim: Mapping[str, Any]) -> str:
    parts = [str(claim["ref"]), str(claim.get("as_of", "(no time)"))]
    if claim.get("why"):
        hops = f" {claim['hops']} hop(s)" if claim.get("hops") is not None else ""
        parts.append(f"via {claim['why']}{hops}")
    roles = claim.get("roles") or ()
    if roles:
        parts.append("; ".join(f"{r['role']} {r['ref']}" for r in roles))
    return "  ".join(parts)


def _item(n: int, item: Mapping[str, Any]) -> list[str]:
    tags = [t for t in (item.get("independence_reason"), item.get("admission")) if t]
    lines = [f"{n}. {item['head_ref']}" + (f"  [{', '.join(tags)}]" if tags else "")]
    lines.append(f'   "{_short(item["content"], _QUOTE)}"')
    lines.append("   claims:")
    # lite and pro leave out a lone head claim and give its time as the item's as_of.
    lone = [{"ref": item["head_ref"], **({"as_of": item["as_of"]} if "as_of" in item else {})}]
    lines.extend(f"     {_claim(c)}" for c in item.get("claims") or lone)
    if item.get("claims_omitted"):
        lines.append(f"     … {item['claims_omitted']} more")
    for conflict in item.get("conflicts") or ():
        lines.append(f"   conflict: {' '.join(conflict['refs'])} ({conflict['reason']})")
    excerpts = item.get("excerpts") or ()
    if excerpts:
        lines.append("   excerpts:")
        lines.extend(f'     {e["ref"]}  "{_short(e["content"], _EXCERPT)}"' for e in excerpts)
    if item.get("excerpts_omitted"):
        lines.append(f"     … {item['excerpts_omitted']} excerpt(s) left out by the budget")
    return lines


def render_reconstruct(result: Mapping[str, Any]) -> list[str]:
    """The lines ``cpersona reconstruct`` prints for ``result`` (the JSON of a ReconstructResult)."""
    lines = [_headline(result)]
    for policy in ("count_policy", "budget_policy"):
        if result.get(policy):
            lines.append(f"{policy.replace('_', ' ')}: clamped ({result[policy]['reason']})")
    for n, item in enumerate(result["items"], 1):
        lines.extend(_item(n, item))
    return lines
