"""The checks behind `compactor debug`: each one line, none raises (a failure is a line saying why)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

from compactor.formats.discover import claimed_by
from compactor.models.formats import format_spec
from compactor.project.model import ProjectOptions, Target


@dataclass(frozen=True)
class Check:
    """One line of `compactor debug`: what was checked, whether it passed, and the detail."""

    name: str
    ok: bool
    detail: str


def run_checks(options: ProjectOptions, *, spark_session: bool = False) -> Iterator[Check]:
    from compactor.errors import CompactorError, UnsupportedFormatError
    from compactor.project.compile import compile_project
    from compactor.runtime.secrets import redact, register_secrets
    from compactor.tasks.plan import expand_policies

    try:
        compiled = compile_project(options)
    except CompactorError as e:
        yield Check("project", False, str(e))
        return
    errors = [d for d in compiled.diagnostics if getattr(d, "severity", "error") == "error"]
    yield Check("project", not errors, f"{compiled.project.name} at {compiled.project.root}"
                + (f": {len(errors)} validation error(s) (`compactor validate`)" if errors else ""))
    t = compiled.target
    yield Check("profile", True, f"{t.profile}, target {t.name}, {t.engine} engine")
    register_secrets(t.storage_options)
    discovered: dict[str, Exception] = {}
    for p in expand_policies(compiled.policies, compiled.project.root, t.storage_options, discovered,
                             target=t):
        if p.name in discovered:
            why = discovered[p.name]
            yield Check(f"table {p.name}", isinstance(why, UnsupportedFormatError),
                        redact(str(why)) + (" (skipped)" if isinstance(why, UnsupportedFormatError) else ""))
            continue
        if p.path is None:
            yield Check(f"table {p.name}", t.engine == "spark", "a catalog table: resolved by Spark at plan time")
            continue
        spec = format_spec(p.format)
        try:
            found = claimed_by(p.path, p.format, t.storage_options) is not None
            what = " or ".join(spec.metadata) if spec is not None else f"{p.format} table"
            yield Check(f"table {p.name}", found, f"{redact(p.path)}" + ("" if found else f": no {what} there"))
        except Exception as e:  # noqa: BLE001 - a store we cannot reach is this check's answer
            yield Check(f"table {p.name}", False, f"{redact(p.path)}: {redact(str(e).splitlines()[0])}")
    if t.engine == "spark":
        yield from _spark_checks(t, spark_session)


def _spark_checks(target: Target, spark_session: bool) -> Iterator[Check]:
    import importlib.util

    has_pyspark = importlib.util.find_spec("pyspark") is not None
    remote = target.spark.remote
    if remote:  # a Spark Connect server does the Spark work: no Java needed here
        yield from _connect_check(remote)
    else:
        java = shutil.which("java")
        if java is None:
            yield Check("java", False, "no `java` on PATH (Spark needs Java 17 or 21)")
        else:
            r = subprocess.run([java, "-version"], capture_output=True, text=True)
            yield Check("java", r.returncode == 0, (r.stderr or r.stdout).splitlines()[0] if (r.stderr or r.stdout) else java)
    yield Check("pyspark", has_pyspark, "importable" if has_pyspark else "not installed (pip install 'compactor[spark]')")
    if spark_session and has_pyspark and (remote or shutil.which("java")):
        yield from _session_checks(target)


def _session_checks(target: Target) -> Iterator[Check]:
    """A session started as the engine starts it, and per table format that needs jars, whether they loaded."""
    from compactor.engines.spark_session import get_or_create_session, jars_loaded
    from compactor.tasks.spark_needs import any_format

    needs = any_format(target.spark)
    label = " and ".join(f"{n.name} jars" for n in needs(False)) or "spark session"
    try:
        spark = get_or_create_session(target.spark, needs=needs, purpose=f"`compactor debug` to check the {label}")
        for need in needs(False):
            ok = jars_loaded(spark, need)
            if target.spark.remote:
                yield Check(f"{need.name} jars", ok, f"{need.name} {'on' if ok else 'not on'} the Spark Connect server")
            else:
                yield Check(f"{need.name} jars", ok, f"{need.jvm_class} loads" if ok else "not on the classpath")
    except Exception as e:  # noqa: BLE001
        yield Check(label, False, str(e).splitlines()[0])


def _connect_check(url: str) -> Iterator[Check]:
    from compactor.engines.spark_connect import check_reachable
    from compactor.errors import CompactorError
    from compactor.project.model import shown_remote

    try:
        check_reachable(url)
        yield Check("spark connect", True, f"a server answers at {shown_remote(url)}")
    except CompactorError as e:
        yield Check("spark connect", False, e.message)
