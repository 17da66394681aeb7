"""The report's stylesheet (inline in the HTML file and in each PNG chart page)."""

CSS = """body{font:14px system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2330}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}small{color:#667;font-weight:normal}
.chart{width:100%;max-width:720px;display:block;margin:8px 0 18px;background:#fafbfd;border:1px solid #e3e7ee}
.t{font-size:12px;font-weight:600}.l{font-size:10px;fill:#556}.axis{stroke:#99a}.marker{stroke:#d33;stroke-dasharray:4 3}
rect.hl{fill:#e8833a}.err{color:#b00}#errors:empty{display:none}#errors{color:#b00}"""
