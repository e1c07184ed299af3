"""reconstruct's modes (§4.1 "Modes", §4.2 stage 10): ``lite`` and ``pro`` hold the whole returned JSON
(envelope included, trace left out) to a cap in cl100k tokens (:mod:`.tokens`).

=================  ==================================  ==============================================
                   ``lite`` (also ``lite: true``)      ``pro``
=================  ==================================  ==============================================
token cap          3,000 (``CPERSONA_RECONSTRUCT_      5,000 (``CPERSONA_RECONSTRUCT_PRO_CAP``)
                   LITE_CAP``)
budget             2,800 characters                    none unless one is given
items              the count default                   15 by default and at most
sequence           ``whole``                           ``whole``, its whole-record floor on the first
                                                       10 items only; held-long-last
recall asks        the keyword seat                    + 2 block seats, + 8 keyword seats, + 8 places
                                                       of depth
=================  ==================================  ==============================================

Both leave out ``bounds`` and the budget fields, and neither walks relations. An item whose only claim is
its head gives that claim's time as the item's ``as_of`` in place of the claim (which would only repeat
``head_ref``); an item of several claims lists them all. A call that chose lite with ``lite: true`` gets
``lite: true`` back beside ``mode: "lite"``, so either spelling finds its own field in the answer.
(CPersona 2.6.14 reads ``lite: true`` as ``mode: "lite"`` before compacting and so never shows its own
``lite`` echo to a caller; the reference lists the field, and here it says which spelling was read.)
The cap is stage 10: the
longest prefix of the sequence whose JSON fits, found by binary search (a longer prefix is never
shorter JSON); if the first piece alone does not fit, the first item keeps only its head claim; if that
does not fit either, the call fails with :class:`CapBelowMinimum`.

Decision (the reference answers a 200 with ``ok: false``): cap_below_minimum is an error, HTTP 422
with the error envelope (``code: "CAP_BELOW_MINIMUM"``, ``field: "mode"``), the ``Engine`` call raises
it (an :class:`~cpersona.InvalidRequest`). A :class:`ReconstructResult` is always an answer
(``ok: true``), so a typed caller never has to test a success for failure.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

import orjson

from cpersona.errors import InvalidRequest
from cpersona.model.policy import PolicyOverlay
from cpersona.operations.reconstruct.candidates import KEYWORD_SEAT
from cpersona.operations.reconstruct.tokens import count_tokens

if TYPE_CHECKING:
    from collections.abc import Callable

    from cpersona.model.reconstruct_request import ReconstructRequest
    from cpersona.model.reconstruct_response import Item, ReconstructResult
    from cpersona.settings import Settings

__all__ = ["HELD_LONG_CHARS", "CapBelowMinimum", "Mode", "hold_to_cap", "mode_of", "tokens_of"]

HELD_LONG_CHARS = 6_000  # a held item's record longer than this is quoted first passage first, rest last

ModeName = Literal["lite", "pro"]


class CapBelowMinimum(InvalidRequest):
    """Not even the first passage with its head claim fits the mode's token cap."""

    code = "CAP_BELOW_MINIMUM"
    status = 422


@dataclasses.dataclass(frozen=True, slots=True)
class Mode:
    name: ModeName
    cap: int
    budget: int | None  # None: no character budget unless the request gives one
    count: int | None  # the count's default and maximum; None: the settings'
    whole_floor: int | None  # items the whole-record floor covers; None: every item
    held_long_last: bool
    overlay: PolicyOverlay  # what the mode asks of its recall's policy
    lite_flag: bool = False  # chosen by ``lite: true`` (echoed), not by ``mode: "lite"``


def mode_of(req: ReconstructRequest, settings: Settings) -> Mode | None:
    name = req.mode or ("lite" if req.lite else None)
    if name == "lite":
        flag = req.mode is None
        return Mode("lite", settings.reconstruct_lite_cap, 2_800, None, None, False, KEYWORD_SEAT, flag)
    if name == "pro":
        overlay = PolicyOverlay(keyword_seats=1 + 8, extra_block_seats=2, depth_places=8)
        return Mode("pro", settings.reconstruct_pro_cap, None, 15, 10, True, overlay)
    return None


def _json_tokens(result: ReconstructResult) -> int:
    return count_tokens(orjson.dumps(result.model_dump(mode="json")).decode())


def tokens_of(result: ReconstructResult, mode: Mode) -> ReconstructResult:
    """``result`` as the mode reports it: the mode, its cap and the JSON's own token count (the count
    includes the ``used_tokens`` field: counted with the cap in it first, an upper bound since no number
    below the cap has more tokens, then again with each count until it reproduces itself)."""
    left_out = ("bounds", "requested_budget", "budget_policy", "effective_budget", "used_budget", "trace")
    update: dict[str, object] = dict.fromkeys(left_out)
    items = [_lone_head(item) for item in result.items]
    update.update(
        items=items, mode=mode.name, cap=mode.cap, used_tokens=mode.cap, lite=mode.lite_flag or None
    )
    compact = result.model_copy(update=update)
    bound = used = _json_tokens(compact)
    for _ in range(3):
        again = _json_tokens(compact.model_copy(update={"used_tokens": used}))
        if again == used:
            return compact.model_copy(update={"used_tokens": used})
        used = again
    return compact.model_copy(update={"used_tokens": bound})  # an upper bound, never reached in practice


def _lone_head(item: Item) -> Item:
    """An item whose only claim is its head, as the modes give it: the claim's time as the item's
    ``as_of``, the claim itself left out (it would repeat ``head_ref``)."""
    claims = item.claims
    if len(claims) != 1 or claims[0].ref != item.head_ref or claims[0].why or claims[0].roles:
        return item
    return item.model_copy(update={"claims": [], "as_of": claims[0].as_of})


def _shrink_claims(result: ReconstructResult) -> ReconstructResult:
    """The first item with its head claim only (the rest counted in ``claims_omitted``)."""
    first, *rest = result.items
    claims = first.claims
    head = [c for c in claims if c.ref == first.head_ref][:1] or claims[:1]
    omitted = (first.claims_omitted or 0) + len(claims) - len(head)
    first = first.model_copy(update={"claims": head, "claims_omitted": omitted or None})
    return result.model_copy(update={"items": [first, *rest]})


def _fits(result: ReconstructResult, mode: Mode) -> bool:
    return result.used_tokens is not None and result.used_tokens <= mode.cap


def hold_to_cap(
    build: Callable[[int | None], tuple[ReconstructResult, int]], mode: Mode
) -> ReconstructResult:
    """Stage 10. ``build(k)`` is the answer with the sequence's first ``k`` pieces (``None``: as the
    budget cut it) and how many pieces it shows. The trace is the caller's to put back."""
    full, pieces = build(None)
    best = tokens_of(full, mode)
    if _fits(best, mode):
        return best
    if not full.items:  # even the empty answer is over the cap
        raise _below(best, mode, "the answer without items")
    lo, hi = 0, pieces  # lo fits (0 stands for "none known yet"), hi does not
    fitted: ReconstructResult | None = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        trial = tokens_of(build(mid)[0], mode)
        if _fits(trial, mode):
            lo, fitted = mid, trial
        else:
            hi = mid
    if fitted is not None:
        return fitted
    shrunk = tokens_of(_shrink_claims(build(1)[0]), mode)
    if _fits(shrunk, mode):
        return shrunk
    raise _below(shrunk, mode, "the first passage with its head claim")


def _below(result: ReconstructResult, mode: Mode, what: str) -> CapBelowMinimum:
    return CapBelowMinimum(
        "mode",
        f"cap_below_minimum: {what} takes {result.used_tokens} cl100k tokens, above the {mode.name} cap "
        f"of {mode.cap}",
    )
