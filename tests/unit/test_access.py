"""The access seam: no key in force allows every agent; a bound key allows only its agents."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from cpersona.edges.http.access import AgentForbidden, key_agents, permit


def _request(**state: object) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "headers": [], "state": dict(state)})


def test_no_key_in_force_allows_every_agent() -> None:
    agents = key_agents(_request())
    assert agents is None
    permit(agents, "anyone")


def test_a_bound_key_allows_only_its_agents() -> None:
    agents = key_agents(_request(key_agents=frozenset({"a", "b"})))
    assert agents == frozenset({"a", "b"})
    permit(agents, "a")
    with pytest.raises(AgentForbidden) as caught:
        permit(agents, "c")
    assert (caught.value.status, caught.value.code) == (403, "FORBIDDEN")
