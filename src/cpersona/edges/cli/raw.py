"""``cpersona raw [QUERY] --agent A``: the forensic raw-journal query, its entries rendered to be read
(oldest first: time, session and turn, speaker and source, any label that is not the default, the ref,
then the text verbatim, indented), or with ``--json`` the HTTP API's JSON as it is.

``--start`` and ``--end`` are the query's ``temporal`` range; either may be left out (the range is then
open on that side: from the epoch, or up to the year 9999)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, get_args

from cpersona.edges.cli.flags import number_or_text, with_given
from cpersona.edges.cli.outcomes import show
from cpersona.model.records import SecrecyLevel

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    from cpersona.edges.cli.service import Service

__all__ = ["add_raw_parser", "raw_command", "render_raw"]

_OPEN_START = "1970-01-01T00:00:00Z"
_OPEN_END = "9999-12-31T23:59:59Z"
_INDENT = "    "


def add_raw_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("raw", parents=[common], help="forensic query of the raw journal, verbatim")
    p.add_argument("query", nargs="?", help="words every entry must hold (default: every entry)")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--project", help="project id (sees the project and the global pool)")
    p.add_argument("--channel", help="channel (sees the channel and the global pool)")
    p.add_argument("--session", help="only this session")
    p.add_argument("--start", help="entries created at or after this time (ISO 8601 or epoch seconds)")
    p.add_argument("--end", help="entries created at or before this time")
    p.add_argument("--limit", type=int, help="entries to show (default 10, at most 1000)")
    p.add_argument("--include-private-scratch", action="store_true", help="also private_scratch entries")
    p.add_argument("--include-sealed", action="store_true", help="also sealed entries (decrypted)")
    p.add_argument(
        "--secrecy",
        action="append",
        choices=get_args(SecrecyLevel),
        help="a secrecy level to show (repeat it; default public and sensitive)",
    )
    p.add_argument("--json", action="store_true", help="print the response as JSON")


def raw_body(args: argparse.Namespace) -> dict[str, Any]:
    body = with_given(
        {"agent_id": args.agent},
        (
            ("query", args.query),
            ("project_id", args.project),
            ("channel", args.channel),
            ("session_id", args.session),
            ("limit", args.limit),
            ("secrecy_levels", args.secrecy),
        ),
    )
    if args.start is not None or args.end is not None:
        body["temporal"] = {
            "start": number_or_text(args.start or _OPEN_START),
            "end": number_or_text(args.end or _OPEN_END),
        }
    if args.include_private_scratch:
        body["include_private_scratch"] = True
    if args.include_sealed:
        body["include_sealed"] = True
    return body


async def raw_command(service: Service, args: argparse.Namespace) -> int:
    return show(await service.raw_query(raw_body(args)), as_json=args.json, render=render_raw)


def _text(entry: Mapping[str, Any]) -> str:
    return "".join(bytes(block["data"]).decode() for block in entry["content"]["blocks"])


def _entry(entry: Mapping[str, Any]) -> list[str]:
    where = entry["session_id"] + (f" / {entry['turn_id']}" if entry.get("turn_id") else "")
    labels = [
        label
        for label, default in ((entry["visibility"], "normal"), (entry["secrecy_level"], "public"))
        if label != default
    ]
    head = f"{entry['created_at']}  {where}  {entry['speaker']} ({entry['source']})"
    lines = [head + (f"  [{', '.join(labels)}]" if labels else ""), f"{_INDENT}{entry['ref']}"]
    lines.extend(_INDENT + line for line in _text(entry).splitlines() or [""])
    return lines


def render_raw(result: Mapping[str, Any]) -> list[str]:
    """The answer as lines to read: a headline, then each entry, a blank line between them."""
    records = result["records"]
    headline = f"{len(records)} of {result['total_candidates']} matching entries, oldest first"
    if result.get("sealed_scanned") is not None:
        headline += f" ({result['sealed_scanned']} sealed entries opened)"
    lines = [headline]
    for entry in records:
        lines.append("")
        lines.extend(_entry(entry))
    return lines
