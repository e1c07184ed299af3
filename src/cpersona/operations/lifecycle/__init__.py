"""The pure parts of the lifecycle operations: the archive's JSON Lines form (:mod:`.archive`) and the
plan of a consolidation (:mod:`.consolidation`). The engine reads and writes the stores around them
(:mod:`cpersona.engine.upkeep`, :mod:`cpersona.engine.upkeep_archive`)."""
