"""Loading TMD (Zyphra's Temporal Memory Dataset, LMEB's temporal task) into benchmark units and questions.

* A **turn** is one memory, as in :mod:`.locomo`: content ``"<speaker>: <text>"`` (an image turn appends
  ``" [image: <blip_caption>]"``), its unit id is the log's ``response_number`` (the id the gold lists
  use), its timestamp is the turn's own ``date_time`` read as UTC (TMD stamps every turn, not only the
  session), metadata = conversation, session, ``dia_id``, response number. Turns come out in
  ``response_number`` order, which is time order.
* A **conversation** is one log (``ConversationData/<n>.json``, 12 logs); its scope (agent) is
  ``tmd-<n>``, and its "now" is the time of its last turn (the dataset's reference time for relative
  questions, checked in ``tmd/README.md``).
* A **question** comes from ``TestData/content_time_qs`` (one wording per item: the main "content and
  time" test) or from one of the ``TestData/time_qs`` sets ("what did we discuss <when>"). Each time item
  lists several paraphrases; the first is the question asked (the others are kept for the report). Its
  gold is every turn the item lists, and it searches only its own conversation.

The ``ambiguous_time_qs`` sets are not loaded: each of their "questions" is a short dialogue whose time
reference must first be resolved from the exchange, which is a task for a reader model, not for a cue
parser working from a question and a date.

The folder is evaluation-only data (no licence stated; derived from LoCoMo, CC BY-NC 4.0): it is read from
``../shared/data/tmd`` beside the repository unless another path is given, and never copied into it.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, Final

from benchmarks.quality.locomo import REPO_ROOT, _turn_content

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

__all__ = [
    "CONTENT_SET",
    "DEFAULT_TMD",
    "LOGS",
    "SETS",
    "TIME_SETS",
    "TMD",
    "TmdConversation",
    "TmdQuestion",
    "TmdTurn",
    "load_tmd",
    "parse_turn_time",
]

DEFAULT_TMD: Final = REPO_ROOT.parent / "shared" / "data" / "tmd"
LOGS: Final = (26, 28, 31, 41, 42, 43, 44, 45, 46, 47, 48, 49)
CONTENT_SET: Final = "content_time_qs"
TIME_SETS: Final = (
    "dates",
    "date_span",
    "day_span",
    "earlier_today",
    "last_named_day",
    "month",
    "rel_day",
    "rel_month",
    "rel_session",
    "session",
    "session_span",
)
SETS: Final = (CONTENT_SET, *TIME_SETS)

_TIME_FORMAT = "%I:%M:%S %p on %A %d %B, %Y"
_SESSION_KEY = re.compile(r"session_(\d+)")


def parse_turn_time(text: str) -> float:
    """A TMD turn time (``"01:56:04 AM on Monday 08 May, 2023"``) as UTC epoch seconds.

    The data names no zone; UTC is chosen so that every system and the cue parser see the same clock.
    """
    moment = datetime.datetime.strptime(" ".join(text.split()), _TIME_FORMAT)
    return moment.replace(tzinfo=datetime.UTC).timestamp()


@dataclasses.dataclass(frozen=True, slots=True)
class TmdTurn:
    conv_id: str
    response_number: int
    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str | None
    timestamp: float
    content: str

    @property
    def unit_id(self) -> str:
        return str(self.response_number)

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "conversation": self.conv_id,
            "session": self.session,
            "dia_id": self.dia_id,
            "response_number": self.response_number,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class TmdQuestion:
    conv_id: str
    qid: str
    set_name: str
    question: str
    paraphrases: tuple[str, ...]
    """Every wording the item lists; ``question`` is the first."""
    gold: tuple[str, ...]
    """Unit ids (response numbers) of the turns the question refers to, never empty."""

    # The names the side-by-side harness (``benchmarks.quality.__main__``) reads a question by, so TMD
    # runs through the same code as LoCoMo: the set stands where LoCoMo has its category.
    @property
    def category(self) -> str:
        return self.set_name

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.gold


@dataclasses.dataclass(frozen=True, slots=True)
class TmdConversation:
    conv_id: str
    log: int
    speakers: tuple[str, str]
    turns: tuple[TmdTurn, ...]
    questions: tuple[TmdQuestion, ...]

    @property
    def now(self) -> float:
        """The dataset's "now" for relative questions: the time of the log's last turn."""
        return self.turns[-1].timestamp

    @property
    def sessions(self) -> tuple[()]:
        """No episode corpus: TMD ships no session summaries (the harness's episode measure is off)."""
        return ()


@dataclasses.dataclass(frozen=True, slots=True)
class TMD:
    path: Path
    digest: str
    """sha256 over the files read, in the order read (for the report)."""
    conversations: tuple[TmdConversation, ...]
    sets: tuple[str, ...]
    unknown_gold: int
    """Gold ids that name no turn of their log (dropped; reported)."""
    dropped: tuple[str, ...]
    """Questions left with no gold at all (dropped; reported)."""

    @property
    def questions(self) -> list[TmdQuestion]:
        return [q for conv in self.conversations for q in conv.questions]

    def recall_questions(self) -> list[TmdQuestion]:
        """Every loaded question is scored (the harness's name for the scored ones)."""
        return self.questions


def _load_turns(conv_id: str, body: Mapping[str, Any]) -> tuple[TmdTurn, ...]:
    turns: list[TmdTurn] = []
    for key, value in body.items():
        match = _SESSION_KEY.fullmatch(key)
        if match is None or not isinstance(value, list):
            continue
        session = int(match.group(1))
        for raw in value:
            speaker, text = str(raw["speaker"]), str(raw["text"])
            caption = raw.get("blip_caption") or None
            turns.append(
                TmdTurn(
                    conv_id=conv_id,
                    response_number=int(raw["response_number"]),
                    dia_id=str(raw["dia_id"]).strip(),
                    session=session,
                    speaker=speaker,
                    text=text,
                    caption=caption,
                    timestamp=parse_turn_time(str(raw["date_time"])),
                    content=_turn_content(speaker, text, caption),
                )
            )
    turns.sort(key=lambda turn: turn.response_number)
    numbers = [turn.response_number for turn in turns]
    if numbers != list(range(len(turns))):
        raise ValueError(f"{conv_id}: response numbers are not 0..{len(turns) - 1} without gaps")
    stamps = [turn.timestamp for turn in turns]
    if stamps != sorted(stamps):
        raise ValueError(f"{conv_id}: turns are not in time order by response number")
    return tuple(turns)


def _set_file(path: Path, set_name: str) -> Path:
    if set_name == CONTENT_SET:
        return path / "TestData" / "content_time_qs" / "content_time_qs.json"
    return path / "TestData" / "time_qs" / f"test_{set_name}.json"


def load_tmd(
    path: Path = DEFAULT_TMD, *, logs: Sequence[int] | None = None, sets: Sequence[str] = SETS
) -> TMD:
    """Read the TMD folder: the chosen logs (all 12 by default) and question sets.

    Raises ``FileNotFoundError`` naming the folder when it is not there, ``ValueError`` for an unknown
    log or set.
    """
    if not (path / "ConversationData").is_dir():
        raise FileNotFoundError(
            f"TMD data not found at {path}; pass --tmd PATH (it lives in ../shared/data/tmd beside the repo)"
        )
    wanted = tuple(LOGS if logs is None else logs)
    unknown = [str(log) for log in wanted if log not in LOGS]
    bad_sets = [name for name in sets if name not in SETS]
    if unknown or bad_sets:
        raise ValueError(
            f"unknown TMD log(s) {', '.join(unknown) or '-'} / set(s) {', '.join(bad_sets) or '-'}; "
            f"logs are {', '.join(map(str, LOGS))}, sets {', '.join(SETS)}"
        )
    digest = hashlib.sha256()
    turns_of: dict[int, tuple[TmdTurn, ...]] = {}
    speakers_of: dict[int, tuple[str, str]] = {}
    for log in wanted:
        raw = (path / "ConversationData" / f"{log}.json").read_bytes()
        digest.update(raw)
        body = json.loads(raw)
        turns_of[log] = _load_turns(f"tmd-{log}", body)
        speakers_of[log] = (str(body.get("speaker_a", "")), str(body.get("speaker_b", "")))

    questions_of: dict[int, list[TmdQuestion]] = {log: [] for log in wanted}
    unknown_gold = 0
    dropped: list[str] = []
    for set_name in sets:
        raw = _set_file(path, set_name).read_bytes()
        digest.update(raw)
        items_by_log = json.loads(raw)
        for log in wanted:
            known = {turn.unit_id for turn in turns_of[log]}
            for index, item in enumerate(items_by_log.get(f"file_{log}", [])):
                qid = f"tmd-{log}:{set_name}:{index}"
                paraphrases = tuple(" ".join(str(q).split()) for q in item["questions"])
                listed = [str(number) for number in item["relevant_docs"]]
                gold = tuple(dict.fromkeys(g for g in listed if g in known))
                unknown_gold += sum(1 for g in listed if g not in known)
                if not gold or not paraphrases:
                    dropped.append(qid)
                    continue
                questions_of[log].append(
                    TmdQuestion(f"tmd-{log}", qid, set_name, paraphrases[0], paraphrases, gold)
                )
    conversations = tuple(
        TmdConversation(f"tmd-{log}", log, speakers_of[log], turns_of[log], tuple(questions_of[log]))
        for log in wanted
    )
    return TMD(path, digest.hexdigest(), conversations, tuple(sets), unknown_gold, tuple(dropped))
