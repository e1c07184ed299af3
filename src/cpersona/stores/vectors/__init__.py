"""The vector store: qdrant-edge embedded, AsyncQdrantClient remote, the rules both share."""
