"""Retrieval-quality benchmarks: how well a system finds the turns that answer a question.

The package loads evaluation data (LoCoMo, TMD), runs several retrieval systems over it under one
protocol (``../shared/reference/benchmark-protocol.md``) and writes the figures to ``benchmarks/results/``::

    .venv/bin/python -m benchmarks quality locomo --systems bm25,dense,rrf
    .venv/bin/python -m benchmarks quality tmd --systems bm25,dense,rrf,cpersona

Modules: :mod:`.locomo` and :mod:`.tmd` (loading and normalising the data), :mod:`.metrics` (pure scoring
functions), :mod:`.layout` (how questions are grouped in the tables), :mod:`.embed_cache` (MiniLM vectors
on disk), :mod:`.systems` (the systems under test), :mod:`.cues` and :mod:`.cue_bench` (the time cue),
:mod:`.tmd_peers` (TMD's side-by-side parts) and :mod:`.__main__` (the command). The data is
evaluation-only and is never shipped: nothing under ``src/`` imports from here.
"""
