"""Benchmarks for cpersona: speed scripts at this level, retrieval quality in :mod:`benchmarks.quality`.

A regular package (not a namespace one) so that ``python -m benchmarks.quality`` run from the repository
root always finds this folder, even if some installed distribution ships a top-level ``benchmarks``.
Nothing under ``src/`` may import from here.
"""
