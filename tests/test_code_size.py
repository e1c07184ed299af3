"""benchmarks/code_size.py on a small tree: lengths, names, order, the targets and the script itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks import code_size

SCRIPT = Path(code_size.__file__)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    write(
        root / "pkg" / "a.py",
        # 1: one-line function; 3-8: a class whose method (4-8) holds a nested function (5-6); 10-12: async.
        "def short(): return 1\n"
        "\n"
        "class Box:\n"
        "    def method(self):\n"
        "        def inner():\n"
        "            return 2\n"
        "\n"
        "        return inner()\n"
        "\n"
        "async def later():\n"
        "    x = 1\n"
        "    return x\n",
    )
    write(root / "pkg" / "b.py", "@staticmethod\ndef decorated():\n    pass\n")
    write(root / "pkg" / "big.py", "X = 1\n" * 70 + "def long():\n" + "    y = 1\n" * 64)
    write(root / "notes.txt", "not python\n" * 1000)
    return root


def test_lengths_and_names_of_every_function_and_module(tree: Path) -> None:
    funcs, modules = code_size.measure(tree)
    a, b, big = (str(tree / "pkg" / name) for name in ("a.py", "b.py", "big.py"))
    assert [(s.lines, s.where) for s in funcs] == [
        (65, f"{big}:long"),
        (5, f"{a}:Box.method"),
        (3, f"{a}:later"),
        (2, f"{a}:Box.method.inner"),
        # From the def line: the decorator is not counted.
        (2, f"{b}:decorated"),
        (1, f"{a}:short"),
    ]
    assert [(s.lines, s.where) for s in modules] == [(135, big), (12, a), (3, b)]


def test_the_report_names_the_worst_against_its_target_then_the_top(tree: Path) -> None:
    funcs, modules = code_size.measure(tree)
    lines = code_size.report(funcs, modules, top=2)
    big = tree / "pkg" / "big.py"
    assert lines[0] == f"longest function: 65 lines, {big}:long (target <= 60 lines; 1 over the target)"
    assert lines[1] == f"largest module: 135 lines, {big} (target <= 400 lines; within the target)"
    assert lines[2:] == [
        "",
        "2 longest functions:",
        f"     65  {big}:long",
        f"      5  {tree / 'pkg' / 'a.py'}:Box.method",
        "",
        "2 largest modules:",
        f"    135  {big}",
        f"     12  {tree / 'pkg' / 'a.py'}",
    ]


def test_check_fails_only_over_a_target(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert code_size.main([str(tree)]) == 0
    assert code_size.main([str(tree), "--check"]) == 1
    (tree / "pkg" / "big.py").unlink()
    capsys.readouterr()
    assert code_size.main([str(tree), "--check", "--top", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("(target <= 60 lines; within the target)")


def test_an_empty_tree_says_so(tmp_path: Path) -> None:
    assert code_size.report([], [], top=10)[:2] == [
        "longest function: none found (target <= 60 lines)",
        "largest module: none found (target <= 400 lines)",
    ]
    assert code_size.main([str(tmp_path), "--check"]) == 0


def test_it_runs_as_a_script(tree: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tree), "--top", "1"], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[0].startswith("longest function: 65 lines, ")
    assert done.stdout.splitlines()[-1].endswith("big.py")
    missing = subprocess.run(
        [sys.executable, str(SCRIPT), str(tree / "nowhere")], capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert "is not a folder" in missing.stderr


def test_the_package_keeps_its_targets(capsys: pytest.CaptureFixture[str]) -> None:
    # The house rule (a function ≤ 60 lines, a module ≤ 400) holds for src/ itself, not only in a report.
    assert code_size.main([str(SCRIPT.parents[1] / "src"), "--check", "--top", "0"]) == 0, (
        capsys.readouterr().out
    )
