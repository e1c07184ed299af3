"""Redis: the connection, the embedded server, documents and indexes, every search call."""
