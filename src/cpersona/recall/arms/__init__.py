"""The retrieval arms, each a typed function returning a ranked list."""
