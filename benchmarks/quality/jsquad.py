"""Loading JSQuAD (JGLUE's Japanese reading-comprehension set) as a Japanese retrieval set.

* A **paragraph** is one memory: content ``"<title>\\n<text>"`` (the file's context is
  ``"<title> [SEP] <text>"``), unit id ``<article index>-<paragraph index>``, metadata = title. Every
  paragraph goes into one scope (:data:`SCOPE`), stamped one second apart from :data:`EPOCH` in file
  order (the set has no time; the stamps only keep ingest order stable).
* A **question** is one of the file's ``qas``; its gold is the paragraph it was asked about (exactly
  one). ``--quick`` takes every n-th question (a fixed stride, so the sample is the same each run).

The file is JGLUE's JSQuAD v1.3 validation split (CC BY-SA 4.0), evaluation-only data: it is read from
``../shared/data/jsquad`` beside the repository unless another path is given, and never copied into it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import TYPE_CHECKING, Any, Final

from benchmarks.quality.layout import Layout
from benchmarks.quality.locomo import REPO_ROOT

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "DEFAULT_JSQUAD",
    "GROUP",
    "JSQUAD_LAYOUT",
    "QUICK_QUESTIONS",
    "SCOPE",
    "JSQuAD",
    "JsquadQuestion",
    "Paragraph",
    "load_jsquad",
]

DEFAULT_JSQUAD: Final = REPO_ROOT.parent / "shared" / "data" / "jsquad" / "valid-v1.3.json"
SCOPE: Final = "jsquad"
GROUP: Final = "jsquad"
QUICK_QUESTIONS: Final = 300
EPOCH: Final = 1_654_041_600.0  # 2022-06-01 UTC, the year JGLUE was published
_SEPARATOR = " [SEP] "


@dataclasses.dataclass(frozen=True, slots=True)
class Paragraph:
    unit_id: str
    title: str
    content: str
    timestamp: float

    @property
    def metadata(self) -> dict[str, Any]:
        return {"title": self.title}


@dataclasses.dataclass(frozen=True, slots=True)
class JsquadQuestion:
    qid: str
    question: str
    gold: str
    """The unit id of the paragraph the question was asked about."""
    conv_id: str = SCOPE

    @property
    def category(self) -> str:
        return GROUP

    @property
    def evidence(self) -> tuple[str, ...]:
        return (self.gold,)


@dataclasses.dataclass(frozen=True, slots=True)
class JsquadScope:
    """The one scope every paragraph is stored in, read the way the harness reads a conversation."""

    conv_id: str
    turns: tuple[Paragraph, ...]
    questions: tuple[JsquadQuestion, ...]

    @property
    def sessions(self) -> tuple[()]:
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class JSQuAD:
    path: Path
    digest: str
    """sha256 of the file read."""
    articles: int
    total_questions: int
    conversations: tuple[JsquadScope, ...]

    @property
    def paragraphs(self) -> tuple[Paragraph, ...]:
        return self.conversations[0].turns

    @property
    def questions(self) -> list[JsquadQuestion]:
        return list(self.conversations[0].questions)

    def recall_questions(self) -> list[JsquadQuestion]:
        return self.questions


def _content(context: str) -> tuple[str, str]:
    title, sep, text = context.partition(_SEPARATOR)
    if not sep:
        raise ValueError(f"a JSQuAD context without {_SEPARATOR.strip()!r}: {context[:40]!r}")
    return title.strip(), f"{title.strip()}\n{text.strip()}"


def load_jsquad(path: Path = DEFAULT_JSQUAD, *, questions: int | None = None) -> JSQuAD:
    """Read the file: every paragraph, and every question or ``questions`` of them at a fixed stride.

    Raises ``FileNotFoundError`` naming the path when it is not there, ``ValueError`` for a count below 1.
    """
    if not path.is_file():
        raise FileNotFoundError(
            f"JSQuAD not found at {path}; pass --jsquad PATH (it lives in ../shared/data/jsquad beside "
            "the repository)"
        )
    if questions is not None and questions < 1:
        raise ValueError(f"questions must be at least 1, got {questions}")
    raw = path.read_bytes()
    body = json.loads(raw)
    paragraphs: list[Paragraph] = []
    asked: list[JsquadQuestion] = []
    articles = body["data"]
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(article["paragraphs"]):
            unit_id = f"{a}-{p}"
            title, content = _content(str(paragraph["context"]))
            paragraphs.append(Paragraph(unit_id, title, content, EPOCH + len(paragraphs)))
            asked += [
                JsquadQuestion(str(qa["id"]), " ".join(str(qa["question"]).split()), unit_id)
                for qa in paragraph["qas"]
            ]
    total = len(asked)
    if questions is not None and questions < total:
        stride = total // questions
        asked = asked[::stride][:questions]
    scope = JsquadScope(SCOPE, tuple(paragraphs), tuple(asked))
    return JSQuAD(path, hashlib.sha256(raw).hexdigest(), len(articles), total, (scope,))


JSQUAD_LAYOUT: Final = Layout(
    groups=(GROUP,),
    labels={GROUP: "JSQuAD v1.3 validation"},
    group_of=lambda question: (GROUP,),
    chart_groups=(GROUP,),
    chart_title="JSQuAD recall@k (question → its paragraph, one scope)",
    overall_label="**overall**",
    row_name="set",
)
