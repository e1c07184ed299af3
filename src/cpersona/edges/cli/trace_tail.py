"""``cpersona trace tail``: follow the recall traces that engines publish on Redis, as they happen.

The tailer only listens. It connects to the Redis the engines use — ``CPERSONA_REDIS_URL``, or, when that
is unset, the embedded server that a running engine started for the data dir, found through the
``redis/redis.url`` file that :class:`~cpersona.stores.redis.server.EmbeddedRedis` writes (it never starts a
Redis of its own: the data dir belongs to the engine) — subscribes to one agent's trace channel or to the
pattern of all of them, and prints each trace: one JSON object per line (``--json``), or a short readable
account of the recall, stage by stage. When that Redis goes away (the server restarts) the tailer says
so and subscribes again once it is back, reading the URL file anew (a restarted server may listen
elsewhere).

A trace carries references and scores, never stored text and not the question, so the readable account
shows what each stage did to which refs: the arms' lists, the gate's decisions, what autocut and the
count cut removed, the held seats, the coverage ledger's summary and the timing.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO, cast

import anyio
import orjson

from cpersona.errors import RedisUnavailable
from cpersona.keys import Keys
from cpersona.stores.redis.connection import close_redis, connect_redis, redact_url, redis_errors

if TYPE_CHECKING:
    from cpersona.settings import Settings

__all__ = ["render_trace", "tail_traces", "trace_redis_url"]

# How long one wait for a message lasts. The wait is repeated forever; a bounded wait keeps every read
# under a deadline, so a dead connection shows up as an error instead of a silent hang.
_POLL_SECS = 1.0
# The pause before the first attempt to reach a Redis that went away; it doubles up to the max.
_BACKOFF_FIRST_SECS = 0.5
_BACKOFF_MAX_SECS = 10.0
# Refs shown per arm list and per dropped set in the readable account; the JSON form has them all.
_TOP = 3


async def trace_redis_url(settings: Settings) -> str:
    """The Redis to listen on: ``CPERSONA_REDIS_URL``, else the embedded server running on the data dir.

    Raises :class:`RedisUnavailable` when neither is there: starting a Redis here would take the data dir
    from the engine that owns it, and would carry no traces anyway.
    """
    if settings.redis_url is not None:
        return settings.redis_url
    # EmbeddedRedis's layout: <data_dir>/redis/redis.url holds the running server's URL, and is removed
    # when the server stops cleanly.
    url_file = anyio.Path(settings.data_dir) / "redis" / "redis.url"
    try:
        url = (await url_file.read_text()).strip()
    except FileNotFoundError:
        url = ""
    if not url:
        raise RedisUnavailable(
            f"no cpersona Redis is running for the data dir {settings.data_dir} (no {url_file}): start an "
            "engine there (cpersona serve), or set CPERSONA_REDIS_URL to the Redis your engines use"
        )
    return url


async def tail_traces(
    settings: Settings,
    *,
    agent: str | None = None,
    project: str | None = None,
    as_json: bool = False,
    count: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the traces published for ``agent`` (or every agent) until ``count`` were printed, or forever.

    ``project`` keeps the traces whose scope names that project. Returns how many traces were printed.
    A line ``listening on <channel>`` goes to ``err`` each time the subscription is in place. A Redis
    that cannot be reached at the start is an error (:class:`RedisUnavailable`); one lost later (the
    server restarts) is waited for, with a pause that doubles up to ``_BACKOFF_MAX_SECS``, and each
    attempt is said on ``err``.
    """
    keys = Keys(settings.key_prefix)
    tail = _Tail(
        settings,
        target=keys.trace_pattern if agent is None else keys.trace_channel(agent),
        pattern=agent is None,
        project=project,
        as_json=as_json,
        count=count,
        out=sys.stdout if out is None else out,
        err=sys.stderr if err is None else err,
    )
    await tail.follow()
    return tail.printed


@dataclasses.dataclass(slots=True)
class _Tail:
    """One ``trace tail``: what it listens to, where it prints, and how far it got."""

    settings: Settings
    target: str
    pattern: bool
    project: str | None
    as_json: bool
    count: int | None
    out: TextIO
    err: TextIO
    printed: int = 0
    subscribed: bool = False
    pause: float = _BACKOFF_FIRST_SECS

    def done(self) -> bool:
        return self.count is not None and self.printed >= self.count

    async def follow(self) -> None:
        while not self.done():
            try:
                await self.listen()
            except RedisUnavailable as exc:
                if not self.subscribed:
                    raise  # never reached: there is nothing to wait for
                print(
                    f"lost the traces ({exc}); reconnecting in {self.pause:.1f} s", file=self.err, flush=True
                )
                await anyio.sleep(self.pause)
                self.pause = min(self.pause * 2, _BACKOFF_MAX_SECS)

    async def listen(self) -> None:
        """Subscribe once and print until done; raises :class:`RedisUnavailable` when Redis goes away."""
        url = await trace_redis_url(self.settings)
        client = await connect_redis(self.settings, url)
        try:
            pubsub = client.pubsub()
            try:
                async with redis_errors(f"cannot subscribe to {self.target} on {redact_url(url)}"):
                    await _subscribe(pubsub, self.target, pattern=self.pattern, settings=self.settings)
                again = "reconnected: " if self.subscribed else ""
                print(f"{again}listening on {self.target} at {redact_url(url)} (Ctrl-C to stop)",
                      file=self.err, flush=True)  # fmt: skip
                self.subscribed, self.pause = True, _BACKOFF_FIRST_SECS
                while not self.done():
                    received = await _next_trace(pubsub, self.err)
                    if received is not None:
                        self.show(*received)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.settings.redis_timeout_secs):
                    # The type stubs predate aclose (close is deprecated in redis-py and warns).
                    await cast("Any", pubsub).aclose()
        finally:
            await close_redis(client)

    def show(self, payload: bytes, trace: dict[str, Any]) -> None:
        if self.project is not None and _scope(trace).get("project_id") != self.project:
            return
        if self.as_json:
            print(payload.decode("utf-8", "replace"), file=self.out, flush=True)
        else:
            print(render_trace(trace, received=time.time()), file=self.out, flush=True)
        self.printed += 1


async def _subscribe(pubsub: Any, target: str, *, pattern: bool, settings: Settings) -> None:
    if pattern:
        await pubsub.psubscribe(target)
    else:
        await pubsub.subscribe(target)
    # Wait for the server's confirmation: from then on nothing published is missed.
    with anyio.fail_after(settings.redis_timeout_secs):
        while True:
            reply = await pubsub.get_message(timeout=_POLL_SECS)
            if reply is not None and _text(reply.get("type")) in ("subscribe", "psubscribe"):
                return


async def _next_trace(pubsub: Any, err: TextIO) -> tuple[bytes, dict[str, Any]] | None:
    """The next published trace (its bytes and its JSON), or ``None`` when the poll brought none."""
    async with redis_errors("lost the trace subscription"):
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=_POLL_SECS)
    if message is None or _text(message.get("type")) not in ("message", "pmessage"):
        return None
    payload = message.get("data")
    if not isinstance(payload, bytes):
        return None
    try:
        trace = orjson.loads(payload)
    except orjson.JSONDecodeError:
        channel = _text(message.get("channel"))
        print(f"skipped a message on {channel} that is not JSON", file=err, flush=True)
        return None
    return (payload, trace) if isinstance(trace, dict) else None


# ------------------------------------------------------------------------------------------ rendering


def render_trace(trace: Mapping[str, Any], *, received: float | None = None) -> str:
    """A readable account of one recall trace, a few lines, stage by stage (no stored text)."""
    lines = [_header(trace, received)]
    request = _map(trace.get("request"))
    policy = _map(trace.get("policy"))
    what = [f"policy {policy.get('process', '?')}"]
    if policy.get("scoring"):
        what[0] += f" (scoring {policy['scoring']})"
    what.append(f"mode {request.get('mode', trace.get('mode', '?'))}")
    what.append(f"limit {request.get('limit', '?')}")
    what.append(f"depth {request.get('depth', '?')}")
    if request.get("deep"):
        what.append("deep")
    lines.append(_line("request", "  ".join(what)))
    lines.extend(_arms(_map(trace.get("arms"))))
    lines.extend(_fusion(trace.get("fusion")))
    lines.append(_line("gate", _gate(_map(trace.get("gate")))))
    lines.append(_line("autocut", _autocut(_map(trace.get("autocut")))))
    lines.append(_line("count", _count(_map(trace.get("order")))))
    cue = _cue(trace)
    if cue:
        lines.append(_line("time cue", cue))
    lines.append(_line("seats", _seats(trace.get("reservation", trace.get("seats")))))
    if "coverage" in trace:
        lines.append(_line("coverage", _coverage(_map(trace.get("coverage")))))
    degraded = trace.get("degraded")
    if isinstance(degraded, Sequence) and not isinstance(degraded, str) and degraded:
        parts = [f"{_map(d).get('arm', '?')} {_map(d).get('status', '?')}" for d in degraded]
        lines.append(_line("degraded", ", ".join(parts)))
    lines.append(_line("timing", _timing(_map(trace.get("timing_ms")))))
    return "\n".join(lines)


def _cue(trace: Mapping[str, Any]) -> str:
    """The cue loop in one line: the stages it searched, what it moved and seated, why it stopped."""
    ignored = _map(trace.get("cue_ignored"))
    if ignored:
        return f"not used ({ignored.get('reason', '?')})"
    cue = _map(trace.get("cue"))
    if not cue:
        return ""
    stages = trace.get("stages")
    searched = []
    if isinstance(stages, Sequence) and not isinstance(stages, str):
        for stage in stages:
            entry = _map(stage)
            if "confidence" in entry:
                searched.append(f"{entry['confidence']} found {entry.get('found', '?')}")
    parts = [" then ".join(searched) or "no stage"]
    lifted = cue.get("lifted")
    seated = cue.get("seated")
    parts.append(
        f"moved {len(lifted) if isinstance(lifted, Sequence) else '?'} (at most {cue.get('bound', '?')})"
    )
    parts.append(f"seated {len(seated) if isinstance(seated, Sequence) else '?'}")
    stop = _map(trace.get("budget")).get("stop")
    if stop:
        parts.append(f"stopped: {str(stop).replace('_', ' ')}")
    return ", ".join(parts)


def _header(trace: Mapping[str, Any], received: float | None) -> str:
    scope = _scope(trace)
    when = "" if received is None else " " + time.strftime("%H:%M:%S", time.localtime(received))
    parts = [f"agent {scope.get('agent_id', '?')!s}"]
    for key, label in (("project_id", "project"), ("channel", "channel"), ("source_id", "source")):
        value = scope.get(key)
        if value:
            parts.append(f"{label} {value}")
    version = trace.get("trace_version")
    tail = f"  (trace v{version})" if version is not None else ""
    return f"── recall{when}  {'  '.join(parts)}{tail}"


def _line(label: str, text: str) -> str:
    return f"   {label:<9}{text}"


def _arms(arms: Mapping[str, Any]) -> list[str]:
    if not arms:
        return [_line("arms", "none ran")]
    lines = []
    for n, (name, rows) in enumerate(arms.items()):
        listed = _rows(rows)
        top = ", ".join(f"{_map(r).get('ref', '?')} {_num(_map(r).get('raw'))}" for r in listed[:_TOP])
        more = f", +{len(listed) - _TOP}" if len(listed) > _TOP else ""
        shown = f"  [{top}{more}]" if listed else ""
        lines.append(_line("arms" if n == 0 else "", f"{name} {len(listed)}{shown}"))
    return lines


def _fusion(fusion: object) -> list[str]:
    rows = _rows(fusion)
    if not rows:
        return []
    top = ", ".join(f"{_map(r).get('ref', '?')} {_num(_map(r).get('score'))}" for r in rows[:_TOP])
    return [_line("fusion", f"{len(rows)} candidate(s)  [{top}]")]


def _gate(gate: Mapping[str, Any]) -> str:
    if not gate:
        return "-"
    head = [f"origin {gate.get('origin', '?')}"]
    if gate.get("signal") is not None:
        head.append(f"signal {gate['signal']}")
    threshold = gate.get("threshold", gate.get("heuristic_min"))
    if threshold is not None:
        head.append(f"threshold {_num(threshold)}")
    if gate.get("calibrated") is not None:
        head.append(f"calibrated {_num(gate['calibrated'])}")
    head.append(f"pool {gate.get('pool', '?')}")
    decisions = [_map(d) for d in _rows(gate.get("decisions"))]
    passed = sum(1 for d in decisions if d.get("passed"))
    dropped = [d for d in decisions if not d.get("passed")]
    text = ", ".join(head) + f": {passed} passed, {len(dropped)} dropped"
    if dropped:
        why = collections.Counter(str(d.get("reason") or d.get("signal") or "?") for d in dropped)
        text += " (" + ", ".join(f"{reason}: {n}" for reason, n in why.most_common()) + ")"
        text += "  [" + _refs([d.get("ref") for d in dropped]) + "]"
    if gate.get("gate_fallback"):
        text += "  fallback"
    return text


def _autocut(autocut: Mapping[str, Any]) -> str:
    if not autocut:
        return "-"
    dropped = _rows(autocut.get("dropped"))
    if not autocut.get("fired") and not dropped:
        return "did not fire"
    kept = autocut.get("kept")
    text = f"fired: dropped {len(dropped)}" + ("" if kept is None else f", kept {kept}")
    return text + (f"  [{_refs(dropped)}]" if dropped else "")


def _count(order: Mapping[str, Any]) -> str:
    if not order:
        return "-"
    cut = _rows(order.get("cut_by_count"))
    before = _rows(order.get("before_cut"))
    kept = len(before) - len(cut)
    text = f"limit {order.get('limit', '?')}: {len(before)} ranked, cut {len(cut)}, {kept} kept"
    return text + (f"  [{_refs(cut)}]" if cut else "")


def _seats(seats: object) -> str:
    rows = [_map(s) for s in _rows(seats)]
    if not rows:
        return "none"
    return ", ".join(f"{s.get('kind', '?')} {s.get('ref', '?')}" for s in rows)


def _coverage(coverage: Mapping[str, Any]) -> str:
    parts = _rows(coverage.get("parts"))
    uncovered = _rows(coverage.get("uncovered"))
    text = f"{len(parts)} part(s): {len(parts) - len(uncovered)} covered, {len(uncovered)} uncovered"
    if coverage.get("parts_omitted"):
        text += f" (+{coverage['parts_omitted']} omitted)"
    return text


def _timing(timing: Mapping[str, Any]) -> str:
    if not timing:
        return "-"
    total = timing.get("total")
    steps = [f"{name} {_num(ms, 1)}" for name, ms in timing.items() if name != "total"]
    text = ", ".join(steps)
    if total is not None:
        text = f"total {_num(total, 1)} ms" + (f" ({text})" if text else "")
    return text


# ------------------------------------------------------------------------------------------ helpers


def _scope(trace: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(trace.get("scope"))


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _rows(value: object) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return []


def _refs(refs: Sequence[object]) -> str:
    shown = [str(_map(r).get("ref", "?")) if isinstance(r, Mapping) else str(r) for r in refs[:_TOP]]
    more = f", +{len(refs) - _TOP}" if len(refs) > _TOP else ""
    return ", ".join(shown) + more


def _num(value: object, places: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    return f"{value:.{places}f}" if isinstance(value, float) else str(value)


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
