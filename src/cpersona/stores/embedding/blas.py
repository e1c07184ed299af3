"""Set how many threads numpy's BLAS uses for one call.

The encoder's matmuls run in the OpenBLAS that numpy's wheels bundle, which starts one thread per core.
The embedder wants one per call: it runs the parts of a batch in ``CPERSONA_EMBEDDING_THREADS`` threads of
its own, which also spreads the element-wise work that BLAS threads cannot. OpenBLAS has no Python
interface; its ``*_set_num_threads`` symbol is called in the copy numpy loaded (found in
``/proc/self/maps``). Where that is not possible (another BLAS, another platform) nothing changes and BLAS
keeps its own default. The limit is per process: numpy has one BLAS.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["limit_blas_threads"]

# numpy >= 2 bundles scipy-openblas (64-bit ints, suffixed symbols); numpy 1.26 bundled openblas64_.
_SETTERS: Final = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


def limit_blas_threads(threads: int) -> bool:
    """Set the thread count of every OpenBLAS loaded in this process; ``False`` when none was found.

    The setters are looked up once.
    """
    setters = _setters()
    for setter in setters:
        setter(threads)
    return bool(setters)


@functools.cache
def _setters() -> tuple[Callable[[int], None], ...]:
    import numpy  # noqa: F401  (loads numpy's BLAS, so /proc/self/maps lists it)

    found: list[Callable[[int], None]] = []
    for library in _loaded_openblas():
        with contextlib.suppress(OSError):
            handle = ctypes.CDLL(library)
            for name in _SETTERS:
                setter = getattr(handle, name, None)
                if setter is not None:
                    setter.argtypes = [ctypes.c_int]
                    setter.restype = None
                    found.append(setter)
                    break
    return tuple(found)


def _loaded_openblas() -> list[str]:
    maps = Path("/proc/self/maps")
    try:
        lines = maps.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    paths = {line.split(maxsplit=5)[-1] for line in lines if "openblas" in line.lower() and "/" in line}
    return sorted(path for path in paths if ".so" in path)
