"""Property tests of the validator: whatever a policy file contains, `compactor.api.validate` returns
diagnostics or raises a CompactorError subclass -- never any other exception -- and the CLI never prints a
traceback or an internal error and exits 0, 1 or 2.

Inputs are the shipped example policies (policies/tables/*.yml) mutated line-wise (delete, duplicate, swap,
re-indent, truncate, rename keys, replace values with hostile scalars and templates, insert random bytes),
plus random policy documents built from the schema's keys. Runs are derandomized so CI is reproducible.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor.api import ProjectOptions, validate
from compactor.errors import CompactorError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "policies" / "tables").glob("*.yml"))
EXAMPLE_TEXTS = [p.read_text(encoding="utf-8") for p in EXAMPLES]
PROJECT = "name: prop\nvars:\n  lake_root: /lake\n  lookback_days: 30\n"

KEYS = ["version", "tables", "defaults", "name", "path", "discover", "root", "include", "exclude", "format",
        "tags", "owner", "description", "enabled", "compaction", "strategy", "z_order_by", "sort_by",
        "target_file_size", "min_file_size", "triggers", "min_input_files", "min_file_reduction",
        "min_small_file_ratio", "partitions", "where", "lookback", "column", "period", "skip_latest",
        "quiet_period", "budget", "max_bytes_per_run", "max_partitions_per_run", "order", "method",
        "retention", "deleted_file_retention", "log_retention", "vacuum", "dry_run_first",
        "allow_unsafe_retention", "min_reader_lag", "manage_properties", "sink", "compact_interval",
        "min_batches_to_retain", "cleanup_delay", "grace_period", "writer_stopped_check", "checkpoint",
        "downstream_streaming_readers", "prune", "prune_delete_files", "<<", "? x", "-", "&a", "*a", "nme"]
SCALARS = ["0", "-1", "1", "1.5", ".nan", "-.inf", "true", "no", "null", "~", "''", '""', "[]", "{}",
           "[a, a]", "{a: 1}", "1MB", "10 parsecs", "7d", "1h30m", "0m", "2024-01-01", "z_order", "sort",
           "bin_pack", "spark_file_sink", "delta", "none", "unknown", "/tmp/x", "*a", "&a x", "!!binary aGk=",
           "!!python/name:os.system ''", "|", ">-", "'unterminated", "\"\\x\"", "[", "{", "%TAG", "@", "`",
           "\"{{ var('lake_root') }}\"", "\"{{ var('nope') }}\"", "\"{{ env_var('COMPACTOR_NOPE_X') }}\"",
           "\"{{ nope }}\"", "\"{{ 1/0 }}\"", "\"{{ ''.__class__.__mro__ }}\"", "\"{{ cycler.__init__ }}\"",
           "\"{{ var('lookback_days') }}\"", "\"{% if %}\"", "\"{{\"", "\"{# x\"", "\"{{ today() }}\"",
           "\"{{ days_ago('x') }}\"", "\"{{ range(3) | list }}\"", "\"date >= '2024-01-01'\"", "\"a = (\""]

line_index = st.integers(min_value=0, max_value=400)


@st.composite
def mutation(draw):
    kind = draw(st.sampled_from(["delete", "duplicate", "swap", "indent", "truncate", "key", "value", "bytes"]))
    return (kind, draw(line_index), draw(line_index), draw(st.integers(-4, 4)),
            draw(st.sampled_from(KEYS)), draw(st.sampled_from(SCALARS)),
            draw(st.binary(min_size=1, max_size=12)))


def apply_mutations(text: str, muts) -> bytes:
    lines = text.split("\n")
    raw_inserts: list[tuple[int, bytes]] = []
    for kind, i, j, delta, key, scalar, blob in muts:
        if not lines:
            lines = [""]
        i, j = i % len(lines), j % len(lines)
        line = lines[i]
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "indent":
            lines[i] = (" " * delta + line) if delta >= 0 else line[-delta:] if line[:-delta].isspace() else "\t" + line
        elif kind == "truncate":
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: j % (len(lines[-1]) + 1)]
        elif kind == "key" and ":" in line:
            indent = line[: len(line) - len(line.lstrip(" -"))]
            lines[i] = f"{indent}{key}:{line.split(':', 1)[1]}"
        elif kind == "value" and ":" in line:
            lines[i] = f"{line.split(':', 1)[0]}: {scalar}"
        elif kind == "bytes":
            raw_inserts.append((i, blob))
    data = "\n".join(lines).encode("utf-8")
    for i, blob in raw_inserts:
        pos = i % (len(data) + 1)
        data = data[:pos] + blob + data[pos:]
    return data


mutated_policies = st.tuples(st.sampled_from(range(len(EXAMPLE_TEXTS))),
                             st.lists(mutation(), min_size=1, max_size=4)).map(
    lambda t: apply_mutations(EXAMPLE_TEXTS[t[0]], t[1]))

scalar_values = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                          st.text(max_size=20), st.sampled_from(["128MB", "7d", "z_order", "{{ var('x') }}"]))
json_values = st.recursive(scalar_values, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS[:57]) | st.text(max_size=8), inner, max_size=5)),
    max_leaves=25)
random_tables = st.dictionaries(st.sampled_from(KEYS[2:57]), json_values, max_size=8)
random_policies = st.fixed_dictionaries(
    {"version": st.one_of(st.just(1), scalar_values), "tables": st.lists(random_tables, max_size=3)},
    optional={"defaults": random_tables}).map(
    lambda d: yaml.safe_dump(d, sort_keys=False, allow_unicode=True).encode("utf-8"))


def write_project(root: Path, policy: bytes) -> Path:
    (root / "policies").mkdir(parents=True, exist_ok=True)
    (root / "compactor.yml").write_text(PROJECT, encoding="utf-8")
    (root / "policies" / "p.yml").write_bytes(policy)
    return root


def check_in_process(policy: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = write_project(Path(d), policy)
        try:
            result = validate(ProjectOptions(project_dir=root))
        except CompactorError:
            return
        for diag in result.diagnostics:
            assert diag.line >= 1 and diag.col >= 1, diag
            assert diag.severity in ("error", "warning"), diag
        assert result.ok == (not result.errors)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(mutated_policies)
def test_mutated_examples_never_crash(policy: bytes) -> None:
    check_in_process(policy)


@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(random_policies)
def test_random_policies_never_crash(policy: bytes) -> None:
    check_in_process(policy)


def test_unmutated_examples_are_valid(tmp_path: Path) -> None:
    for i, text in enumerate(EXAMPLE_TEXTS):
        result = validate(ProjectOptions(project_dir=write_project(tmp_path / str(i), text.encode())))
        assert result.ok and not result.diagnostics, [str(d) for d in result.diagnostics]


def test_cli_on_mutated_projects(tmp_path: Path) -> None:
    """`python -m compactor validate` on a few mutated projects: no traceback, no internal error, exit 0/1/2."""
    rng = random.Random(20241121)
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    for n in range(5):
        muts = [(rng.choice(["delete", "duplicate", "swap", "indent", "truncate", "key", "value", "bytes"]),
                 rng.randrange(400), rng.randrange(400), rng.randint(-4, 4), rng.choice(KEYS), rng.choice(SCALARS),
                 bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))) for _ in range(rng.randint(1, 4))]
        root = write_project(tmp_path / f"p{n}", apply_mutations(EXAMPLE_TEXTS[n % len(EXAMPLE_TEXTS)], muts))
        proc = subprocess.run([sys.executable, "-m", "compactor", "validate", "--project-dir", str(root)],
                              capture_output=True, text=True, env=env, timeout=60)
        out = proc.stdout + proc.stderr
        assert "Traceback" not in out, out
        assert "Internal error" not in out, out
        assert proc.returncode in (0, 1, 2), (proc.returncode, out)
