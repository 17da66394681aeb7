"""YAML syntax errors as a person reads them: the line and column of the cause (an unclosed ``{`` is pointed
at where it opens, not past the end of the file), what went wrong in words (indentation, an unclosed bracket,
a tab), and the source lines around it with a caret under the column.

PyYAML states the parser's view (``expected <block end>, but found '<block mapping start>'``); it is kept at
the end of the hint, for a search engine."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

#: PyYAML's ``context`` for a flow collection, and the bracket that opens and closes it
_FLOW = {"while parsing a flow mapping": ("{", "}"), "while parsing a flow sequence": ("[", "]")}


@dataclass(frozen=True)
class SyntaxProblem:
    """A syntax error explained: where (1-based), what, and how to fix it."""

    line: int
    col: int
    message: str
    hint: str


def explain(e: yaml.MarkedYAMLError, text: str) -> SyntaxProblem:
    """``e`` in words, at the position of its cause in ``text``."""
    lines = text.splitlines()
    problem = str(e.problem or e.context or "invalid YAML")
    mark = e.problem_mark or e.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    parser = f"the parser: {' '.join(problem.split())}"
    if "'\\t'" in problem:
        return SyntaxProblem(line, col, "a tab character: YAML indents with spaces only",
                             f"replace the tab on line {line} with spaces; {parser}")
    opened = _FLOW.get(str(e.context or ""))
    if opened is not None and e.context_mark is not None:
        open_line, open_col = e.context_mark.line + 1, e.context_mark.column + 1
        wrong = next((b for b in "}]" if f"but got '{b}'" in problem and b != opened[1]), None)
        if wrong is not None:
            return SyntaxProblem(line, col, f"`{wrong}` closes the `{opened[0]}` opened at line {open_line} column "
                                 f"{open_col}", f"close it with `{opened[1]}`; {parser}")
        if line == open_line:
            return SyntaxProblem(line, col, f"unexpected text inside the `{opened[0]}...{opened[1]}` of this line",
                                 f"separate its entries with `,` and close it with `{opened[1]}`; {parser}")
        return SyntaxProblem(open_line, open_col, f"the `{opened[0]}` opened here is never closed",
                             f"close it with `{opened[1]}` after its last entry, or write its entries as indented "
                             f"lines; {parser}")
    if problem.startswith("expected <block end>") and 0 < line <= len(lines):
        here = _indent(lines[line - 1])
        above = next(((n, _indent(lines[n - 1])) for n in range(line - 1, 0, -1)
                      if lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#")), None)
        if above is not None and above[1] != here:
            return SyntaxProblem(line, col, f"bad indentation: this line is indented {here} space(s), line "
                                 f"{above[0]} above it {above[1]}",
                                 f"the keys of one mapping line up: indent it by {above[1]} spaces as line {above[0]}, "
                                 f"or less to end that mapping; {parser}")
        return SyntaxProblem(line, col, "bad indentation: this line does not continue the block above it",
                             f"line up its key with the keys of the mapping it belongs to; {parser}")
    if "mapping values are not allowed here" in problem:
        return SyntaxProblem(line, col, "a `:` where no mapping may start",
                             "a value holding `: ` must be quoted, or the line above lacks a `-` or its indentation "
                             f"is off; {parser}")
    if "could not find expected ':'" in problem:
        return SyntaxProblem(line, col, "a key without its `:`",
                             f"write `key: value`, or quote a value that spans lines; {parser}")
    if e.context and "quoted scalar" in str(e.context) and e.context_mark is not None:
        return SyntaxProblem(e.context_mark.line + 1, e.context_mark.column + 1,
                             "the quote opened here is never closed", f"close the string with its quote; {parser}")
    return SyntaxProblem(line, col, " ".join(problem.split()), "check this line and the one above it: indentation, "
                         "a missing `:`, `-`, quote or bracket")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def source_context(text: str, line: int, col: int, radius: int = 2) -> str:
    """Numbered lines around ``line`` (1-based; past the end: the last line), the line itself marked with
    ``>`` and a caret under ``col``."""
    lines = text.splitlines()
    if not lines:
        return ""
    line = min(max(1, line), len(lines))
    lo, hi = max(1, line - radius), min(len(lines), line + radius)
    width = len(str(hi))
    out = []
    for n in range(lo, hi + 1):
        out.append(f"{'>' if n == line else ' '} {n:>{width}} | {lines[n - 1]}")
        if n == line:
            # the caret keeps the tabs before the column, so it lands under it whatever the tab width
            lead = "".join(ch if ch == "\t" else " " for ch in lines[n - 1][:max(0, col - 1)])
            out.append(f"  {' ' * width} | {lead}^")
    return "\n".join(out)
