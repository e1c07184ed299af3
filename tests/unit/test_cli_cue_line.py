"""The CLI's one line for a recall's ``time_cue``: words and times, never a Python repr."""

from __future__ import annotations

from cpersona.edges.cli.main import _cue_line

PERIOD = ["2026-07-16T12:00:00Z", "2026-09-16T12:00:00Z"]


def test_a_used_cue_names_its_period_confidence_widening_and_moves() -> None:
    cue = {
        "policy": "cued-v0.4",
        "period": PERIOD,
        "confidence": "likely",
        "revised": False,
        "moved": 1,
        "seated": 0,
    }
    assert _cue_line(cue) == (
        "time cue: 2026-07-16T12:00:00Z .. 2026-09-16T12:00:00Z (likely), not widened; "
        "1 row(s) moved up, 0 seated"
    )


def test_a_widened_cue_says_so() -> None:
    cue = {
        "policy": "cued-v0.4",
        "period": PERIOD,
        "confidence": "vague",
        "revised": True,
        "moved": 0,
        "seated": 2,
    }
    assert "(vague), widened once; 0 row(s) moved up, 2 seated" in _cue_line(cue)


def test_an_ignored_cue_says_why() -> None:
    cue = {"policy": "cued-v0.4", "ignored": "recent_only", "period": None}
    line = _cue_line(cue)
    assert line == "time cue: no period, not used (recent_only)"
    assert "None" not in line
