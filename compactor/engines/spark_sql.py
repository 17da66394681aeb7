"""Spark SQL text the engine builds (literals, a partition's predicate, the group write's map of file names
to bins), as plain strings so it can be tested without Spark, and the readable part of a Java error."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence


def sql_literal(value: str | None) -> str:
    """``value`` as a Spark SQL string literal (NULL for None)."""
    return "NULL" if value is None else "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def partition_predicate(partition: Mapping[str, str | None]) -> str | None:
    """A Spark SQL predicate selecting exactly one partition."""
    if not partition:
        return None
    return " AND ".join(f"`{c}` IS NULL" if v is None else f"`{c}` = {sql_literal(v)}" for c, v in partition.items())


def java_error(e: BaseException, limit: int = 600) -> str:
    """The readable part of an error raised through py4j: the Java exception's message and its root
    cause ("Caused by:"), without the stack frames (a Py4JJavaError's text is the whole Java stack)."""
    lines = [ln.strip() for ln in str(e).splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(("at ", "...", "JVM stacktrace:"))
             and not ln.startswith("An error occurred while calling")]
    head = lines[0].lstrip(": ") if lines else type(e).__name__
    causes = [ln for ln in lines if ln.startswith("Caused by:")]
    text = head if not causes or causes[-1][len("Caused by:"):].strip() in head else f"{head} ({causes[-1]})"
    return text if len(text) <= limit else text[:limit] + "..."


def file_name(location: str) -> str:
    """The name Spark's ``_metadata.file_name`` gives the file at ``location`` (the last part of its
    decoded path)."""
    return posixpath.basename(location)


def bin_map(names: Sequence[Sequence[str]]) -> str:
    """A SQL expression of the map from each file name to its bin's index (``names[i]``: bin i's names).
    One JSON string literal read by ``from_json``, folded to a constant as the query is optimized: the
    parser reads one token instead of a map literal of two per file (a cold session parsed a 1,000-name
    literal in about 0.3 s more, docs/benchmarks.md). A join would broadcast a table of names, which Spark
    collects in a job of its own. A name of no bin has none (NULL): its rows land outside every bin."""
    import json

    text = json.dumps({n: i for i, ns in enumerate(names) for n in ns}, ensure_ascii=False, separators=(",", ":"))
    return f"from_json({sql_literal(text)}, 'map<string,int>')"
