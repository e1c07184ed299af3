"""The README's walk-through, run as written against a fresh ``cpersona serve``.

Every command of the walk-through's ``console`` blocks runs in bash, in order, against a real server the
test starts on a free port and a new data dir (the README's port is replaced by that one); each must
succeed, and what it prints must be what the README shows under it, ids and clock times aside. A block
titled as another terminal (``trace tail``) runs in the background from where it stands to the end. The
addresses the walk-through tells the reader to open must answer. The README's ``serve`` output is held
to what this server printed, and its Python example runs in a process of its own and prints what the
README shows. So a README command that breaks, or whose output drifts, fails here.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from readme_blocks import Block, Step, blocks, normalized, section, shown_matches, steps
from serving import environment_without_settings, start_serve, stop_serve

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

README = Path(__file__).resolve().parents[2] / "README.md"
WALK_THROUGH = "## A five-minute walk-through"
# What the README shows for the port and the data dir of a server started as it says.
README_PORT = "8077"
README_DATA_DIR = "/home/you/.local/share/cpersona"
_WAIT_SECS = 60.0
_COMMAND_SECS = 120.0


def _run_steps(shell_env: dict[str, str], cwd: Path, port: int) -> None:
    """Run the walk-through's blocks in order, background ones from where they stand to the end."""
    walk = section(README.read_text(), WALK_THROUGH)
    background: list[tuple[Step, subprocess.Popen[bytes], Path]] = []
    try:
        for block in blocks(walk):
            if block.lang != "console":
                continue
            for step in steps(block):
                if "title=" in block.info:
                    out = cwd / f"background-{len(background)}.out"
                    background.append(_start_background(step, shell_env, out, port))
                else:
                    _run_foreground(step, shell_env, cwd, port)
        for step, proc, out in background:
            _wait_until(partial(_matches, step, out, port), proc, out)  # the assert below says what differs
    finally:
        for _, proc, _ in background:
            _interrupt(proc)
    for step, _, out in background:
        assert _matches(step, out, port), _mismatch(step, out.read_text(), port)


def _command(step: Step, port: int) -> str:
    return step.command.replace(f":{README_PORT}", f":{port}")


def _replacements(port: int) -> dict[str, str]:
    return {f":{port}": f":{README_PORT}"}


def _run_foreground(step: Step, shell_env: dict[str, str], cwd: Path, port: int) -> None:
    done = subprocess.run(
        ["bash", "-c", _command(step, port)],
        env=shell_env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=_COMMAND_SECS,
        check=False,
    )
    assert done.returncode == 0, f"`{step.command}` exited {done.returncode}:\n{done.stdout}"
    printed = normalized(done.stdout, _replacements(port))
    assert shown_matches(list(normalized(step.shown)), printed), _mismatch(step, done.stdout, port)


def _start_background(
    step: Step, shell_env: dict[str, str], out: Path, port: int
) -> tuple[Step, subprocess.Popen[bytes], Path]:
    """Start a command the README runs in another terminal, its output into ``out``; returns once it
    prints its first shown line (``trace tail``'s "listening on", said once it is subscribed)."""
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            ["bash", "-c", _command(step, port)],
            env=shell_env,
            cwd=out.parent,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so the interrupt reaches bash's child too
        )
    first = Step(step.command, (*step.shown[:1], "…"))
    _wait_until(partial(_matches, first, out, port), proc, out)
    return step, proc, out


def _matches(step: Step, out: Path, port: int) -> bool:
    """Whether a background command has printed what the README shows (it may print more later)."""
    printed = normalized(out.read_text(), _replacements(port))
    return shown_matches(list(normalized(step.shown)), printed, open_end=True)


def _wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], out: Path) -> bool:
    """Whether ``ready()`` came true within the wait; fails if ``proc`` (writing ``out``) ends first."""
    deadline = time.monotonic() + _WAIT_SECS
    while not ready():
        assert proc.poll() is None, f"exited {proc.returncode}:\n{out.read_text()}"
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _interrupt(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C, as the reader ends it; killed if it does not end."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def _mismatch(step: Step, printed: str, port: int) -> str:
    return (
        f"`{step.command}` printed what the README does not show.\nThe README shows:\n"
        + "\n".join(step.shown)
        + "\nIt printed (port and data dir as the README's):\n"
        + "\n".join(normalized(printed, _replacements(port)))
    )


def _urls(port: int) -> list[str]:
    """The server addresses the walk-through's prose tells the reader to open."""
    walk = section(README.read_text(), WALK_THROUGH)
    found = re.findall(rf"<(http://127\.0\.0\.1:{README_PORT}/[^>]*)>", walk)
    return [url.replace(f":{README_PORT}", f":{port}") for url in found]


def _python_example() -> tuple[Block, Block]:
    """The README's Python example and the output block that follows it."""
    found = blocks(section(README.read_text(), "## Python"))
    at = next(i for i, block in enumerate(found) if block.lang == "python")
    assert found[at + 1].lang == "text", "the Python example is followed by what it prints"
    return found[at], found[at + 1]


def _serve_step() -> Step:
    """The README's install-and-serve command and what it shows ``serve`` printing."""
    for block in blocks(section(README.read_text(), "## Two commands")):
        for step in steps(block) if block.lang == "console" else ():
            if "cpersona serve" in step.command:
                return step
    raise AssertionError("the README's two commands have no `cpersona serve`")


def test_the_walk_through_runs_as_written(tmp_path: Path, free_tcp_port: int) -> None:
    assert shutil.which("curl"), "the walk-through's HTTP steps use curl"
    port = free_tcp_port
    # The Python example runs meanwhile, in a directory of its own (it opens its own data dir there).
    code, example_shown = _python_example()
    example_dir = tmp_path / "example"
    example_dir.mkdir()
    example = subprocess.Popen(
        [sys.executable, "-c", "\n".join(code.lines)],
        env=environment_without_settings(),
        cwd=example_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    data, log = tmp_path / "data", tmp_path / "serve.log"
    server = start_serve(data, port, log)  # the default embedder, as the README's server has
    try:
        # Its "serving" lines come once it answers, the embedder's last.
        assert _wait_until(lambda: "embedder" in log.read_text(), server, log), log.read_text()
        # As a reader's shell finds them: the venv's `cpersona` first on the PATH, the default data dir.
        shell_env = environment_without_settings() | {
            "CPERSONA_DATA_DIR": str(data),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        shell_dir = tmp_path / "shell"
        shell_dir.mkdir()
        _run_steps(shell_env, shell_dir, port)
        for url in _urls(port):
            answer = httpx.get(url, timeout=10)
            assert answer.status_code == 200, (url, answer.text)
    finally:
        stop_serve(server, timeout=30)
        try:
            printed, errors = example.communicate(timeout=_COMMAND_SECS)
        finally:
            example.kill()  # a no-op once it has ended; a hung example does not outlive the test
    assert example.returncode == 0, errors
    assert shown_matches(list(normalized(example_shown.lines)), normalized(printed)), printed

    serve = _serve_step()
    said = normalized(log.read_text(), _replacements(port) | {str(data): README_DATA_DIR})
    assert shown_matches(list(normalized(serve.shown)), said, open_end=True), (
        "the README shows `serve` printing:\n" + "\n".join(serve.shown) + "\nit printed:\n" + "\n".join(said)
    )


def test_the_walk_through_covers_the_first_hour() -> None:
    """What the walk-through must show a new user, so that trimming it cannot leave the test above
    running nothing: a store, a traced recall, a time cue, a reconstruct, the trace tail and page."""
    walk = section(README.read_text(), WALK_THROUGH)
    commands = [step.command for block in blocks(walk) if block.lang == "console" for step in steps(block)]
    said = "\n".join(commands)
    for part in ("/v1/encode", '"trace": true', "--when", "cpersona reconstruct", "cpersona trace tail"):
        assert part in said, part
    assert any("/traces" in url for url in _urls(int(README_PORT))), "the trace page"
    assert all(step.shown for block in blocks(walk) for step in steps(block)), "each shows its output"
