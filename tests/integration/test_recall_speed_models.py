"""recall_speed with a choice of embedding model: the store cache keeps each model's stores apart while
all-MiniLM-L6-v2's keys stay what they were (whatever the default), the option parses, and speed_peers
does not take it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from benchmarks import recall_speed, speed_peers
from benchmarks.store_cache import UNNAMED_MODEL, corpus_key, settings_for

from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS

if TYPE_CHECKING:
    from pathlib import Path

CORPUS = ["Caroline: I went to a support group yesterday.", "Melanie: That sounds lovely."]
OTHER = next(name for name in EMBEDDING_MODELS if name != UNNAMED_MODEL)


def test_minilms_key_is_the_one_stores_were_cached_under() -> None:
    # Written down from the key before the model was part of it: a change here orphans every cached store.
    assert corpus_key(CORPUS, "all-MiniLM-L6-v2") == "n2-c0fd6cf50928-v1"


def test_another_models_key_names_it() -> None:
    key = corpus_key(CORPUS, OTHER)
    assert key == f"n2-c0fd6cf50928-v1-{OTHER}"
    assert key != corpus_key(CORPUS, UNNAMED_MODEL)
    assert corpus_key(CORPUS[:1], OTHER) != corpus_key(CORPUS, OTHER)


def test_the_settings_open_the_chosen_model(tmp_path: Path) -> None:
    assert settings_for(tmp_path).embedding_model == DEFAULT_EMBEDDING_MODEL
    chosen = settings_for(tmp_path, OTHER)
    assert (chosen.embedding_model, chosen.data_dir, chosen.embedding_cache_size) == (OTHER, tmp_path, 0)


def test_the_option_parses_and_another_model_writes_beside_the_defaults_results() -> None:
    parser = recall_speed.build_parser()
    assert parser.parse_args(["--quick"]).embedding_model == DEFAULT_EMBEDDING_MODEL
    args = parser.parse_args(["--quick", "--embedding-model", OTHER])
    assert args.embedding_model == OTHER
    recall_speed.settle_size_arguments(
        args, ["--quick"], "recall_speed", results=recall_speed.results_for(OTHER)
    )
    assert args.out.name == f"recall_speed_{OTHER}_quick.md"
    assert recall_speed.results_for("all-MiniLM-L6-v2") == recall_speed.RESULTS
    assert recall_speed.raw_for("all-MiniLM-L6-v2") == recall_speed.RAW
    assert recall_speed.raw_for(OTHER) != recall_speed.RAW
    with pytest.raises(SystemExit):
        parser.parse_args(["--embedding-model", "no-such-model"])


def test_speed_peers_takes_no_model() -> None:
    # CPersona 2.6.14 is compared on its own model's vectors (MiniLM); the option is recall_speed's alone.
    with pytest.raises(SystemExit):
        speed_peers.build_parser().parse_args(["--embedding-model", OTHER])
