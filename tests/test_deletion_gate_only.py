"""Every deletion of a table's files goes through the deletion gate (runtime/deletion.py, issue 36): a
file is deleted only after the table's format proved, from its own log read right then, that nothing
references it. This test finds every call in compactor/ that deletes something and fails on any place not
listed below with why it deletes no file of a table's that a log could reference."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "compactor"
DELETES = {"delete", "delete_many", "delete_prefix", "delete_dir", "delete_file", "delete_if_match", "unlink",
           "cleanup_metadata"}
#: deletes only when called on these modules (``list.remove`` is no delete)
MODULE_DELETES = {("os", "remove"), ("os", "rmdir"), ("os", "unlink"), ("shutil", "rmtree")}
STORAGE = "the Storage backends themselves (what every caller's delete runs)"

#: module:function -> (how many deleting calls it makes, why it may delete without the gate)
ALLOWED: dict[str, tuple[int, str]] = {
    "runtime/deletion:delete_proved": (2, "the gate's own delete, of what the gate passed"),
    "runtime/storage/base:Storage.delete_many": (1, STORAGE),
    "runtime/storage/local:LocalStorage.write_bytes": (1, STORAGE + ": a temporary file of its own write"),
    "runtime/storage/local:LocalStorage.create_exclusive": (1, STORAGE + ": a temporary file of its own write"),
    "runtime/storage/local:LocalStorage.replace_if_match": (1, STORAGE + ": a temporary file of its own write"),
    "runtime/storage/local:LocalStorage.delete_if_match": (1, STORAGE),
    "runtime/storage/local:LocalStorage.delete": (1, STORAGE),
    "runtime/storage/local:LocalStorage.delete_prefix": (1, STORAGE),
    "runtime/storage/local:LocalStorage.copy": (1, STORAGE + ": a temporary file of its own write"),
    "runtime/storage/local:LocalStorage.rename": (1, STORAGE),
    "runtime/storage/object_store:ObjectStoreStorage.delete": (1, STORAGE),
    "runtime/storage/object_store:ObjectStoreStorage.delete_prefix": (1, STORAGE),
    "runtime/storage/object_store:ObjectStoreStorage.delete_many": (2, STORAGE),
    "runtime/storage/object_store:ObjectStoreStorage.rename": (1, STORAGE + ": a move is a copy and a delete"),
    "runtime/atomic_file:replacing": (1, "a local file of compactor's own (run results, plans), never a table's"),
    "runtime/lease:TableLease.release": (1, "the table's lease object, _compactor/lease.json"),
    "runtime/journal:ActionJournal.__exit__": (1, "the journal's own entry in _compactor/journal"),
    "runtime/journal:recover": (2, "the journal's own entries and their torn temporary files in _compactor/journal"),
    "engines/spark:SparkEngine._rewrite_in_one_job": (2, "the _compactor_staging_ folder Spark wrote the group's files into"),
    "engines/spark:SparkEngine._rewrite_bin": (1, "the _compactor_staging_ folder Spark wrote the bin's file into"),
    "engines/spark_class_archive:_unlink": (1, "compactor's own JVM class archive in the user's cache folder"),
    "tasks/demo:prepare_dir": (1, "the demo's own folder, made by `compactor demo`"),
    "formats/delta/apply/log_writer:_post_commit": (1, "delta-rs' cleanup of log files older than delta.logRetentionDuration "
                                                 "after a checkpoint, as every Delta writer's post-commit hook "
                                                 "does (never a data file, never a commit the newest checkpoint "
                                                 "needs)"),
    "formats/file_sink/recovery:_adopt_legacy_journal": (1, "the previous release's journal, _compactor/sink_journal.json"),
    "formats/file_sink/run:_replace_compact": (1, "the .crc checksum of the sink manifest compactor just replaced"),
    "formats/file_sink/run:_replace_local": (2, "its own temporary manifest, and the replaced manifest's .crc checksum"),
}


def _deletes(func: ast.Attribute) -> bool:
    if isinstance(func.value, ast.Name) and (func.value.id, func.attr) in MODULE_DELETES:
        return True
    return func.attr in DELETES


def _deleting_calls() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).with_suffix("").as_posix()
        tree = ast.parse(path.read_text())

        def visit(node: ast.AST, scope: list[str]) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(child, [*scope, child.name])
                    continue
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and _deletes(child.func):
                    key = f"{module}:{'.'.join(s for s in scope)}"
                    found[key] = found.get(key, 0) + 1
                visit(child, scope)

        visit(tree, [])
    return found


def test_no_code_deletes_a_tables_files_without_the_gate() -> None:
    found = _deleting_calls()
    new = sorted(set(found) - set(ALLOWED))
    assert not new, f"these delete without the deletion gate (runtime/deletion.py); route them through it or list them with why: {new}"
    gone = sorted(set(ALLOWED) - set(found))
    assert not gone, f"listed but no longer deleting anything (take them off the list): {gone}"
    more = sorted(k for k, n in found.items() if n != ALLOWED[k][0])
    assert not more, f"these make another number of deleting calls than listed (a new one needs the gate): {more}"
