"""How a server process keeps its garbage collector's work small.

CPython's cyclic collector runs a full collection every so often, and a full collection walks every
object the collector tracks, those loaded at start (modules, classes, request schemas, caches built on
first use) included. A store batch allocates many containers, so full collections come often: in a
store of 1,000-record batches from two writers, collections took 39 µs of the event loop's 210 per
record, 17 of them in full collections (``benchmarks/results/store_gc.md``). What a server holds once
its engine is open lives as long as the process, so it is frozen then (:func:`gc.freeze`): later
collections leave it out (full collections took 3 µs a record, and the store ran 1.07x as fast), and
what becomes garbage afterwards is collected as before.

Only the processes the command line runs do this (``cpersona serve``, its workers, ``cpersona mcp``):
an application that opens the engine as a library owns its heap, and freezes it or not itself.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> None:
    """Collect what start-up left as garbage, then freeze everything still alive."""
    gc.collect()
    gc.freeze()
