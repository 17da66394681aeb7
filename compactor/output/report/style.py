"""The report's stylesheet (inline in the HTML file and in each PNG chart page)."""

CSS = """body{font:14px system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2330}
main{max-width:1400px;margin:0 auto;padding:16px 24px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}small{color:#667;font-weight:normal}
.chart{width:100%;height:auto;display:block;margin:8px 0 12px;background:#fafbfd;border:1px solid #e3e7ee;box-sizing:border-box}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:0 16px}
.t{font-size:13px;font-weight:600}.l{font-size:11px;fill:#556}.u{fill:#889}.note{fill:#2e7d32;font-weight:600}
.axis{stroke:#99a}.grid line,.grid{}line.grid{stroke:#e8ebf0}.marker{stroke:#d33;stroke-dasharray:4 3}.mk{fill:#d33}
rect.hl{fill:#e8833a}.err{color:#b00}#errors:empty{display:none}#errors{color:#b00}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:12px;margin:8px 0 12px}
.tile{border:1px solid #e3e7ee;background:#fafbfd;padding:10px 12px;border-radius:6px}
.tile .k{font-size:12px;color:#667}.tile .v{font-size:22px;font-weight:600;margin:2px 0}.tile .s{font-size:12px;color:#667}
table.rank{border-collapse:collapse;width:100%;margin:8px 0}table.rank th,table.rank td{text-align:left;padding:4px 8px;
border-bottom:1px solid #e3e7ee;font-variant-numeric:tabular-nums}"""
