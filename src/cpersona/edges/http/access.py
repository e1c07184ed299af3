"""Which agents a request may act for: the one seam every route, tool and trace stream asks.

``None`` means no key is in force for the request (keys are off, or the key is an admin's): every agent.
A set means a key bound to those agents; acting for any other is refused. The key checking itself (who
sets the request's agents) is the API-key layer's; everything that reads or writes an agent's data only
asks here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.errors import CpersonaError

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

__all__ = ["AgentForbidden", "key_agents", "permit"]


class AgentForbidden(CpersonaError):
    """The request's key is not bound to the agent it names."""

    code = "FORBIDDEN"
    status = 403

    def __init__(self, message: str, field: str | None = None) -> None:
        # ``field`` names where the agent was named when that is not the request's own ``agent_id``.
        self.field = field
        super().__init__(message)


def key_agents(connection: HTTPConnection) -> frozenset[str] | None:
    """The agents the connection's key is bound to, or ``None`` when it may act for every agent."""
    agents = getattr(connection.state, "key_agents", None)
    return agents if isinstance(agents, frozenset) else None


def permit(agents: frozenset[str] | None, agent_id: str, field: str | None = None) -> None:
    """Refuse ``agent_id`` unless ``agents`` allows it (``None`` allows every agent); ``field`` is where
    the request named it, when not in an ``agent_id``."""
    if agents is not None and agent_id not in agents:
        where = "" if field is None else f" (named by {field})"
        raise AgentForbidden(f"this key may not act for agent {agent_id!r}{where}", field)
