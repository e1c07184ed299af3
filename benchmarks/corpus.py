"""The text the speed benchmarks store and ask: LoCoMo turns and questions, and generated sentences.

Memories are LoCoMo turns (``"<speaker>: <text>"``, image captions included) followed by generated ones,
each a LoCoMo speaker with two sentences drawn from LoCoMo turns and from :func:`sentences`, kept only
when new (the engine skips duplicate content). Questions are LoCoMo's. Without the LoCoMo file both fall
back to synthetic text. Corpus ``n`` is a prefix of every larger corpus, so a larger store can be grown
from a smaller one.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from pathlib import Path
from typing import Final

__all__ = ["LOCOMO", "Texts", "build_corpus", "load_texts", "sentences"]

LOCOMO: Final = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"

_SEED = 20_261_129
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SYNTHETIC_SPEAKERS = ("Alice", "Bob", "Carmen", "Deepak", "Emeka", "Fumiko")

_SUBJECTS = ["the agent", "my manager", "the new intern", "our landlord", "the support team", "Alice"]
_WHEN = ["last week", "this morning", "on Tuesday", "two days ago", "after lunch", "yesterday evening"]
_VERBS = ["moved", "cancelled", "confirmed", "forgot about", "rescheduled", "asked about", "approved"]
_OBJECTS = [
    "the quarterly budget review",
    "the dentist appointment",
    "the flight to Osaka",
    "the deploy of the billing service",
    "the birthday dinner for Sam",
    "the lease renewal",
    "the database migration",
]
_TAILS = [
    "because the weather forecast looked bad for the whole weekend",
    "after a long discussion in the team channel yesterday afternoon",
    "and promised to send the updated notes before Friday morning",
    "since nobody could find the signed contract in the shared folder",
    "so we should remind everyone again on Monday before the standup",
]


def sentences(count: int, seed: int) -> list[str]:
    """Deterministic, realistic-looking memory sentences of roughly 20 words."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(_WHEN).capitalize()} {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} "
        f"{rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."
        for _ in range(count)
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class Texts:
    """What the corpus and the questions are made from."""

    source: str
    turns: tuple[str, ...]
    speakers: tuple[str, ...]
    fragments: tuple[str, ...]
    questions: tuple[str, ...]


def load_texts(path: Path) -> Texts:
    """LoCoMo turns, speakers, sentence fragments and questions; synthetic text when the file is absent."""
    synthetic = tuple(dict.fromkeys(sentences(6_000, seed=_SEED)))
    if not path.is_file():
        subjects = ("the budget", "the flight", "the dentist", "the lease", "the migration", "the dinner")
        asks = ("When did we talk about {}?", "What was decided about {}?", "Who mentioned {} last?")
        asked = tuple(a.format(s) for a in asks for s in subjects)
        return Texts("synthetic (LoCoMo file not found)", (), _SYNTHETIC_SPEAKERS, synthetic, asked)
    samples = json.loads(path.read_bytes())
    turns: list[str] = []
    speakers: list[str] = []
    fragments: list[str] = []
    questions: list[str] = []
    for sample in samples:
        body = sample["conversation"]
        speakers.extend(str(body.get(k, "")) for k in ("speaker_a", "speaker_b") if body.get(k))
        numbers = sorted(
            int(key.split("_")[1])
            for key, value in body.items()
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
        )
        for number in numbers:
            for turn in body[f"session_{number}"]:
                text = str(turn["text"])
                content = f"{turn['speaker']}: {text}"
                if turn.get("blip_caption"):
                    content += f" [image: {turn['blip_caption']}]"
                turns.append(content)
                fragments.extend(s for s in _SENTENCE_END.split(text) if len(s.split()) >= 4)
        questions.extend(str(qa["question"]) for qa in sample["qa"])
    return Texts(
        "LoCoMo (locomo10.json) + generated",
        tuple(dict.fromkeys(turns)),
        tuple(dict.fromkeys(speakers)),
        tuple(dict.fromkeys(fragments)) + synthetic,
        tuple(questions),
    )


def build_corpus(texts: Texts, size: int) -> list[str]:
    """``size`` distinct memories: the LoCoMo turns first, then generated ones (deterministic).

    Generation does not depend on ``size``, so every corpus is a prefix of every larger one.
    """
    corpus = list(texts.turns[:size])
    seen = set(corpus)
    rng = random.Random(_SEED)
    while len(corpus) < size:
        text = f"{rng.choice(texts.speakers)}: {rng.choice(texts.fragments)} {rng.choice(texts.fragments)}"
        if text not in seen:
            seen.add(text)
            corpus.append(text)
    return corpus
