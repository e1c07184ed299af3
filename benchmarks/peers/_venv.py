"""A peer's own virtual environment, created and installed by the benchmark, cached between runs.

Each peer gets ``benchmarks/.cache/peers/<name>/venv`` (gitignored), made with ``<python> -m venv`` from
the interpreter the benchmark runs on (Python 3.11 here, which both peers accept), then ``pip install`` of
its pinned requirements from the package registry. ``installed.json`` beside the venv is written last and
records the requirements, the interpreter and ``pip freeze``; a venv without it, or with other
requirements, is removed and built again, so a half-finished install never passes for a finished one.

Installs are serialised by an advisory lock on ``<name>/.lock`` (two test runs sharing the cache wait for
each other) and bounded by a deadline. A failure raises :class:`~benchmarks.peers._process.PeerError`
with pip's own last lines, which the benchmark reports verbatim.
"""

from __future__ import annotations

import dataclasses
import datetime
import fcntl
import json
import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread

from benchmarks.peers._process import PeerError

__all__ = ["PEERS_CACHE", "PeerVenv"]

PEERS_CACHE: Final = Path(__file__).resolve().parents[1] / ".cache" / "peers"
_INSTALL_SECS: Final = 1_200.0
_LOCK_POLL_SECS: Final = 0.5
_TAIL_LINES: Final = 30


@dataclasses.dataclass(frozen=True)
class PeerVenv:
    """Where a peer's environment lives and what goes into it."""

    name: str
    requirements: tuple[str, ...]
    root: Path = PEERS_CACHE

    @property
    def home(self) -> Path:
        return self.root / self.name

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def marker(self) -> Path:
        return self.home / "installed.json"

    def installed(self) -> dict[str, Any] | None:
        """The install record when the venv is complete and holds these requirements, else ``None``."""
        try:
            record: dict[str, Any] = json.loads(self.marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if record.get("requirements") != list(self.requirements) or not self.python.is_file():
            return None
        return record

    async def ensure(self) -> dict[str, Any]:
        """Create and install the venv unless it is already complete; the install record."""
        record = await anyio.to_thread.run_sync(self.installed)
        if record is not None:
            return record
        await anyio.to_thread.run_sync(lambda: self.home.mkdir(parents=True, exist_ok=True))
        lock = await anyio.to_thread.run_sync(lambda: (self.home / ".lock").open("w"))
        try:
            with anyio.fail_after(_INSTALL_SECS):
                # Another process holds the lock: poll it (an OS lock has no event to wait on).
                while True:
                    if await anyio.to_thread.run_sync(_try_lock, lock):
                        break
                    await anyio.sleep(_LOCK_POLL_SECS)
                # Another run may have finished the install while this one waited.
                record = await anyio.to_thread.run_sync(self.installed)
                if record is None:
                    record = await self._install()
        except TimeoutError:
            raise PeerError(f"installing {self.name} took longer than {_INSTALL_SECS:g} s") from None
        finally:
            await anyio.to_thread.run_sync(lock.close)
        return record

    async def _install(self) -> dict[str, Any]:
        log = self.home / "install.log"
        await anyio.to_thread.run_sync(self._reset, log)
        base = Path(getattr(sys, "_base_executable", sys.executable))
        await self._run([str(base), "-m", "venv", str(self.venv)], log, "creating the venv")
        pip = [str(self.python), "-m", "pip", "--disable-pip-version-check"]
        await self._run(
            [*pip, "install", *self.requirements], log, f"pip install {' '.join(self.requirements)}"
        )
        frozen = await self._run([*pip, "freeze"], log, "pip freeze")
        record = {
            "name": self.name,
            "requirements": list(self.requirements),
            "python": platform.python_version(),
            "base_interpreter": str(base),
            "installed_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "freeze": frozen.splitlines(),
        }
        await anyio.to_thread.run_sync(self._write_marker, record)
        return record

    def _reset(self, log: Path) -> None:
        self.marker.unlink(missing_ok=True)
        shutil.rmtree(self.venv, ignore_errors=True)
        log.write_text("", encoding="utf-8")

    def _write_marker(self, record: dict[str, Any]) -> None:
        partial = self.marker.with_suffix(".tmp")
        partial.write_text(json.dumps(record, indent=2), encoding="utf-8")
        os.replace(partial, self.marker)

    async def _run(self, command: list[str], log: Path, what: str) -> str:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_REQUIRE"))
        }
        result = await anyio.run_process(command, check=False, env=env)
        out = result.stdout.decode(errors="replace")
        err = result.stderr.decode(errors="replace")
        await anyio.to_thread.run_sync(_append, log, f"$ {' '.join(command)}\n{out}{err}\n")
        if result.returncode != 0:
            # pip's warnings about unreachable find-links folders bury the real error; keep the rest.
            lines = [
                line for line in err.splitlines() if line.strip() and "is ignored: it is neither" not in line
            ]
            tail = "\n".join(lines[-_TAIL_LINES:])
            raise PeerError(f"{self.name}: {what} failed (exit {result.returncode}):\n{tail}")
        return out


def _try_lock(handle: Any) -> bool:
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
