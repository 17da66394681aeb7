"""An Iceberg table of a real REST catalog (Iceberg's reference server on loopback: tests/iceberg/rest_server.py),
end to end through the CLI on the local engine (no JVM in compactor): a table written by pyiceberg through the
catalog, with small files in three partitions; `compactor plan` lists the exact files of each partition,
a file appended through the catalog after planning is left alone, `compactor apply` replaces exactly the
planned files in ``replace`` snapshots (rows the same multiset, read back through the catalog); the next
plan takes each output with the appended file, and after its apply the plan converges
(``--detailed-exitcode`` 0). An overwrite or a delete of a planned file through the catalog, before the
apply or while its bin is rewritten, makes the action stale: nothing is committed and its output is
deleted. A snapshot expiry whose commit an append beats is refused by the server (409), checked again and
committed. A REST catalog that does not answer is exit 1 with one line naming the catalog and its URI."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install 'compactor[iceberg]')")

from pyiceberg.catalog import Catalog  # noqa: E402
from pyiceberg.expressions import EqualTo  # noqa: E402
from pyiceberg.table import Table  # noqa: E402

from compactor.formats.iceberg import expire as expire_module  # noqa: E402
from compactor.formats.iceberg.state import state_of  # noqa: E402
from compactor.runtime import faults  # noqa: E402
from compactor.runtime.iceberg_catalog import RestCatalogSettings, open_catalog  # noqa: E402
from tests.iceberg.project import Project, policy, rest_profiles  # noqa: E402
from tests.iceberg.rest_server import RestRequest, RestServer  # noqa: E402
from tests.iceberg.tables import append, leftovers, operations_since, overwrite_file, rows, write_table  # noqa: E402


def _catalog(server: RestServer) -> Catalog:
    """A new pyiceberg client of the server (each call: nothing cached between the steps of a test)."""
    cat = open_catalog(RestCatalogSettings("cat", server.uri))
    cat.create_namespace_if_not_exists("db")
    return cat


#: an OAuth2 client credential: the server issues a token for it, which compactor's requests carry
CREDENTIAL = "compactor:rest-secret-9e2a"


def _project(tmp_path: Path, server: RestServer, table: str) -> Project:
    return Project.make(tmp_path, table, policy_text=policy(table),
                        profiles_text=rest_profiles(server.uri, credential=CREDENTIAL, warehouse=server.warehouse))


def _authenticated(requests: list[RestRequest]) -> bool:
    """Whether every request but the token exchange carried the token issued for CREDENTIAL."""
    calls = [q for q in requests if q.path != "/v1/oauth/tokens"]
    return bool(calls) and all(q.bearer and "sub=compactor" in q.authorization for q in calls)


def test_plan_apply_through_the_rest_catalog_replaces_exactly_the_planned_files_and_converges(
        rest_catalog: RestServer, tmp_path: Path) -> None:
    name = "converges"
    t = write_table(_catalog(rest_catalog), f"db.{name}", "identity_string")  # cat: null, x, y
    planned, at_plan = state_of(t, f"db.{name}"), rows(t)
    by_partition: dict[object, set[str]] = {}
    for f in planned.files:
        by_partition.setdefault(f.partition_key, set()).add(f.path)
    assert len(by_partition) == 3 and all(len(paths) >= 2 for paths in by_partition.values())
    project = _project(tmp_path, rest_catalog, name)

    r = project.cli("validate")
    assert r.exit_code == 0, r.output
    start = rest_catalog.mark()
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    assert _authenticated(rest_catalog.since(start))
    assert project.table_plan()["version"] == planned.snapshot_id
    bins = project.bins()
    assert sorted(map(sorted, bins)) == sorted(map(sorted, by_partition.values()))  # one bin per partition
    planned_paths = {p for b in bins for p in b}

    append(t, 99)  # through the catalog, after planning: one new file in each partition
    t.refresh()
    appended = {f.path for f in state_of(t, f"db.{name}").files} - {f.path for f in planned.files}
    assert appended
    before = rows(t)

    start = rest_catalog.mark()
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    actions = project.table_plan()["actions"]
    assert [x["status"] for x in project.results()] == ["success"] * len(actions)
    applied = rest_catalog.since(start)
    assert _authenticated(applied) and [q for q in applied if q.method == "POST" and name in q.path]

    t = _catalog(rest_catalog).load_table(f"db.{name}")  # read back through a new client
    ops = operations_since(t, planned.snapshot_id)  # the append, then one replace per commit group
    assert ops[0] == "append" and len(ops) >= 2 and set(ops[1:]) == {"replace"}, ops
    assert rows(t) == before and rows(t, planned.snapshot_id) == at_plan
    after = {f.path for f in state_of(t, f"db.{name}").files}
    assert {f.path for f in planned.files} - after == planned_paths  # exactly the planned files removed
    assert appended <= after  # the file appended after planning untouched
    assert len(after - {f.path for f in planned.files} - appended) == len(bins)  # one output per bin
    assert leftovers(t) == []

    # each partition now holds its output and the appended file: the next plan takes exactly those two, and
    # after their apply the plan converges
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 2, r.output
    outputs = after - {f.path for f in planned.files} - appended
    assert {p for b in project.bins() for p in b} == outputs | appended
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output
    assert project.table_plan()["actions"] == []
    assert rows(_catalog(rest_catalog).load_table(f"db.{name}")) == before
    secret = CREDENTIAL.split(":")[1]
    assert not [p for p in (project.root / "target").rglob("*") if p.is_file() and secret in p.read_text(errors="replace")]


def _change(t: Table, change: str, path: str) -> None:
    """Another writer's change of the planned file ``path`` through the catalog: an overwrite keeping its
    rows in a new file, or pyiceberg's copy-on-write delete of one of its rows (which rewrites the file)."""
    if change == "overwrite":
        overwrite_file(t, path)
        return
    (task,) = t.scan(row_filter=EqualTo("id", 0)).plan_files()
    assert task.file.file_path == path
    t.delete(EqualTo("id", 0))


@pytest.mark.parametrize("when", ["before_apply", "while_rewriting"])
@pytest.mark.parametrize("change", ["overwrite", "delete"])
def test_a_change_through_the_rest_catalog_after_planning_makes_the_action_stale(
        rest_catalog: RestServer, tmp_path: Path, change: str, when: str) -> None:
    """Committed before the apply, the change is seen before anything is written; committed while the bin
    is being rewritten (at the crash point after its output, as a racing writer would), the commit's
    check against the catalog's current snapshot refuses it and the output is deleted."""
    name = f"stale_{change}_{when}"
    t = write_table(_catalog(rest_catalog), f"db.{name}", "unpartitioned")
    project = _project(tmp_path, rest_catalog, name)
    assert project.cli("plan").exit_code == 0
    ((first, *_),) = project.bins()
    if when == "before_apply":
        _change(t, change, first)

    def race(point: str) -> None:
        if point == "iceberg.outputs_written":
            _change(_catalog(rest_catalog).load_table(f"db.{name}"), change, first)

    previous = faults.set_hook(race if when == "while_rewriting" else None)
    try:
        r = project.cli("apply", str(project.plan_file))
    finally:
        faults.set_hook(previous)
    assert r.exit_code == 0, r.output  # a stale action is no failure: the next plan takes the table as it is
    assert [x["status"] for x in project.results()] == ["stale"], project.results()
    t = _catalog(rest_catalog).load_table(f"db.{name}")
    assert operations_since(t, project.table_plan()["version"]) == ["overwrite"]  # the change alone: nothing committed
    assert first not in {f.path for f in state_of(t, f"db.{name}").files}
    assert leftovers(t) == []


def test_expire_snapshots_through_the_rest_catalog_survives_an_append_racing_its_commit_and_converges(
        rest_catalog: RestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The expiry's commit requires every branch where it was checked: an append through the catalog right
    before compactor's commit moves ``main``, the server refuses the commit (409), and compactor reads the
    table again, checks it and commits: the planned snapshots are gone, the appended one and its rows stay,
    the file only the expired snapshots named is deleted; the plans after it converge."""
    name = "expire_race"
    t = write_table(_catalog(rest_catalog), f"db.{name}", "unpartitioned")
    gone = state_of(t, f"db.{name}").files[0].path
    overwrite_file(t, gone)
    append(t, 9)  # the snapshot kept: only the expired ones name ``gone`` (the overwrite's by a deleted entry)
    t = _catalog(rest_catalog).load_table(f"db.{name}")
    head = t.current_snapshot()
    assert head is not None
    old = sorted(s.snapshot_id for s in t.metadata.snapshots if s.snapshot_id != head.snapshot_id)
    time.sleep(1.1)  # every snapshot is older than the policy's 1s
    retention = ("    compaction: {enabled: false}\n    retention:\n      allow_unsafe_retention: true\n"
                 "      min_reader_lag: 1s\n      expire_snapshots: {enabled: true, older_than: 1s, retain_last: 1}\n")
    project = Project.make(tmp_path, name, profiles_text=rest_profiles(rest_catalog.uri, credential=CREDENTIAL),
                           policy_text=policy(name).split("    compaction:")[0] + retention)
    r = project.cli("plan")
    assert r.exit_code == 0, r.output
    (action,) = project.table_plan()["actions"]
    assert action["type"] == "expire_snapshots" and action["params"]["snapshots"] == old, action
    assert action["params"]["files"] == [gone]

    commit = expire_module._Expire.commit
    raced: list[bool] = []

    def racing(self: Any) -> None:
        if not raced:  # another writer appends right before compactor's commit
            append(_catalog(rest_catalog).load_table(f"db.{name}"), 7)
            raced.append(True)
        commit(self)

    monkeypatch.setattr(expire_module._Expire, "commit", racing)
    start = rest_catalog.mark()
    r = project.cli("apply", str(project.plan_file))
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in project.results()] == ["success"], project.results()
    commits = [q.status for q in rest_catalog.since(start) if q.method == "POST" and q.path.endswith(name)]
    assert commits == ["200", "409", "200"], commits  # the append, compactor's refused commit, its retry
    t = _catalog(rest_catalog).load_table(f"db.{name}")
    kept = [s.snapshot_id for s in t.metadata.snapshots]
    assert head.snapshot_id in kept and len(kept) == 2 and not set(old) & set(kept)
    assert sorted(r[0] for r in rows(t)) == sorted([*range(40), *range(90, 100), *range(70, 80)])  # every id once
    assert not Path(gone.removeprefix("file://")).exists()

    # the snapshot current at planning is now the older of two: the next plan expires it, then converges
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 2, r.output
    (action,) = project.table_plan()["actions"]
    assert action["params"]["snapshots"] == [head.snapshot_id], action
    assert project.cli("apply", str(project.plan_file)).exit_code == 0
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 0, r.output


def test_a_bearer_token_reaches_the_server_on_every_request_and_is_shown_nowhere(
        rest_catalog: RestServer, tmp_path: Path) -> None:
    name, token = "token", "tok-3c9d51"
    write_table(_catalog(rest_catalog), f"db.{name}", "identity_int")
    project = Project.make(tmp_path, name, policy_text=policy(name),
                           profiles_text=rest_profiles(rest_catalog.uri, token=token))
    start = rest_catalog.mark()
    r = project.cli("plan", "--detailed-exitcode")
    assert r.exit_code == 2 and token not in r.output, r.output
    calls = rest_catalog.since(start)
    assert calls and all(q.authorization == f"Bearer {token}" for q in calls), calls
    assert token not in project.plan_file.read_text()


def test_a_rest_catalog_that_does_not_answer_is_exit_1_with_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{s.getsockname()[1]}"
    project = Project.make(tmp_path, "t", policy_text=policy("t"), profiles_text=rest_profiles(uri))
    r = project.cli("plan")
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output, r.output
    (line,) = [ln for ln in r.output.splitlines() if "catalog 'cat'" in ln]
    assert uri in line, r.output
