"""The engine serving a request, and its services, as every route module reads them.

The lifespan puts the engine on the request's state; route modules take it from here rather than from
the route table (routes.py), which imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.engine.facade import Engine

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

    from cpersona.engine.services import Services

__all__ = ["engine_of", "services_of"]


def engine_of(connection: HTTPConnection) -> Engine:
    """The engine the app's lifespan opened for ``connection``."""
    engine = connection.state.engine
    if not isinstance(engine, Engine):  # pragma: no cover - the lifespan always puts an Engine here
        raise TypeError("request.state.engine is not an Engine")
    return engine


def services_of(connection: HTTPConnection) -> Services:
    """The services of the engine serving ``connection``: a route hands each the model it validated."""
    return engine_of(connection).services
