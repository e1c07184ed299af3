"""Retrieval-quality benchmarks: how well a system finds the turns that answer a question.

The package loads evaluation data (LoCoMo), runs several retrieval systems over it under one protocol
(``../shared/reference/benchmark-protocol.md``) and writes the figures to ``benchmarks/results/``::

    .venv/bin/python -m benchmarks.quality locomo --systems bm25,dense,rrf

Modules: :mod:`.locomo` (loading and normalising the data), :mod:`.metrics` (pure scoring functions),
:mod:`.embed_cache` (MiniLM vectors on disk), :mod:`.systems` (the systems under test) and
:mod:`.__main__` (the command). The data is evaluation-only and is never shipped: nothing under ``src/``
imports from here.
"""
