"""``cpersona timeline --agent A --start … --end … [--granularity day]``: the memories of a time range in
UTC buckets, rendered to be read (a line per bucket, a line per memory with its time, ref, fidelity and
text), or with ``--json`` the HTTP API's JSON as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, get_args

from cpersona.edges.cli.flags import number_or_text, with_given
from cpersona.edges.cli.outcomes import show
from cpersona.model.timeline_buckets import Granularity

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    from cpersona.edges.cli.service import Service

    # parser.Subparsers, spelled here: the parser imports this module to add the command.
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["add_timeline_parser", "render_timeline", "timeline_body", "timeline_command"]

_TEXT = 100  # characters of a memory's text shown (the JSON has it whole)
# How much of a bucket's RFC 3339 start names it: 2026-03-16T09:05, …T09, 2026-03-16, 2026-03.
_LABEL = {"minute": 16, "hour": 13, "day": 10, "week": 10, "month": 7}


def add_timeline_parser(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("timeline", parents=[common], help="the memories of a time range, in UTC buckets")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--start", required=True, help="the range's start: ISO 8601 or epoch seconds (included)")
    p.add_argument("--end", required=True, help="the range's end: ISO 8601 or epoch seconds (included)")
    p.add_argument(
        "--granularity", choices=get_args(Granularity), help="bucket size (default hour; weeks from Monday)"
    )
    p.add_argument("--min-fidelity", type=float, help="only memories at least this faithful now (0-1)")
    p.add_argument("--limit", type=int, help="memories at most (default 1000)")
    p.add_argument("--project", help="project id (sees the project and the global pool)")
    p.add_argument("--channel", help="channel (sees the channel and the global pool)")
    p.add_argument("--json", action="store_true", help="print the response as JSON")


def timeline_body(args: argparse.Namespace) -> dict[str, Any]:
    """The request body of the command's flags."""
    body: dict[str, Any] = {
        "agent_id": args.agent,
        "range": {"start": number_or_text(args.start), "end": number_or_text(args.end)},
    }
    return with_given(
        body,
        (
            ("granularity", args.granularity),
            ("min_fidelity", args.min_fidelity),
            ("limit", args.limit),
            ("project_id", args.project),
            ("channel", args.channel),
        ),
    )


async def timeline_command(service: Service, args: argparse.Namespace) -> int:
    return show(await service.timeline(timeline_body(args)), as_json=args.json, render=render_timeline)


def _text(record: Mapping[str, Any]) -> str:
    data = record["content"]["blocks"][0]["data"]
    flat = " ".join(bytes(data).decode("utf-8", errors="replace").split())
    return flat if len(flat) <= _TEXT else flat[: _TEXT - 1] + "…"


def _label(bucket: Mapping[str, Any], granularity: str) -> str:
    name = bucket["start"][: _LABEL[granularity]].replace("T", " ")
    if granularity == "hour":
        name += ":00"
    if granularity == "week":
        name = "week of " + name
    return f"{name} UTC ({bucket['count']})"


def render_timeline(result: Mapping[str, Any]) -> list[str]:
    """The lines ``cpersona timeline`` prints for ``result`` (the JSON of a TimelineResult)."""
    granularity = result["granularity"]
    lines = [f"{result['count']} memory(ies) in {len(result['buckets'])} {granularity} bucket(s)"]
    if result["truncated"]:
        lines[0] += f"; more matched ({result['total_in_range']} in range): narrow the range or raise --limit"
    for bucket in result["buckets"]:
        lines.append(_label(bucket, granularity))
        for memory in bucket["memories"]:
            record = memory["record"]
            when = record["created_at"][11:19]  # the memory's own time (CMP's created_at)
            lines.append(
                f"  {when}  {record['ref']}  fidelity {memory['relevance_score']:.2f}  {_text(record)}"
            )
    return lines
