"""`compactor report`: a self-contained HTML file (inline SVG, no network) and PNG charts."""

from compactor.output.report.build import TableReport, build_report, collect_report, write_report

__all__ = ["TableReport", "build_report", "collect_report", "write_report"]
