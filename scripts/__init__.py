"""The repository's own tools (run from its root as ``python -m scripts.NAME``); not part of the package."""
