"""Diagnostics: every validation problem with file:line:col, a stable code, a JSON path and a hint."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Diagnostic:
    """One validation problem: file:line:col, a stable code, the message, a JSON path and a hint."""

    file: str
    line: int
    col: int
    code: str
    message: str
    json_path: str = ""
    hint: str | None = None
    severity: str = "error"  # "error" | "warning"
    #: the source lines around the position with a caret under the column (YAML syntax errors), shown under
    #: the message
    context: str = ""

    def __str__(self) -> str:
        where = f" [{self.json_path}]" if self.json_path else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        under = "\n" + "\n".join("    " + line for line in self.context.splitlines()) if self.context else ""
        return f"{self.file}:{self.line}:{self.col}: {self.code} {self.message}{where}{hint}{under}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def github(self) -> str:
        level = "error" if self.severity == "error" else "warning"
        msg = self.message + (f" (hint: {self.hint})" if self.hint else "")
        msg = msg.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return f"::{level} file={self.file},line={self.line},col={self.col},title={self.code}::{msg}"


def sort_key(d: Diagnostic) -> tuple[Any, ...]:
    return (d.file, d.line, d.col, d.code)
