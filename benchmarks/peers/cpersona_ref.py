"""CPersona 2.6.14, the released system the seeds describe, as a system of the quality harness.

It runs from PyPI's ``cpersona==2.6.14`` in its own venv (``benchmarks/.cache/peers/cpersona-2.6.14``),
driven through its library API by ``_cpersona_worker.py`` in a subprocess (its package name is the same
as ours, so it cannot share our interpreter). Its vectors come over its ``/embed`` HTTP contract from a
loopback server in the benchmark process that answers from the run's embedding cache: the same MiniLM
vectors, bit for bit, that ``dense``, ``rrf`` and mem0 use.

Settings (environment, read by CPersona at import; reference ``cpersona-recall.md`` §6.3):

* ``CPERSONA_FUSED_GATE_ENABLED=false`` and ``CPERSONA_AUTOCUT_ENABLED=false``: the gate stays in its
  heuristic regime (``min_score(pool)``), so no random calibration enters the figures;
* ``CPERSONA_TASK_QUEUE_ENABLED=false`` and ``CPERSONA_BLOCK_BUILD_ENABLED=false``: no blocks and no
  overflow nodes, the regime of the reference measurement (0.595 / 0.413 on full LoCoMo);
* ``CPERSONA_UPDATE_CHECK=false`` (no call to the package index at start), a fresh database per run;
* everything else at 2.6.14's defaults: rrf, depth = limit, scan window 10,000.

The worker echoes CPersona's effective configuration on start and :meth:`CPersonaRef.check_hello` refuses
to run when a pin did not take effect.

Corpus key = CPersona agent (one agent per conversation); turn = memory, stored in order with
``msg_id`` = the unit id, its timestamp (ISO 8601, UTC) and metadata. CPersona skips a turn whose content
repeats an earlier one in the same agent and answers with that row's id; such units share the row, and a
hit on it counts for each of them (as for our own engine). Recall asks ``limit = k``.

2.6.14's recall also takes a ``time_cue`` (``memory_handlers.do_recall(..., time_cue=...)``, policy
``cued-v0.3`` in its ``cpersona/cue.py``): :meth:`CPersonaRef.recall` passes one through and returns the
rows with the signal that marks a cue seat, for the time-cue comparison. The worker's hello says whether
the installed release has the parameter (:attr:`CPersonaRef.takes_time_cue`).

Its recall can also return its recall trace (``do_recall(..., trace=True)``, ``cpersona/recall_trace.py``:
refs, ranks, scores and reasons per stage, and a coverage ledger). The worker asks for it when a request
says ``trace`` and keeps it on its side; its hello says whether the parameter exists
(:attr:`CPersonaRef.takes_trace`), and the ``span`` op gives the agent's oldest and newest stored time.
The speed benchmark (``benchmarks/speed_peers.py``) uses both to price a trace and a cue.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Final

from benchmarks.peers._process import PeerError
from benchmarks.peers._system import PeerSystem, peer_environment
from benchmarks.peers._venv import PeerVenv

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from benchmarks.peers.embed_server import EmbedServer, Source
    from benchmarks.quality.systems import Unit

__all__ = ["VERSION", "CPersonaRef"]

VERSION: Final = "2.6.14"

# (variable, value, the name in CPersona's config module, the value it must then hold): the worker
# echoes the config module, so a pin that did not take effect is caught.
PINS: Final = (
    ("CPERSONA_FUSED_GATE_ENABLED", "false", "FUSED_GATE_ENABLED", False),
    ("CPERSONA_AUTOCUT_ENABLED", "false", "AUTOCUT_ENABLED", False),
    ("CPERSONA_AUTO_CALIBRATE", "false", "AUTO_CALIBRATE", False),
    ("CPERSONA_TASK_QUEUE_ENABLED", "false", "TASK_QUEUE_ENABLED", False),
    ("CPERSONA_BLOCK_BUILD_ENABLED", "false", "BLOCK_BUILD_ENABLED", False),
    ("CPERSONA_UPDATE_CHECK", "false", "UPDATE_CHECK_ENABLED", False),
    ("CPERSONA_EMBEDDING_MODE", "http", "EMBEDDING_MODE", "http"),
)


def iso_utc(timestamp: float) -> str:
    """A POSIX time as CPersona's ISO 8601 timestamp, in UTC."""
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC).isoformat()


class CPersonaRef(PeerSystem):
    """CPersona 2.6.14 through its library, in its own interpreter (see the module docstring)."""

    venv = PeerVenv(f"cpersona-{VERSION}", (f"cpersona=={VERSION}",))
    script = "_cpersona_worker.py"

    def __init__(
        self,
        source: Source,
        *,
        name: str = f"cpersona-{VERSION}",
        settings: dict[str, str] | None = None,
        work_dir: Path | None = None,
    ) -> None:
        """``settings`` are extra ``CPERSONA_*`` variables on top of the pins (the speed benchmark's);
        ``work_dir`` holds ``cpersona.db`` (an existing one is opened as it is)."""
        super().__init__(source, name=name, work_dir=work_dir)
        self._settings = dict(settings or {})
        # Corpus key -> CPersona ref ("mem:<id>") -> the unit ids stored as (or folded into) that row.
        self._refs: dict[str, dict[str, list[str]]] = {}
        self.recall_ms: list[float] = []

    def environment(self, server: EmbedServer, work_dir: Path) -> dict[str, str]:
        pins = {variable: value for variable, value, _, _ in PINS}
        return peer_environment(
            {
                **pins,
                "CPERSONA_DB_PATH": str(work_dir / "cpersona.db"),
                "CPERSONA_EMBEDDING_URL": server.embed_url,
                **self._settings,
            }
        )

    def check_hello(self, hello: dict[str, Any]) -> None:
        config = hello.get("config") or {}
        wrong = [
            f"{name}={config.get(name)!r} (wanted {wanted!r})"
            for _, _, name, wanted in PINS
            if config.get(name) != wanted
        ]
        if hello.get("version") != VERSION:
            wrong.append(f"version {hello.get('version')!r} (wanted {VERSION})")
        if self.server is not None and config.get("EMBEDDING_URL") != self.server.embed_url:
            wrong.append(f"EMBEDDING_URL={config.get('EMBEDDING_URL')!r}")
        if wrong:
            raise PeerError(f"{self.name}: settings did not take effect: {', '.join(wrong)}")

    def describe(self) -> list[str]:
        config = self.hello.get("config") or {}
        shown = ", ".join(
            f"{k}={config[k]}"
            for k in (
                "RECALL_MODE",
                "FUSED_GATE_ENABLED",
                "AUTOCUT_ENABLED",
                "BLOCK_BUILD_ENABLED",
                "MAX_MEMORIES",
            )
            if k in config
        )
        served = f"{self.server.texts} texts in {self.server.requests} requests" if self.server else "nothing"
        hello = self.hello
        return [
            f"PyPI `cpersona=={hello.get('version')}` in its own venv (Python {hello.get('python')}), "
            f"library calls (`server.do_store_boundary`, `memory_handlers.do_recall`) in a subprocess; "
            f"effective config: {shown}; the loopback `/embed` server served {served}",
        ]

    @staticmethod
    def records(units: Sequence[Unit]) -> list[dict[str, Any]]:
        return [
            {
                "content": unit.content,
                "msg_id": unit.unit_id,
                "timestamp": iso_utc(unit.timestamp),
                "metadata": unit.metadata,
            }
            for unit in units
        ]

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        replies = await self.store_chunks(conv_id, self.records(units))
        results = [result for reply in replies for result in reply["results"]]
        known = self._refs.setdefault(conv_id, {})
        for unit, result in zip(units, results, strict=True):
            if not isinstance(result.get("id"), int) or result["id"] <= 0:
                raise PeerError(f"{self.name}: store of {unit.unit_id!r} gave no row id: {result}")
            known.setdefault(f"mem:{result['id']}", []).append(unit.unit_id)

    @property
    def takes_time_cue(self) -> bool | None:
        """Whether the running release's recall has a ``time_cue`` parameter (``None`` before start)."""
        said = self.hello.get("time_cue")
        return None if not isinstance(said, dict) else bool(said.get("parameter"))

    @property
    def takes_trace(self) -> bool | None:
        """Whether the running release's recall has a ``trace`` parameter (``None`` before start)."""
        said = self.hello.get("trace")
        return None if not isinstance(said, dict) else bool(said.get("parameter"))

    def unit_ids(self, conv_id: str, row: dict[str, Any]) -> list[str]:
        """The unit ids one returned row stands for (several when CPersona folded repeats into it)."""
        return list(self._refs.get(conv_id, {}).get(row["ref"]) or ([row["id"]] if row.get("id") else []))

    async def recall(
        self, conv_id: str, question: str, limit: int, *, time_cue: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """One recall as the worker answers it: ``rows`` (each with ``units``, the unit ids it stands for,
        and ``signal``), ``elapsed_ms`` and, when a cue was given, CPersona's ``time_cue`` report."""
        fields = {} if time_cue is None else {"time_cue": dict(time_cue)}
        reply = await self.call("recall", agent=conv_id, query=question, limit=limit, **fields)
        for row in reply["rows"]:
            row["units"] = self.unit_ids(conv_id, row)
        return reply

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        reply = await self.recall(conv_id, question, k)
        self.recall_ms.append(float(reply["elapsed_ms"]))
        ids: list[str] = []
        for row in reply["rows"]:
            for unit_id in row["units"]:
                if unit_id not in ids:
                    ids.append(unit_id)
        return ids[:k]

    async def reconstruct(self, conv_id: str, question: str, mode: str | None = None) -> dict[str, Any]:
        """One ``do_reconstruct`` at its defaults (``mode`` lite or pro when given): ``items``, each with
        ``refs`` (every ref it cites) and ``units`` (the unit ids those refs stand for); ``elapsed_ms``."""
        fields = {} if mode is None else {"mode": mode}
        reply = await self.call("reconstruct", agent=conv_id, query=question, **fields)
        for item in reply["items"]:
            units = [self.unit_ids(conv_id, {"ref": ref}) for ref in item["refs"]]
            item["units"] = list(dict.fromkeys(unit for group in units for unit in group))
        return reply

    async def declare_entities(self, conv_id: str, names: Sequence[str], *, anchor: str = "") -> int:
        """Declare ``names`` as entities of agent ``conv_id``, mentioned by the record ``anchor`` when one
        is named; how many entities were recorded (without an anchor) or mentions (with one)."""
        reply = await self.call("declare", agent=conv_id, entities=list(names), anchor=anchor)
        return int(reply["mentions"] if anchor else reply["entities"])
