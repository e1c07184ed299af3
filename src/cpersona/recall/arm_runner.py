"""How one arm runs inside a recall: under its own deadline, a failure or a late answer turned into an
empty list that names why, and the engine's arm wrapper (a testing and benchmark seam fixed when the
engine opens) applied around the call.

Also :class:`Later`, the one-shot value the recall's concurrent tasks hand each other (the query vector,
the calibrated gate), so no task reads a shared dict.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from cpersona.model.candidates import ArmName, ArmResult

if TYPE_CHECKING:
    from cpersona.settings import Settings

__all__ = ["ArmCall", "ArmRunner", "ArmWrapper", "Later"]

log = logging.getLogger("cpersona.recall")

ArmCall = Callable[[], Awaitable[ArmResult]]
ArmWrapper = Callable[[ArmName, ArmCall], ArmCall]
"""Wraps each arm call of every recall of one engine (to switch an arm off, slow it down, count it).
Given to ``cpersona.open(arm_wrapper=...)`` by tests and benchmarks; production passes none."""

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class ArmRunner:
    """Runs arms for one engine: its arm deadline and its arm wrapper, if any."""

    timeout_ms: float
    wrapper: ArmWrapper | None = None

    @classmethod
    def of(cls, settings: Settings, wrapper: ArmWrapper | None) -> ArmRunner:
        return cls(settings.recall_arm_timeout_ms, wrapper)

    @property
    def late_detail(self) -> str:
        return f"no answer within {self.timeout_ms:g} ms"

    async def run(
        self, name: ArmName, call: ArmCall, *, within_s: float | None = None, late: str | None = None
    ) -> ArmResult:
        """The arm's result, timed. Past ``within_s`` (default: the arm deadline) it is a timeout whose
        detail is ``late`` (default: the deadline's); an exception is an error naming it. Cancellation
        from outside is never caught here."""
        wrapped = call if self.wrapper is None else self.wrapper(name, call)
        t0 = time.perf_counter()
        result = ArmResult(name)
        with anyio.move_on_after(self.timeout_ms / 1000 if within_s is None else within_s) as scope:
            try:
                result = await wrapped()
            except Exception as exc:
                log.warning("recall arm %s failed: %s", name, exc)
                result = ArmResult(name, status="error", detail=f"{type(exc).__name__}: {exc}")
        if scope.cancelled_caught:
            result = ArmResult(name, status="timeout", detail=self.late_detail if late is None else late)
        return dataclasses.replace(result, elapsed_ms=(time.perf_counter() - t0) * 1000)


class Later(Generic[T]):
    """A value one task of a recall sets once and others wait for."""

    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._value: tuple[T, ...] = ()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self, value: T) -> None:
        if self._event.is_set():
            raise RuntimeError("a Later value is set once")
        self._value = (value,)
        self._event.set()

    async def wait(self) -> T:
        await self._event.wait()
        return self._value[0]

    def get(self) -> T:
        """The value, once set (after the task group that set it has finished)."""
        if not self._event.is_set():
            raise RuntimeError("the value was never set")
        return self._value[0]
