"""Planning reads the newest commits while delta-rs loads the table (newest_window): the scan for rows
live twice must find exactly what it finds without that head start, also when commits land in between,
and a table whose log cannot be listed gives no head start rather than an error. The whole scan (the
replay too) runs beside the load (newest_duplicate_facts), and is taken only at the version the state was
read at. A window where no commit may be a rewrite is not parsed (may_rewrite): it holds no anomaly."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from compactor.formats.delta import FORMAT, duplicate_facts, newest_duplicate_facts
from compactor.formats.delta.duplicates.detection import detect, may_rewrite, newest_window, read_window
from compactor.formats.delta.read.facts import DuplicateFacts, delta_facts
from compactor.models.table import TableLocation
from compactor.policy.model import TablePolicy


def _append(path: Path, n: int) -> None:
    write_deltalake(str(path), pa.table({"id": pa.array(range(n), pa.int64())}), mode="append")


def test_prefetched_commits_are_the_commits_read_and_later_ones_are_read_as_usual(tmp_path: Path) -> None:
    for i in range(4):
        _append(tmp_path, i + 1)
    DeltaTable(str(tmp_path)).optimize.compact()  # a rewrite: the window is parsed
    table = TableLocation(str(tmp_path))
    known = newest_window(table).commits
    assert known is not None and sorted(known) == [0, 1, 2, 3, 4]
    for _ in range(3):  # commits land after the head start
        _append(tmp_path, 10)
    DeltaTable(str(tmp_path)).optimize.compact()  # a rewrite after it: its removes must be seen
    latest = DeltaTable(str(tmp_path)).version()
    with_head_start = read_window(table, until=latest, known=known)
    plain = read_window(table, until=latest)
    assert [c.version for c in with_head_start] == list(range(latest + 1))
    assert [(c.version, c.adds, c.removes, c.info) for c in with_head_start] == \
        [(c.version, c.adds, c.removes, c.info) for c in plain]
    a, b = detect(table, version=latest, known=known), detect(table, version=latest)
    assert (a.first_version, a.version, [r.version for r in a.history]) == \
        (b.first_version, b.version, [r.version for r in b.history])


def test_a_window_ending_before_the_head_start_ignores_the_newer_commits(tmp_path: Path) -> None:
    for _ in range(5):
        _append(tmp_path, 2)
    DeltaTable(str(tmp_path)).optimize.compact()
    known = newest_window(TableLocation(str(tmp_path))).commits
    window = read_window(TableLocation(str(tmp_path)), until=2, known=known)
    assert [c.version for c in window] == [0, 1, 2]


def test_no_log_to_list_gives_no_head_start(tmp_path: Path) -> None:
    assert newest_window(TableLocation(str(tmp_path / "missing"))) is None


def _duplicated(tmp_path: Path) -> Path:
    """Rows live twice: two delta-rs compactions of the same files from one snapshot (issue 18's race)."""
    t = tmp_path / "t"
    for i in range(4):
        _append(t, i + 1)
    first, second = DeltaTable(str(t)), DeltaTable(str(t))
    first.optimize.compact()
    second.optimize.compact()
    return t


def test_the_scan_run_beside_the_load_finds_what_the_scan_after_it_finds(tmp_path: Path) -> None:
    t = _duplicated(tmp_path)
    table = TableLocation(str(t))
    version, early = newest_duplicate_facts(table)
    assert version == DeltaTable(str(t)).version()
    after = duplicate_facts(table, version)
    assert [r.later_version for r in early.reports] == [version]  # the race is found
    assert early == after
    state = FORMAT.read_state(table, TablePolicy(name="t", path=str(t)))
    assert delta_facts(state).duplicates == after


def test_a_head_start_at_another_version_than_the_state_read_is_not_taken(tmp_path: Path, monkeypatch) -> None:
    """A commit that lands between the log listing and delta-rs' load: the scan runs again at the version
    the state was read at (simulated by a head start one version ahead, holding a scan error)."""
    import compactor.formats.delta as delta

    t = _duplicated(tmp_path)
    table = TableLocation(str(t))
    version = DeltaTable(str(t)).version()
    monkeypatch.setattr(delta, "newest_duplicate_facts",
                        lambda _t: (version + 1, DuplicateFacts(scan_error="a head start at another version")))
    state = FORMAT.read_state(table, TablePolicy(name="t", path=str(t)))
    assert state.version == version
    assert delta_facts(state).duplicates == duplicate_facts(table, version)
    assert delta_facts(state).duplicates.scan_error is None
    monkeypatch.setattr(delta, "newest_duplicate_facts",
                        lambda _t: (version, DuplicateFacts(scan_error="taken at the same version")))
    state = FORMAT.read_state(table, TablePolicy(name="t", path=str(t)))
    assert delta_facts(state).duplicates.scan_error == "taken at the same version"  # the test can fail


def test_a_log_that_cannot_be_listed_gives_no_early_scan(tmp_path: Path) -> None:
    assert newest_duplicate_facts(TableLocation(str(tmp_path / "missing"))) is None


def test_a_window_of_data_changes_is_not_parsed_and_holds_no_anomaly(tmp_path: Path) -> None:
    for i in range(3):
        _append(tmp_path, i + 1)
    dt = DeltaTable(str(tmp_path))
    dt.delete("id = 0")  # a data change with removes
    table = TableLocation(str(tmp_path))
    window = newest_window(table)
    assert window is not None and window.version == dt.version() and window.commits is None
    version, facts = newest_duplicate_facts(table)
    assert version == window.version and facts == DuplicateFacts() == duplicate_facts(table, version)
    _append(tmp_path, 2)
    assert DeltaTable(str(tmp_path)).optimize.compact()["numFilesRemoved"] == 2  # a rewrite: the window is parsed
    window = newest_window(table)
    assert window.commits is not None and sorted(window.commits) == list(range(window.version + 1))


@pytest.mark.parametrize("line, rewrite", [
    ('{"add":{"path":"a","dataChange":true}}', False),
    ('{"add":{"path":"a","size":1}}', False),  # no key: a data change
    ('{"add": {"path": "a", "dataChange": true}}', False),  # Python's json spacing
    ('{"add":{"path":"a","dataChange" :\t\r true}}', False),
    ('{"add":{"path":"a","dataChange":false}}', True),
    ('{"add": {"path": "a", "dataChange" : false}}', True),
    ('{"add":{"path":"a","dataChange":\tnull}}', True),  # null reads as false
    ('{"add":{"path":"a","dataChange":0}}', True),
    ('{"add":{"path":"a","dataChange":""}}', True),
    ('{"add":{"path":"a","dataChange":true,"dataChange":false}}', True),  # the last key wins
    ('{"add":{"path":"a","data\\u0043hange":false}}', True),  # an escaped key
    ('{"add":{"path":"a","dataChange":true,"stats":"{\\"dataChange\\":false}"}}', False),  # inside a string
    ('{"commitInfo":{"operationMetrics":{"dataChange":false}}}', True),  # anywhere: conservative
])
def test_may_rewrite_is_true_wherever_an_action_may_say_it_changes_no_data(line: str, rewrite: bool) -> None:
    assert may_rewrite(line + "\n") is rewrite
    if not rewrite:  # what the parser reads agrees
        from compactor.formats.delta.read.log import parse_commit

        c = parse_commit(1, line + "\n")
        assert not c.adds or c.data_change


def test_a_rewrite_far_back_in_the_window_has_the_newer_commits_read_again(tmp_path: Path) -> None:
    """The window is read newest first and commits that cannot be a rewrite are dropped until one may be:
    a rewrite 40 commits back makes the whole window parsed, the dropped commits read again."""
    for i in range(3):
        _append(tmp_path, i + 1)
    assert DeltaTable(str(tmp_path)).optimize.compact()["numFilesRemoved"] == 3
    for _ in range(40):
        _append(tmp_path, 1)
    table = TableLocation(str(tmp_path))
    latest = DeltaTable(str(tmp_path)).version()
    window = newest_window(table)
    assert window.version == latest and window.commits is not None
    assert sorted(window.commits) == list(range(latest + 1))
    plain = read_window(table, until=latest)
    assert [(c.version, c.adds, c.removes, c.info) for c in plain] == \
        [(c.version, c.adds, c.removes, c.info) for c in (window.commits[v] for v in sorted(window.commits))]
    small = newest_window(table, horizon=20)  # the rewrite is outside a 20-commit window
    assert small.version == latest and small.commits is None
