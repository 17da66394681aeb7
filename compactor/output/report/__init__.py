"""Renderers for `compactor report`: the HTML page (html.py) with its inline SVG charts, and PNG screenshots
(tasks/report.py collects the data)."""
