"""The shared layers name no table format and speak no format's vocabulary (docs/architecture.md), so a
third format is one folder under compactor/formats/ plus its registry line, and no shared module changes.

What is read: every token of each shared module's source, code, strings and comments alike. Strings are
what users read (help, errors, output) and a format's word there is a word a new format would have to
change; comments and docstrings that name a format's modules rot as that format's folder changes, and
say that the shared code knows about it. So nothing is exempt by kind; what may stay is in ALLOWED, one
entry per module naming the terms it keeps, with the reason, and a term that no longer matches there fails
the test (the list cannot rot).

Words that are not a format's: ``timedelta`` (the standard library's) and ``Protocol`` as the name a
module imports from ``typing`` (a typing Protocol, not Delta's reader/writer protocol; lower-case
"protocol" and any other use of the word still count).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "compactor"

#: the shared layers: everything but compactor/formats/ (and the policy, project and catalog layers,
#: whose words are the user's YAML: ``format: delta``, ``sink:``, ``retention.vacuum``)
SHARED = ("planning", "tasks", "engines", "output", "cli", "runtime", "models", "api.py")

#: a format's name or one of its words; the longest alternative first, so a match is counted once
TERMS = re.compile(r"spark_file_sink|file_sink|_spark_metadata|_delta_log|deletion[ _-]?vectors?|delta|iceberg"
                   r"|vacuum|protocol|sink|checkpoint", re.IGNORECASE)

#: (module under compactor/, its terms, why they may stay): keep it short; each term must still match
ALLOWED: tuple[tuple[str, frozenset[str], str], ...] = (
    ("models/formats.py", frozenset({"delta", "_delta_log", "spark_file_sink", "file_sink", "_spark_metadata", "sink",
                                     "iceberg", "vacuum"}),
     "the registry: one FormatSpec line per format names it, its module, its marker folder and its catalog "
     "provider; the trait sink_settings (and its comments) is the policy's `sink:` block, and retention_keys "
     "the keys of its `retention:` block (`retention.vacuum`), YAML keys users write"),
    ("planning/bins.py", frozenset({"delta"}),
     'the bin model "delta-spark" (bins_delta_spark): the packing of delta-spark\'s OPTIMIZE, which both formats '
     "plan with; saved plans hold the name (bin_model, the plan schema's enum) and tests/interop compares it "
     "with OPTIMIZE itself"),
    ("runtime/storage/options.py", frozenset({"delta"}),
     "the storage option delta_dynamo_table_name, a key users' storage_options may hold for a table library "
     "(its DynamoDB log store): dropped here, because obstore refuses keys it does not know"),
    ("runtime/iceberg_catalog.py", frozenset({"iceberg"}),
     "the one opener of pyiceberg's catalogs from a profile's catalog settings: catalogs/ (which may not import "
     "formats/) lists a namespace through it and formats/iceberg/ (which may not import catalogs/) reads and "
     "commits a table through it; runtime is the one layer both may import"),
    ("models/report.py", frozenset({"checkpoint"}),
     "TableReport.checkpoint_sources: a view of the neutral `logs` (LogSeries.source) kept for the report "
     "data's readers (tests/observability/test_report.py reads it)"),
)
ALLOWED_TERMS = {(module, term) for module, terms, _ in ALLOWED for term in terms}


#: the tokens that hold text: names, strings (an f-string's text is its own token from Python 3.12 on) and
#: comments
TEXT_TOKENS = {tokenize.NAME, tokenize.STRING, tokenize.COMMENT,
               *([tokenize.FSTRING_MIDDLE] if hasattr(tokenize, "FSTRING_MIDDLE") else [])}


def term_of(match: str) -> str:
    """The term a match counts as (``Deletion-Vectors`` -> ``deletion vector``)."""
    low = match.lower()
    return "deletion vector" if low.startswith("deletion") else low


def _imports_typing_protocol(source: str) -> bool:
    return bool(re.search(r"^\s*from typing import [^\n]*\bProtocol\b|\btyping\.Protocol\b", source, re.M))


def hits(source: str) -> list[tuple[int, str, str]]:
    """(line, term, the text matched) for every format word in ``source``."""
    typing_protocol = _imports_typing_protocol(source)
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in TEXT_TOKENS:
            continue
        if tok.type == tokenize.NAME and tok.string == "Protocol" and typing_protocol:
            continue  # the typing Protocol a class derives from
        text = tok.string.replace("timedelta", " " * len("timedelta"))
        for m in TERMS.finditer(text):
            line = tok.start[0] + text.count("\n", 0, m.start())
            out.append((line, term_of(m.group()), m.group()))
    return out


def shared_modules() -> list[Path]:
    files: list[Path] = []
    for name in SHARED:
        p = PACKAGE / name
        files += sorted(f for f in p.rglob("*.py") if "__pycache__" not in f.parts) if p.is_dir() else [p]
    return files


def all_hits() -> dict[str, list[tuple[int, str, str]]]:
    found = {}
    for f in shared_modules():
        if h := hits(f.read_text(encoding="utf-8")):
            found[f.relative_to(PACKAGE).as_posix()] = h
    return found


def test_the_shared_layers_name_no_format() -> None:
    found = all_hits()
    wrong = {rel: [f"line {n}: {text!r}" for n, term, text in h if (rel, term) not in ALLOWED_TERMS]
             for rel, h in found.items()}
    wrong = {rel: lines for rel, lines in wrong.items() if lines}
    counts = {rel: len(lines) for rel, lines in wrong.items()}
    assert not wrong, (f"format words in the shared layers (per module: {counts}); move them into the format's "
                       f"folder, or allow one in ALLOWED with its reason:\n"
                       + "\n".join(f"{rel}: {', '.join(lines)}" for rel, lines in sorted(wrong.items())))


def test_every_allowed_word_is_still_there() -> None:
    """An entry whose word is gone is removed, so the list only ever holds what it excuses."""
    found = all_hits()
    stale = [f"{rel}: {term}" for rel, term in sorted(ALLOWED_TERMS)
             if term not in {t for _, t, _ in found.get(rel, ())}]
    assert not stale, "ALLOWED terms that match nothing any more (remove them): " + ", ".join(stale)
    assert all(reason.strip() and terms for _, terms, reason in ALLOWED)
    assert len({module for module, _, _ in ALLOWED}) == len(ALLOWED)  # one entry per module


def test_the_check_sees_words_in_code_strings_and_comments() -> None:
    """The harness itself: a format word is found in a name, a string and a comment, in any case; the
    standard library's timedelta and typing's Protocol are not format words, Delta's protocol is."""
    source = ('from typing import Protocol\nimport datetime as dt\n\n'
              'class Engine(Protocol):  # reads the _delta_log\n'
              '    """Rewrites a Delta table\'s files; Deletion Vectors are kept."""\n\n'
              'def vacuum_all(d: dt.timedelta) -> str:\n'
              '    return "checkpoint: file-sink sink (the table protocol)" + f"{d} iceberg"\n')
    found = Counter(term for _, term, _ in hits(source))
    assert found == Counter({"_delta_log": 1, "delta": 1, "deletion vector": 1, "vacuum": 1, "checkpoint": 1,
                             "sink": 2, "protocol": 1, "iceberg": 1}), found
    assert [n for n, _, _ in hits(source)][:3] == [4, 5, 5]
    assert hits("from typing import Any\nclass P(Protocol): ...\n")  # not typing's: a word like any other
    assert not hits("import datetime\nx = datetime.timedelta(days=1)\n")
