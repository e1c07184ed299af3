"""Loading LoCoMo (``locomo10.json``) into the units the benchmark protocol asks for.

* A **turn** is one memory: content ``"<speaker>: <text>"`` (an image turn appends
  ``" [image: <blip_caption>]"``),
  timestamp = its session's date-time as UTC epoch seconds, metadata = conversation, session, ``dia_id``.
  Turns come out in time order (session by session, in list order within a session).
* A **session** is one episode (secondary measure): its content is the session summary that ships with
  the data (``session_summary.session_N_summary``), its id ``S<N>``; it is a hit when it holds any
  evidence turn.
* A **question** keeps its category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
  5 adversarial) and its evidence ids, normalised by :func:`normalise_evidence`. A question left without
  any resolvable evidence is dropped and recorded in :attr:`LoCoMo.dropped`, so the report can count it.

The file is evaluation-only data (CC BY-NC 4.0): it is read from ``../shared/data`` beside the
repository unless ``--data`` names another path, and never copied into the repository.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Container, Mapping, Sequence

__all__ = [
    "CATEGORY_NAMES",
    "DEFAULT_DATA",
    "RECALL_CATEGORIES",
    "Conversation",
    "DroppedQuestion",
    "LoCoMo",
    "Question",
    "Session",
    "Turn",
    "load_locomo",
    "normalise_evidence",
    "parse_session_time",
]

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
DEFAULT_DATA: Final = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"

CATEGORY_NAMES: Final[Mapping[int, str]] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
RECALL_CATEGORIES: Final = (1, 2, 3, 4)
"""Categories scored for recall; 5 (adversarial, the answer is "not mentioned") has no meaningful gold."""

_SESSION_KEY = re.compile(r"session_(\d+)")
_TIME_FORMAT = "%I:%M %p on %d %B, %Y"
# One evidence id: "D<session>:<turn>". A stray colon after the D ("D:11:26") and zero padding
# ("D30:05") occur in the file; both are read as the id they plainly mean.
_EVIDENCE_ID = re.compile(r"D:?0*(\d+):0*(\d+)", re.IGNORECASE)
# A range of turns within one session: "D1:3-D1:5", "D1:3-5" or "D1:3 - 5".
_EVIDENCE_RANGE = re.compile(r"D:?0*(\d+):0*(\d+)\s*[-\u2013]\s*(?:D:?0*(\d+):)?0*(\d+)", re.IGNORECASE)
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_MAX_RANGE = 200


def parse_session_time(text: str) -> float:
    """LoCoMo's session date-time (``"1:56 pm on 8 May, 2023"``) as UTC epoch seconds.

    The data names no time zone; UTC is chosen so that every system sees the same clock.
    """
    moment = datetime.datetime.strptime(" ".join(text.split()), _TIME_FORMAT)
    return moment.replace(tzinfo=datetime.UTC).timestamp()


def _expand(token: str) -> list[str] | None:
    """The ids one evidence token stands for, or ``None`` when it is not an id or a range of ids."""
    match = _EVIDENCE_RANGE.fullmatch(token)
    if match is not None:
        session, first, end_session, last = match.groups()
        if end_session is not None and int(end_session) != int(session):
            # A range across sessions cannot be enumerated without the turn counts: keep its ends.
            return [f"D{int(session)}:{int(first)}", f"D{int(end_session)}:{int(last)}"]
        lo, hi = sorted((int(first), int(last)))
        if hi - lo > _MAX_RANGE:
            return None
        return [f"D{int(session)}:{turn}" for turn in range(lo, hi + 1)]
    match = _EVIDENCE_ID.fullmatch(token)
    if match is None:
        return None
    return [f"D{int(match.group(1))}:{int(match.group(2))}"]


def normalise_evidence(raw: Sequence[str], known: Container[str]) -> tuple[list[str], list[str]]:
    """Split LoCoMo evidence strings into ids that exist in ``known`` and the leftovers that do not.

    Handles the defects found in the file: several ids in one string (joined by ``;``, ``,`` or
    spaces), ranges (``D1:3-D1:5``, ``D1:3-5``), trailing dots, stray whitespace, zero padding
    (``D30:05``) and a stray colon (``D:11:26``). Returns ``(resolved, unresolved)``: the resolved
    ids are unique and in their first order of appearance; ``unresolved`` holds every token (or
    normalised id) that names no known turn, for the report.
    """
    resolved: list[str] = []
    unresolved: list[str] = []
    for item in raw:
        # Close up the spaces around a range's dash before splitting on whitespace.
        text = re.sub(r"\s*[-\u2013]\s*", "-", str(item).strip())
        for token in _EVIDENCE_SPLIT.split(text):
            token = token.strip().strip(".,;:")
            if not token:
                continue
            ids = _expand(token)
            if ids is None:
                unresolved.append(token)
                continue
            for dia_id in ids:
                if dia_id not in known:
                    unresolved.append(dia_id)
                elif dia_id not in resolved:
                    resolved.append(dia_id)
    return resolved, unresolved


@dataclasses.dataclass(frozen=True, slots=True)
class Turn:
    """One dialogue turn, the primary memory unit."""

    conv_id: str
    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str | None
    timestamp: float
    content: str

    @property
    def unit_id(self) -> str:
        return self.dia_id

    @property
    def metadata(self) -> dict[str, Any]:
        return {"conversation": self.conv_id, "session": self.session, "dia_id": self.dia_id}


@dataclasses.dataclass(frozen=True, slots=True)
class Session:
    """One session, the episode unit: its summary is what a system indexes."""

    conv_id: str
    session: int
    date_time: str
    timestamp: float
    summary: str
    turn_ids: tuple[str, ...]

    @property
    def unit_id(self) -> str:
        return f"S{self.session}"

    @property
    def content(self) -> str:
        return self.summary

    @property
    def metadata(self) -> dict[str, Any]:
        return {"conversation": self.conv_id, "session": self.session}


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    conv_id: str
    qid: str
    question: str
    category: int
    evidence: tuple[str, ...]
    """Resolvable evidence turn ids (never empty for a kept question)."""
    unresolved: tuple[str, ...]
    """Evidence tokens that named no turn, after normalisation (kept for the report)."""
    sessions: tuple[str, ...]
    """Episode gold: ``S<N>`` for each session holding an evidence turn."""


@dataclasses.dataclass(frozen=True, slots=True)
class DroppedQuestion:
    conv_id: str
    qid: str
    category: int
    question: str
    raw_evidence: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Conversation:
    conv_id: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def now(self) -> float:
        """The protocol's "now": questions are asked after the last session."""
        return max(session.timestamp for session in self.sessions)


@dataclasses.dataclass(frozen=True, slots=True)
class LoCoMo:
    path: Path
    sha256: str
    conversations: tuple[Conversation, ...]
    dropped: tuple[DroppedQuestion, ...]
    total_questions: int
    """Every QA item in the selected conversations, kept or dropped, adversarial included."""
    captions: bool = True
    """Whether image turns carry their caption in ``content``."""

    @property
    def questions(self) -> list[Question]:
        return [q for conv in self.conversations for q in conv.questions]

    def recall_questions(self) -> list[Question]:
        """The questions scored for recall: non-adversarial, with resolvable evidence."""
        return [q for q in self.questions if q.category in RECALL_CATEGORIES]

    def dropped_for_recall(self) -> list[DroppedQuestion]:
        return [d for d in self.dropped if d.category in RECALL_CATEGORIES]


def _turn_content(speaker: str, text: str, caption: str | None) -> str:
    content = f"{speaker}: {text}"
    if caption:
        # The caption is the only description of a shared image; questions sometimes ask about it.
        # The wording around it is kept to one neutral word: on BM25 an extra verb such as "shares"
        # on 1,226 turns costs about 0.003 recall@10 (measured), and this form matches the reference run.
        content += f" [image: {caption}]"
    return content


def _load_conversation(
    sample: Mapping[str, Any], *, captions: bool
) -> tuple[Conversation, list[DroppedQuestion], int]:
    conv_id = str(sample["sample_id"])
    body = sample["conversation"]
    summaries = sample.get("session_summary") or {}
    # Sessions are counted by their turn lists: some files carry date keys for sessions that have no turns.
    numbers = sorted(
        int(match.group(1))
        for key, value in body.items()
        if (match := _SESSION_KEY.fullmatch(key)) and isinstance(value, list) and value
    )
    sessions: list[Session] = []
    turns_by_session: dict[int, list[Turn]] = {}
    for number in numbers:
        date_time = str(body[f"session_{number}_date_time"])
        stamp = parse_session_time(date_time)
        turns = []
        for raw in body[f"session_{number}"]:
            caption = (raw.get("blip_caption") or None) if captions else None
            speaker = str(raw["speaker"])
            text = str(raw["text"])
            turns.append(
                Turn(
                    conv_id=conv_id,
                    dia_id=str(raw["dia_id"]).strip(),
                    session=number,
                    speaker=speaker,
                    text=text,
                    caption=caption,
                    timestamp=stamp,
                    content=_turn_content(speaker, text, caption),
                )
            )
        turns_by_session[number] = turns
        sessions.append(
            Session(
                conv_id=conv_id,
                session=number,
                date_time=date_time,
                timestamp=stamp,
                summary=str(summaries.get(f"session_{number}_summary", "")).strip(),
                turn_ids=tuple(turn.dia_id for turn in turns),
            )
        )
    # Time order; a stable sort keeps list order for sessions that share a date-time.
    sessions.sort(key=lambda s: s.timestamp)
    ordered = tuple(turn for session in sessions for turn in turns_by_session[session.session])
    session_of = {turn.dia_id: turn.session for turn in ordered}
    if len(session_of) != len(ordered):
        raise ValueError(f"{conv_id}: dia_id values are not unique")

    questions: list[Question] = []
    dropped: list[DroppedQuestion] = []
    for index, qa in enumerate(sample["qa"]):
        qid = f"{conv_id}:q{index}"
        raw_evidence = tuple(str(e) for e in qa.get("evidence") or ())
        resolved, unresolved = normalise_evidence(raw_evidence, session_of)
        category = int(qa["category"])
        if not resolved:
            dropped.append(DroppedQuestion(conv_id, qid, category, str(qa["question"]), raw_evidence))
            continue
        gold_sessions = tuple(dict.fromkeys(f"S{session_of[dia_id]}" for dia_id in resolved))
        questions.append(
            Question(
                conv_id=conv_id,
                qid=qid,
                question=str(qa["question"]),
                category=category,
                evidence=tuple(resolved),
                unresolved=tuple(unresolved),
                sessions=gold_sessions,
            )
        )
    speakers = (str(body.get("speaker_a", "")), str(body.get("speaker_b", "")))
    conversation = Conversation(conv_id, speakers, ordered, tuple(sessions), tuple(questions))
    return conversation, dropped, len(sample["qa"])


def load_locomo(
    path: Path = DEFAULT_DATA, *, conversations: Sequence[str] | None = None, captions: bool = True
) -> LoCoMo:
    """Read ``locomo10.json``; ``conversations`` (sample ids such as ``conv-26``) selects a subset.

    ``captions=False`` leaves image captions out of the turn content (a variant for comparison only:
    the protocol includes them).

    Raises ``FileNotFoundError`` with a hint when the file is not there, ``ValueError`` when a
    requested conversation does not exist.
    """
    if not path.is_file():
        raise FileNotFoundError(
            f"LoCoMo data not found at {path}; pass --data PATH (it lives in ../shared/data beside the repo)"
        )
    raw = path.read_bytes()
    samples = json.loads(raw)
    if conversations is not None:
        wanted = list(conversations)
        by_id = {str(sample["sample_id"]): sample for sample in samples}
        missing = [conv for conv in wanted if conv not in by_id]
        if missing:
            raise ValueError(f"no such conversation(s) in {path.name}: {', '.join(missing)}")
        samples = [by_id[conv] for conv in wanted]
    loaded: list[Conversation] = []
    dropped: list[DroppedQuestion] = []
    total = 0
    for sample in samples:
        conversation, lost, count = _load_conversation(sample, captions=captions)
        loaded.append(conversation)
        dropped.extend(lost)
        total += count
    return LoCoMo(path, hashlib.sha256(raw).hexdigest(), tuple(loaded), tuple(dropped), total, captions)
