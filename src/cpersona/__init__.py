"""cpersona."""
