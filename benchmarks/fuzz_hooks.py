"""schemathesis hooks for benchmarks/fuzz.sh: the one rule of a request that a JSON schema cannot say.

Runs inside schemathesis' own venv (.venv-fuzz), so it imports nothing of cpersona.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

# schemathesis lives only in .venv-fuzz, not in the venv mypy checks with.
import schemathesis  # type: ignore[import-not-found, unused-ignore]


def _seconds(value: object) -> float | None:
    # As cpersona reads a time (cpersona.model.epoch_time): epoch seconds, or ISO 8601 text.
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    return None


def _period(body: dict[str, Any]) -> tuple[float | None, float | None]:
    start, end = _seconds(body.get("start_time")), _seconds(body.get("end_time"))
    history = body.get("history")
    times = (
        [t for t in (_seconds(m.get("timestamp")) for m in history if isinstance(m, dict)) if t is not None]
        if isinstance(history, list)
        else []
    )
    if times:
        start = min(times) if start is None else start
        end = max(times) if end is None else end
    return start, end


@schemathesis.hook("filter_body").apply_to(path="/v1/episodes")  # type: ignore[untyped-decorator, unused-ignore]
def episode_period_in_order(ctx: Any, body: Any) -> bool:
    """An episode ends no earlier than it starts (else 400 naming end_time), a rule between two fields."""
    if not isinstance(body, dict):
        return True
    start, end = _period(body)
    return start is None or end is None or end >= start


def _cue_moment(value: object, *, end_of_day: bool) -> float | None:
    # As cpersona reads a cue's after/before (cpersona.model.time_cue_request): a date means its
    # midnight, or the end of that day in before.
    if not isinstance(value, str):
        return None
    try:
        if len(value) == 10:
            day = datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()
            return day + 86_400.0 if end_of_day else day
        return _seconds(value)
    except ValueError:
        return None


@schemathesis.hook("filter_body").apply_to(path=["/v1/recall/query", "/v1/reconstruct"])  # type: ignore[untyped-decorator, unused-ignore]
def cue_period_in_order(ctx: Any, body: Any) -> bool:
    """A time cue's before is later than its after (else 400 naming time_cue.before)."""
    cue = body.get("time_cue") if isinstance(body, dict) else None
    if not isinstance(cue, dict):
        return True
    after = _cue_moment(cue.get("after"), end_of_day=False)
    before = _cue_moment(cue.get("before"), end_of_day=True)
    return after is None or before is None or before > after
