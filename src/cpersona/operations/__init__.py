"""The exits beside recall: reconstruct (:mod:`.reconstruct`) and the associative reads it shares with
the engine (:mod:`.associations`). They import stores and model, never recall: an operation that needs
a recall is handed one by the engine (:class:`~cpersona.operations.reconstruct.candidates.RecallPort`)."""
