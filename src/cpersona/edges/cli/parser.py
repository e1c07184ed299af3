"""The ``cpersona`` command line's arguments: the subcommands and their flags."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from cpersona.edges.cli.keys import add_keys_parser
from cpersona.edges.cli.raw import add_raw_parser
from cpersona.edges.cli.timeline import add_timeline_parser
from cpersona.edges.mcp.stdio import add_mcp_parser
from cpersona.settings import RecallMode
from cpersona.version import __version__

__all__ = ["DEFAULT_BATCH", "OLD_NAMES", "build_parser"]

DEFAULT_BATCH = 256
DELETE_AGENT_HELP = (
    "Delete every record, claim, profile and vector of one agent, for good: MCP's delete_agent_data, "
    "DELETE /v1/agents/{agent_id} (an admin key where keys are in force). To forget chosen records "
    "only, use forget over HTTP or MCP."
)
OLD_NAMES = {"forget": "delete-agent"}
"""Old command names, each to the command it now is (still run, with a note on stderr)."""

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = Any


def build_parser() -> argparse.ArgumentParser:
    """The ``cpersona`` command line: one subcommand per task, each with the common flags."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, help="data directory (default: CPERSONA_DATA_DIR or the user dir)"
    )
    common.add_argument("--redis-url", help="use this Redis instead of the embedded one (CPERSONA_REDIS_URL)")

    parser = argparse.ArgumentParser(
        prog="cpersona",
        description="An asynchronous recall engine for agent memory. Settings come from CPERSONA_* "
        "variables; a flag overrides its variable.",
    )
    parser.add_argument("--version", action="version", version=f"cpersona {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", parents=[common], help="run the HTTP API")
    p.add_argument("--host", help="listen address (CPERSONA_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (CPERSONA_PORT, default 8077)")
    p.add_argument(
        "--workers", type=int, help="server processes (CPERSONA_WORKERS, default 1; more need --redis-url)"
    )
    p.add_argument(
        "--insecure-no-keys",
        action="store_true",
        help="serve beyond loopback with CPERSONA_KEYS=off, asking no request for a key "
        "(CPERSONA_INSECURE_NO_KEYS; refused otherwise)",
    )

    add_mcp_parser(sub, common)
    _write_commands(sub, common)
    _read_commands(sub, common)
    _admin_commands(sub, common)
    add_keys_parser(sub, common)
    return parser


def _write_commands(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("remember", parents=[common], help="store one memory")
    p.add_argument("text", help="the memory's text")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--project", help="project id")
    p.add_argument("--channel", help="channel")
    p.add_argument("--id", dest="msg_id", help="your message id (a repeat is skipped)")
    p.add_argument("--timestamp", help="the memory's own time: ISO 8601 or epoch seconds")
    p.add_argument("--metadata", help="a JSON object kept with the memory")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = sub.add_parser("import", parents=[common], help="store memories from a JSONL file or an archive")
    p.add_argument("file", type=Path, help="an archive (from export), or one /v1/encode body per line")
    p.add_argument(
        "--agent", help="agent id for lines that have none; for an archive, the agent to import into"
    )
    p.add_argument(
        "--on-error",
        choices=("skip", "stop"),
        default="stop",
        help="on a bad line: report it and go on (skip), or stop there (stop, the default)",
    )
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="records per write (default 256)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--strategy",
        choices=("merge", "replace"),
        default="merge",
        help="archives: merge (default) adds to what the agent holds, replace deletes all of it first",
    )
    p.add_argument(
        "--conflict",
        choices=("keep_newer", "keep_existing", "keep_imported"),
        default="keep_newer",
        help="archives, merge: which record wins when the agent holds the same id",
    )

    p = sub.add_parser("export", parents=[common], help="write one agent's memory as a JSON Lines archive")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("-o", "--output", help="the archive file (default: stdout)")
    p.add_argument(
        "--store",
        action="append",
        choices=("episodic", "semantic", "procedural", "emotional"),
        help="only memories of this store (repeatable; default all)",
    )
    p.add_argument("--raw", action="store_true", help="include the raw journal")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _read_commands(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("stats", parents=[common], help="record counts")
    p.add_argument("--agent", help="count only this agent's records")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("get", parents=[common], help="print one record as JSON")
    p.add_argument("ref", help="mem:<uuid>, ep:<uuid> or raw:<uuid>")
    p.add_argument("--agent", required=True, help="the owning agent")

    p = sub.add_parser("recall", parents=[common], help="recall the rows that answer a question")
    p.add_argument("question", help="the question (an empty string lists the newest records)")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--project", help="project id (sees the project and the global pool)")
    p.add_argument("--channel", help="channel (sees the channel and the global pool)")
    p.add_argument("--source", help="source id, or a prefix when it ends in a non-alphanumeric")
    p.add_argument("--limit", type=int, default=10, help="rows to return (default 10)")
    p.add_argument("--mode", choices=get_args(RecallMode), help="fusion mode (CPERSONA_RECALL_MODE)")
    p.add_argument("--deep", action="store_true", help="halve the gate's thresholds")
    p.add_argument("--full", action="store_true", help="whole contents, not 500-character previews")
    p.add_argument(
        "--when",
        help="a time cue ending in sure, likely or vague: '2026-08-01..2026-08-31 likely', '..2026-08-31 "
        "sure', '2026-08-14 sure', '3 weeks ago likely', 'long ago vague', or a JSON object",
    )
    p.add_argument("--json", action="store_true", help="print the response as JSON")

    p = sub.add_parser("reconstruct", parents=[common], help="items that quote stored rows, with claims")
    p.add_argument("question", help="the question")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--project", help="project id (sees the project and the global pool)")
    p.add_argument("--channel", help="channel (sees the channel and the global pool)")
    p.add_argument("--mode", choices=("lite", "pro"), help="hold the answer to 3000 (lite) or 5000 tokens")
    p.add_argument("--count", type=int, help="items (default 10; pro 15)")
    p.add_argument("--budget", type=int, help="characters of quoted text")
    p.add_argument("--json", action="store_true", help="print the response as JSON")
    add_raw_parser(sub, common)
    add_timeline_parser(sub, common)


def _admin_commands(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "optimize",
        parents=[common],
        help="build the embedded vector indexes now (after a large import; the embedded engine never does "
        "it on its own)",
    )
    p = sub.add_parser(
        "reembed",
        parents=[common],
        help="make every stored vector again with the configured model (CPERSONA_EMBEDDING_MODEL), after a "
        "change of model; in-process, with the server stopped",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser("trace", help="follow recall traces")
    trace_sub = p.add_subparsers(dest="trace_command", required=True, metavar="ACTION")
    p = trace_sub.add_parser(
        "tail",
        parents=[common],
        help="print recall traces as engines publish them, until Ctrl-C",
        description="Print recall and reconstruct traces as they happen, until Ctrl-C. When a server is "
        "the target (CPERSONA_URL, or the cpersona serve that holds the data dir) the tail follows its "
        "GET /v1/traces/stream with CPERSONA_API_KEY, and sees only that key's agents; with no server "
        "it subscribes straight to the trace channel on the Redis the engines share "
        "(CPERSONA_REDIS_URL, or the data dir's embedded Redis).",
    )
    p.add_argument("--agent", help="only this agent's traces (default: every agent the key may see)")
    p.add_argument("--project", help="only traces whose scope names this project")
    p.add_argument("--json", action="store_true", help="one JSON trace per line")
    p.add_argument("--count", type=int, help="stop after this many traces")

    # The name of MCP's delete_agent_data; "forget" is what HTTP and MCP call the selective deletion.
    for name, said in (
        ("delete-agent", "delete all data of one agent (MCP delete_agent_data)"),
        ("forget", "deprecated: the old name of delete-agent"),
    ):
        p = sub.add_parser(name, parents=[common], help=said, description=DELETE_AGENT_HELP)
        p.add_argument("--agent", required=True, help="agent id")
        p.add_argument("--yes", action="store_true", help="confirm the deletion")
