"""Typed data, not dict bags: in formats/, tasks/ and planning/ an annotation of ``dict[str, Any]`` or
``Mapping[str, Any]`` is allowed only where JSON is (de)serialised: the Delta log's and the sink log's own
JSON actions as read, a ``to_dict``/``from_dict`` and the plan file's JSON. Each such place is listed below
with why; a new one fails this test until it is typed or listed, and a listed place that is gone fails it too
(the list stays exact)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "compactor"
LAYERS = ("formats", "tasks", "planning")
UNTYPED = ("dict[str, Any]", "Mapping[str, Any]")

DELTA_ACTION = "a Delta log action (add/remove/commitInfo/metaData/protocol) as JSON read from the log"
SINK_ENTRY = "a sink log entry as JSON read from _spark_metadata"
TO_JSON = "serialisation to JSON"
FROM_JSON = "deserialisation from JSON"
SCHEMA = "a JSON Schema (the plan schema, or one action type's part of it, generated from its class)"
V1_TABLE = FROM_JSON + ": a schema-version-1 plan's table, for the field a format read its blockers from"

#: module:qualified.name -> why it is JSON-shaped
ALLOWED: dict[str, str] = {
    "formats/base:RepairOutcome.to_dict.return": TO_JSON,
    "formats/delta/duplicates/lineage:Lineage.last_add": DELTA_ACTION,
    "formats/delta/duplicates/lineage:Lineage.last_remove": DELTA_ACTION,
    "formats/delta/duplicates/lineage:Lineage.live": DELTA_ACTION,
    "formats/delta/duplicates/lineage:_analyse.last_add": DELTA_ACTION,
    "formats/delta/duplicates/lineage:_analyse.last_remove": DELTA_ACTION,
    "formats/delta/duplicates/lineage:_analyse.live": DELTA_ACTION,
    "formats/delta/duplicates/lineage:_append.last_add": DELTA_ACTION,
    "formats/delta/duplicates/lineage:_append.live": DELTA_ACTION,
    "formats/delta/apply/log_writer:Operation.parameters": DELTA_ACTION + " (commitInfo.operationParameters, JSON values)",
    "formats/delta/apply/log_writer:add_action.return": DELTA_ACTION + " (an add line as written)",
    "formats/delta/apply/log_writer:commit_info.info": DELTA_ACTION + " (the commitInfo line as written)",
    "formats/delta/apply/log_writer:commit_info.return": DELTA_ACTION + " (the commitInfo line as written)",
    "formats/delta/apply/log_writer:remove_action.return": DELTA_ACTION + " (a remove line as written)",
    "formats/delta/apply/deletes:_logged_adds.out": DELTA_ACTION + " (adds as the log has them, whose tags and stats a remove copies)",
    "formats/delta/apply/deletes:_logged_adds.return": DELTA_ACTION + " (adds as the log has them, whose tags and stats a remove copies)",
    "formats/delta/apply/log_writer:remove_action.remove": DELTA_ACTION + " (a remove line as written)",
    "formats/delta/duplicates/repair:_vector.add": DELTA_ACTION + " (an add as the log has it: its deletionVector is read)",
    "formats/delta/read/column_mapping:_fields.delta": FROM_JSON + " (a Delta schema's fields, as metaData.schemaString holds them)",
    "formats/delta/read/column_mapping:_physical.field": FROM_JSON + " (one field of a Delta schema, as schemaString holds it)",
    "formats/delta/read/deletion_vectors:descriptor.value": DELTA_ACTION + " (a deletionVector as the log or a checkpoint holds it, typed here)",
    "formats/delta/apply/log_writer:write_commit.actions": DELTA_ACTION + " (the add and remove lines as written)",
    "formats/delta/read/log:Commit.adds": DELTA_ACTION,
    "formats/delta/read/log:Commit.info": DELTA_ACTION,
    "formats/delta/read/log:Commit.metadata_action": DELTA_ACTION,
    "formats/delta/read/log:Commit.protocol_action": DELTA_ACTION,
    "formats/delta/read/log:Commit.removes": DELTA_ACTION,
    "formats/delta/read/log:LoggedAction.__init__.self._parsed": DELTA_ACTION + " (an add or remove line, parsed when first read)",
    "formats/delta/read/log:LoggedAction._action.return": DELTA_ACTION + " (an add or remove line, parsed when first read)",
    "formats/delta/apply/native:_member_outcome.ours.entry": DELTA_ACTION,
    "formats/delta/plan/actions:DuplicateRewrites.from_v1.table": V1_TABLE,
    "formats/delta/duplicates/repair_result:RepairResult.to_dict.return": TO_JSON,
    "formats/delta/apply/stats:delta_stats.maxs": TO_JSON + ": an add action's stats (maxValues), as Delta writers write them",
    "formats/delta/apply/stats:delta_stats.mins": TO_JSON + ": an add action's stats (minValues), as Delta writers write them",
    "formats/delta/apply/stats:stats_json.stats": TO_JSON + ": an add action's stats, as Delta writers write them",
    "formats/delta/read/log:num_records.action": DELTA_ACTION,
    "formats/delta/read/log_replay:Replay.add.action": DELTA_ACTION + " (read by compactor's own log replay)",
    "formats/delta/read/log_replay:Replay.metadata.meta": DELTA_ACTION + " (read by compactor's own log replay)",
    "formats/delta/read/log_replay:Replay.protocol.protocol": DELTA_ACTION + " (read by compactor's own log replay)",
    "formats/delta/read/log_replay:Replay.remove.action": DELTA_ACTION + " (read by compactor's own log replay)",
    "formats/delta/read/log_replay:dv_key.dv": DELTA_ACTION + " (read by compactor's own log replay)",
    "formats/delta/read/log_paths:dv_file.dv": DELTA_ACTION + " (read by compactor's own log replay)",
    "formats/delta/read/log_replay:Replay.put.dv": DELTA_ACTION + " (read by compactor's own log replay)",
    "formats/delta/read/log_replay:_decoded.action": DELTA_ACTION + " (read by compactor's own log replay)",
    "formats/file_sink/inspection:InspectSettings.to_dict.out": TO_JSON + ": the inspect report's `policy`",
    "formats/file_sink/inspection:InspectSettings.to_dict.return": TO_JSON + ": the inspect report's `policy`",
    "formats/file_sink/inspection:LogHealth.to_dict.return": TO_JSON + ": one of the inspect report's `logs`",
    "formats/file_sink/log:MetadataLog.read_entries.return": SINK_ENTRY,
    "formats/file_sink/log:parse_entries.return": SINK_ENTRY,
    "formats/file_sink/log:read_entries.return": SINK_ENTRY,
    "formats/file_sink/state:read_ledger.return": FROM_JSON + ": compactor's ledger of replaced sink files",
    "formats/file_sink/state:read_swaps.return": FROM_JSON + ": compactor's record of the manifests it swapped",
    "planning/action_schema:params_schema.derived": SCHEMA,
    "planning/action_schema:params_schema.out": SCHEMA,
    "planning/action_schema:params_schema.props": SCHEMA,
    "planning/action_schema:params_schema.return": SCHEMA,
    "planning/action_schema:type_schema.return": SCHEMA,
    "planning/actions:Action.derived_params.return": SCHEMA,
    "planning/actions:Action.params_schema.return": SCHEMA,
    "planning/actions:RewriteAction.derived_params.return": SCHEMA,
    "planning/blockers:Blocker.from_dict.d": FROM_JSON,
    "planning/blockers:Blocker.to_dict.return": TO_JSON,
    "planning/blocker_kinds:BlockerKind.from_v1.table": V1_TABLE,
    "planning/plan:_action.d": FROM_JSON + ": one action of the plan file",
    "planning/actions:Action.params.return": TO_JSON + ": an action's type-specific fields as the plan file stores them",
    "planning/actions:RewriteAction.params.return": TO_JSON + ": an action's type-specific fields as the plan file stores them",
    "planning/actions:action_from_dict.d": FROM_JSON,
    "planning/actions:action_to_dict.return": TO_JSON,
    "planning/plan:Plan.invocation": TO_JSON + ": the command line as given, written into the plan as it came",
    "planning/plan:Plan.target": TO_JSON + ": Target.redacted(), the target as the plan file records it",
    "planning/plan:digest_pieces.data": FROM_JSON + ": the plan file's content, digested as written",
    "planning/plan:dumps_action.action": TO_JSON + ": one action of the plan file, as written and digested",
    "planning/plan:plan_digest.data": FROM_JSON + ": the plan file's content, digested as written",
    "planning/plan:plan_from_dict.d": FROM_JSON,
    "planning/plan:plan_to_dict.return": TO_JSON,
    "tasks/plan:build_plan.invocation": TO_JSON + ": the command line as given, written into the plan as it came",
    "tasks/plan_file:_write_compact_json.data": TO_JSON,
    "tasks/plan_schema:fill.doc": SCHEMA,
    "tasks/plan_schema:fill.return": SCHEMA,
    "tasks/plan_schema:plan_schema.return": SCHEMA,
    "tasks/plan_schema:_plan_schema.return": SCHEMA,
    "tasks/repair:RepairReport.to_dict.return": TO_JSON,
    "tasks/repair:TableRepair.result": TO_JSON + ": the format's RepairOutcome.to_dict(), as `repair --format json` prints it",
    "tasks/repair:TableRepair.to_dict.return": TO_JSON,
}


def untyped_places() -> set[str]:
    found: set[str] = set()
    for layer in LAYERS:
        for f in sorted((PACKAGE / layer).rglob("*.py")):
            module = f.relative_to(PACKAGE).with_suffix("").as_posix()
            found |= _scan(ast.parse(f.read_text(encoding="utf-8")), module, [])
    return found


def _scan(node: ast.AST, module: str, scope: list[str]) -> set[str]:
    out: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            named = [(a.arg, a.annotation) for a in child.args.posonlyargs + child.args.args + child.args.kwonlyargs]
            named += [("return", child.returns)]
            out |= {f"{module}:{'.'.join([*scope, child.name, n])}" for n, a in named if _untyped(a)}
            out |= _scan(child, module, [*scope, child.name])
        elif isinstance(child, ast.ClassDef):
            out |= _scan(child, module, [*scope, child.name])
        elif isinstance(child, ast.AnnAssign):
            if _untyped(child.annotation):
                out.add(f"{module}:{'.'.join([*scope, ast.unparse(child.target)])}")
        else:
            out |= _scan(child, module, scope)
    return out


def _untyped(annotation: ast.expr | None) -> bool:
    return annotation is not None and any(u in ast.unparse(annotation) for u in UNTYPED)


def test_dict_bags_only_where_json_is_read_or_written() -> None:
    found = untyped_places()
    new = sorted(found - ALLOWED.keys())
    assert not new, f"type these (a dataclass, a TypedDict) or list them in ALLOWED with why: {new}"
    gone = sorted(ALLOWED.keys() - found)
    assert not gone, f"these are typed now: remove them from ALLOWED: {gone}"


def test_the_scan_sees_arguments_returns_and_fields(tmp_path: Path) -> None:
    tree = ast.parse("class A:\n    x: dict[str, Any]\n    def f(self, y: Mapping[str, Any]) -> dict[str, Any]:\n"
                     "        z: dict[str, Any] = {}\n")
    assert _scan(tree, "m", []) == {"m:A.x", "m:A.f.y", "m:A.f.return", "m:A.f.z"}
