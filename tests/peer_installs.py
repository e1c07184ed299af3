"""The tests that install the benchmark peers (CPersona 2.6.14, mem0) into their own venvs.

They carry the ``peers`` mark and stay out of the default run (``addopts`` in pyproject.toml): they make
the run depend on installing two other projects from the package registry, and the first run on a machine
spends minutes in pip. ``pytest -m peers`` runs them; there, a peer that cannot be installed fails its
test with pip's error, since a skip would let a run that tested nothing pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import pytest
from benchmarks.peers import PeerError
from benchmarks.peers._venv import _INSTALL_SECS

if TYPE_CHECKING:
    from collections.abc import Callable

    from benchmarks.peers.cpersona_ref import CPersonaRef
    from benchmarks.peers.mem0_peer import Mem0

__all__ = ["install_peers", "peer_installs"]

Test = TypeVar("Test", bound="Callable[..., object]")


def peer_installs(test: Test) -> Test:
    """Mark a test that installs peers: ``peers``, and a timeout that allows each peer's first install
    (the installer's own limit) beyond the suite's per-test timeout."""
    marked: Test = pytest.mark.peers(pytest.mark.timeout(300 + 2 * _INSTALL_SECS)(test))
    return marked


async def install_peers(*peers: type[CPersonaRef | Mem0]) -> None:
    """Install each peer's venv unless it is there already; fail the test naming pip's error if not."""
    for peer in peers:
        try:
            await peer.venv.ensure()
        except PeerError as exc:
            pytest.fail(f"cannot install {peer.venv.name} from the package registry: {exc}")
