"""The ASGI application."""
