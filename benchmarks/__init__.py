"""Benchmarks for cpersona: speed benchmarks at this level, retrieval quality in :mod:`benchmarks.quality`.

Run one from the repository root with ``python -m benchmarks NAME [args...]`` (``python -m benchmarks``
lists them; see :mod:`benchmarks.__main__`). What every run records about itself (machine, load, commit,
percentiles, the results file's header) is in :mod:`benchmarks.harness`.

A regular package (not a namespace one) so that ``python -m benchmarks`` run from the repository root
always finds this folder, even if some installed distribution ships a top-level ``benchmarks``.
Nothing under ``src/`` may import from here.
"""
