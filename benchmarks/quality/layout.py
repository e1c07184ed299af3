"""How the quality command groups a dataset's questions: the rows of its tables, the panels of its chart.

LoCoMo groups by category (:data:`LOCOMO_LAYOUT`); TMD by question set, where a question of a time set
also counts in the row of all time sets (``TMD_LAYOUT`` in :mod:`.tmd_peers`). The harness averages every
metric over each group a question is in and once over all questions (``overall``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final, Protocol

from benchmarks.quality.locomo import CATEGORY_NAMES, RECALL_CATEGORIES

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping

__all__ = ["LOCOMO_LAYOUT", "GroupedQuestion", "Layout"]


class GroupedQuestion(Protocol):
    """What the harness reads of a question (LoCoMo's :class:`Question`, TMD's ``TmdQuestion``)."""

    @property
    def qid(self) -> str: ...
    @property
    def conv_id(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def category(self) -> Any: ...
    @property
    def evidence(self) -> tuple[str, ...]: ...


def _by_category(question: GroupedQuestion) -> tuple[Hashable, ...]:
    return (question.category,)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a dataset's questions are grouped: the rows of every table and the panels of the chart."""

    groups: tuple[Hashable, ...]
    """Table rows in order; the overall row follows them."""
    labels: Mapping[Hashable, str]
    group_of: Callable[[Any], tuple[Hashable, ...]]
    """The groups a question is averaged in besides overall (it may count in more than one)."""
    chart_groups: tuple[Hashable, ...]
    chart_title: str
    overall_label: str = "**overall**"
    row_name: str = "category"


LOCOMO_LAYOUT: Final = Layout(
    groups=RECALL_CATEGORIES,
    labels={category: f"{category} {CATEGORY_NAMES[category]}" for category in RECALL_CATEGORIES},
    group_of=_by_category,
    chart_groups=RECALL_CATEGORIES,
    chart_title="LoCoMo turn-level recall@k (non-adversarial, no time cue)",
    overall_label="**overall** (non-adversarial)",
)
