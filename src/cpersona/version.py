"""The package version, in one place (the trace and the OpenAPI document name it)."""

__version__ = "0.1.0"
