"""The backends behind protocols: the record store (Redis), vectors (Qdrant), embeddings."""
