"""Renderers: rich text, JSON, markdown (and later HTML)."""
