"""Smoke test of the trace-cost benchmark (``benchmarks/trace_cost.py``, seed §1.4 item 3).

It runs the ``--quick`` path on a store small enough for CI (built here, embedded Redis and Qdrant) and
checks the shape of what it measured and reported: every pair asked both ways, every traced recall's
trace published, the ratio a finite number. How large the figures are is the benchmark's business, not
this test's: nothing here compares a time with a threshold.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pytest
from benchmarks.trace_cost import Sample, main, summarise

if TYPE_CHECKING:
    from pathlib import Path


def test_summary_pairs_and_ratios_come_from_the_samples() -> None:
    samples = [
        Sample(
            0, True, 12.0, 10.0, trace_ms=0.5, coverage_ms=0.5, encode_ms=0.1, publish_ms=0.3, trace_bytes=900
        ),
        Sample(0, False, 10.0, 9.0),
        Sample(1, False, 11.0, 10.0),
        Sample(
            1,
            True,
            14.0,
            20.0,
            trace_ms=1.0,
            coverage_ms=1.0,
            encode_ms=0.2,
            publish_ms=0.4,
            trace_bytes=1100,
        ),
        Sample(2, True, 9.0, 5.0, trace_ms=1.0, coverage_ms=0.0),  # a pair left without its untraced half
    ]
    s = summarise(samples)
    assert s["recalls"] == {"traced": 3, "untraced": 2, "pairs": 2}
    assert s["ratio"]["p50"] == pytest.approx(0.1)
    assert s["ratio"]["mean"] == pytest.approx((0.1 + 0.1 + 0.2) / 3)
    assert s["ratio"]["of_means"] == pytest.approx((1.0 + 2.0 + 1.0) / (10.0 + 20.0 + 5.0))
    # traced minus untraced end to end, per complete pair only: 12 - 10 and 14 - 11
    assert s["end_to_end_ms"]["paired_difference"]["mean"] == pytest.approx(2.5)
    assert s["trace_cost_ms"]["mean"] == pytest.approx(4.0 / 3)


def test_summary_of_no_traced_recall_is_not_a_number() -> None:
    s = summarise([Sample(0, False, 10.0, 9.0)])
    assert math.isnan(s["ratio"]["p50"])
    assert math.isnan(s["ratio"]["mean"])


@pytest.mark.slow
def test_quick_run_reports_every_field(tmp_path: Path) -> None:
    out = tmp_path / "trace_cost.md"
    pairs = 6
    run = main(["--quick", "--size", "60", "--pairs", str(pairs), "--warmup", "1", "--out", str(out)])
    s = run.summary
    assert run.size == 60
    assert run.warmup == 1
    assert s["recalls"] == {"traced": pairs, "untraced": pairs, "pairs": pairs}
    # the order alternates: traced first in even pairs, untraced first in odd ones
    firsts = [sample.traced for sample in run.samples[::2]]
    assert firsts == [pair % 2 == 0 for pair in range(pairs)]
    for key in ("p50", "mean", "of_means"):
        assert math.isfinite(s["ratio"][key])
        assert s["ratio"][key] > 0
    for sample in run.samples:
        if sample.traced:
            assert sample.trace_bytes > 0
            assert sample.trace_ms > 0
        else:
            assert sample.trace_ms == sample.coverage_ms == sample.trace_bytes == 0
    # each traced recall's trace went out on the channel (the warm-up pair's too), and nothing else did
    assert run.publisher["published"] == pairs + 1
    assert run.publisher["dropped"] == run.publisher["failed"] == run.publisher["queued"] == 0
    text = out.read_text(encoding="utf-8")
    for field in (
        "- command:",
        "- date:",
        "- git commit:",
        "- machine:",
        "- 1-minute load average:",
        "timing_ms.total",
        "timing_ms.trace",
        "timing_ms.coverage",
        "ratio trace cost / recall time",
        "publish step",
    ):
        assert field in text
