"""Candidate sets and the stages that pass them forward."""
