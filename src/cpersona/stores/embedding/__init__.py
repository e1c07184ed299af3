"""Embedders: the in-process ONNX model, the remote modes, the query cache."""
