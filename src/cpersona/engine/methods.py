"""The operations' method mixins of :class:`~cpersona.Engine`, gathered as its one base class, so that
the facade stays within its size and an operation joins the engine with one line here."""

from __future__ import annotations

from cpersona.engine.association_api import AssociationMethods
from cpersona.engine.query_api import QueryMethods
from cpersona.engine.raw_api import RawQueryMethods
from cpersona.engine.reconstruct_api import ReconstructMethods
from cpersona.engine.timeline_api import TimelineMethods
from cpersona.engine.upkeep_api import UpkeepMethods

__all__ = ["OperationMethods"]


class OperationMethods(
    AssociationMethods,
    ReconstructMethods,
    RawQueryMethods,
    UpkeepMethods,
    QueryMethods,
    TimelineMethods,
):
    """Every operation's typed methods (each mixin's docs say what it adds)."""
