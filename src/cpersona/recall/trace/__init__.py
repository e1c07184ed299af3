"""Trace assembly, the coverage ledger and publishing."""
