"""The duplicate scan applies an append (a commit that only adds and changes data) with whole-dict
updates (formats/delta/duplicates/lineage.py ``_append``). Its lineage must equal the add-by-add replay's for
any sequence of commits: appends, RESTORE-style re-adds of removed files, rewrites that remove a file
twice or re-add one, repairs naming anomalies. The fuzzer compares the two on real tables after every
operation; here hypothesis drives arbitrary commit sequences over a few paths, where those cases are dense."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.formats.delta.duplicates.lineage import REPAIR_COPIES, REPAIR_OF, _analyse
from compactor.formats.delta.read.log import Commit, LoggedAction

PATHS = [f"p={i % 2}/f{i}.parquet" for i in range(6)]


@st.composite
def commits(draw: st.DrawFn) -> list[Commit]:
    out = []
    for v in range(draw(st.integers(1, 12))):
        data_change = draw(st.booleans())
        adds = draw(st.lists(st.sampled_from(PATHS), max_size=4, unique=True))
        removes = draw(st.lists(st.sampled_from(PATHS), max_size=3, unique=True))
        info: dict = {"operation": "RESTORE" if data_change and not removes else "WRITE"}
        if not data_change and draw(st.booleans()):  # a repair naming earlier versions, maybe with copies
            info[REPAIR_OF] = ",".join(str(x) for x in draw(st.lists(st.integers(0, max(0, v - 1)), min_size=1, max_size=2)))
            if adds and draw(st.booleans()):
                info[REPAIR_COPIES] = json.dumps({adds[0]: draw(st.sampled_from(PATHS))})
        unparsed = draw(st.booleans())  # both kinds of action value the log reader produces

        def action(kind: str, p: str, dc: bool = data_change, raw: bool = unparsed) -> object:
            body = {"path": p, "dataChange": dc, "size": 10, "stats": json.dumps({"numRecords": 5})}
            return LoggedAction(json.dumps({kind: body}, separators=(",", ":")), kind) if raw else body

        out.append(Commit(v, adds={p: action("add", p) for p in adds},
                          removes={p: action("remove", p) for p in removes}, info=info))
    return out


@settings(max_examples=3000, deadline=None)
@given(commits())
def test_bulk_appends_replay_like_add_by_add(history: list[Commit]) -> None:
    assert _analyse(history) == _analyse(history, bulk_appends=False)


def test_a_restore_re_adding_a_removed_file_is_replayed_alike() -> None:
    """The case the bulk path must get right: an adds-only commit bringing back a file a rewrite removed
    twice (it carries that anomaly's extra rows), next to a fresh file."""
    a, b, c = PATHS[:3]
    history = [
        Commit(0, adds={a: {"path": a}, b: {"path": b}}),
        Commit(1, adds={c: {"path": c, "dataChange": False}}, removes={a: {"path": a, "dataChange": False}}),
        Commit(2, adds={"x.parquet": {"path": "x.parquet", "dataChange": False}},
               removes={a: {"path": a, "dataChange": False}}),  # removes a again: double_remove
        Commit(3, adds={a: {"path": a}, "y.parquet": {"path": "y.parquet"}}),  # RESTORE-like re-add
    ]
    bulk, reference = _analyse(history), _analyse(history, bulk_appends=False)
    assert bulk == reference
    assert a in bulk.live and a not in bulk.removed and bulk.produced_by[a] == 3
    assert bulk.new_files[3] == ("y.parquet",) and [x.kind for x in bulk.anomalies] == ["double_remove"]
