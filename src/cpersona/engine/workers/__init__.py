"""The engine's background workers."""
