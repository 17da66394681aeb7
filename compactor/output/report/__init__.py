"""Renderers for `compactor report`: inline SVG charts and PNG screenshots (tasks/report.py collects the data)."""
