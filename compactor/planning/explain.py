"""The planner's words for what it leaves alone (PURE): per skip kind, one line of why and the next step a
user can take. `plan` prints them, `inspect` and `report` repeat them: one story for a table.

The why is the planner's own message (the first skip of a kind, with how many partitions share it); the
next step follows from the reason (a format's own reason brings its next step: planning/vocabulary.py)
and, for a table only another engine can compact (a ``needs`` detail naming a format's remedy), from the
engine and the profile's targets (``Advice``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from compactor.planning.plan import Skip, SkipReason, TablePlan
from compactor.planning.vocabulary import remedy, skip_kind

#: Skip.details key of an ``unsupported`` skip another engine would not have: its value names the remedy
#: (a format registers it: what does the work, on which engine, with which setting)
NEEDS = "needs"

#: reasons that need nothing from the user: the planner will act by itself when there is something to do
_NOTHING_TO_DO: dict[str, str] = {
    SkipReason.ALREADY_COMPACT: "nothing to do",
    SkipReason.NO_FILES: "nothing to do",
    SkipReason.OUTSIDE_WHERE: "left out by compaction.partitions.where; nothing to do",
    SkipReason.OUTSIDE_LOOKBACK: "left out by compaction.partitions.lookback; nothing to do",
    SkipReason.SKIP_LATEST: "left out by compaction.partitions.skip_latest; nothing to do",
}


@dataclass(frozen=True)
class Advice:
    """What the next steps may name: the target the plan was made for, a target of the same profile that
    runs the spark engine (None: the profile has none), and the project folder as the user gave it."""

    target: str | None = None
    spark_target: str | None = None
    project_dir: str | None = None

    def command(self, *args: str, target: str | None = None) -> str:
        words = ["compactor", *args]
        if self.project_dir not in (None, "", "."):
            words += ["--project-dir", str(self.project_dir)]
        if target:
            words += ["--target", target]
        return " ".join(words)


@dataclass(frozen=True)
class SkipLine:
    """One skip kind of a table: how many partitions (or the table), why, and the next step."""

    reason: str
    count: int
    why: str
    next_step: str
    #: the first partition it names, and how many more share the reason ("" for the whole table)
    where: str = ""

    def __str__(self) -> str:
        return f"{self.reason} x{self.count}{f' ({self.where})' if self.where else ''}: {self.why}; {self.next_step}"


def _where(skip: Skip) -> str:
    if not skip.partition:
        return ""
    return "/".join(f"{k}={v if v is not None else 'null'}" for k, v in skip.partition.items())


def next_step(skip: Skip, engine: str, advice: Advice = Advice()) -> str:
    """What the user can do about ``skip`` (``engine``: the one the plan was made for)."""
    if skip.reason in _NOTHING_TO_DO:
        return _NOTHING_TO_DO[skip.reason]
    kind = skip_kind(skip.reason)
    if kind is not None:
        return kind.next_step
    details: Mapping[str, object] = skip.details
    if skip.reason == SkipReason.UNSUPPORTED:
        r = remedy(details.get(NEEDS))
        if r is not None:
            if engine != r.engine:
                if advice.spark_target and r.engine == "spark":
                    return (f"use the spark engine ({r.by} compacts it): "
                            f"`{advice.command('plan', target=advice.spark_target)}`")
                return (f"use the {r.engine} engine ({r.by} compacts it): add a target with `engine: {r.engine}` "
                        f"to profiles.yml, then `{advice.command('plan', target='<that target>')}`")
            return f"set {r.setting} so that {r.by} compacts it"
        return "compactor does not compact this kind of table: leave it, or take it out of the selection (--exclude)"
    if skip.reason == SkipReason.BELOW_MIN_INPUT_FILES:
        return (f"it is compacted once it holds {details.get('min_input_files', 'min_input_files')} small files; "
                "lower compaction.triggers.min_input_files to compact it sooner")
    if skip.reason == SkipReason.BELOW_MIN_FILE_REDUCTION:
        return "lower compaction.triggers.min_file_reduction to compact it anyway"
    if skip.reason == SkipReason.BELOW_MIN_SMALL_FILE_RATIO:
        return "lower compaction.triggers.min_small_file_ratio to compact it anyway"
    if skip.reason == SkipReason.QUIET_PERIOD:
        return "plan again from then" if details.get("eligible_at") else "plan again once the writer is idle"
    if skip.reason == SkipReason.BUDGET:
        return "the next run takes it (or raise compaction.budget)"
    if skip.reason == SkipReason.DISABLED:
        return "enable it in the policy to compact it"
    if skip.reason == SkipReason.INVALID_POLICY:
        return "fix the policy where the message says"
    if skip.reason == SkipReason.UNREADABLE:
        return f"fix what the message says, then `{advice.command('plan', target=advice.target)}`"
    return "see `compactor plan --partitions`"


def skip_lines(skips: Sequence[Skip], engine: str, advice: Advice = Advice()) -> list[SkipLine]:
    """One line per skip kind, most frequent first (as the plan's summary counts them): the first skip's
    message as the why (naming its partition and how many more share the reason), and its next step."""
    by_reason: dict[str, list[Skip]] = {}
    for s in skips:
        by_reason.setdefault(s.reason, []).append(s)
    out = []
    for reason, group in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        first = group[0]
        where = _where(first)
        if where and len(group) > 1:
            where += f" and {len(group) - 1} more"
        out.append(SkipLine(reason, len(group), first.message or str(reason), next_step(first, engine, advice), where))
    return out


def table_verdict(table: TablePlan, advice: Advice = Advice()) -> list[str]:
    """The plan for one table in a few lines: its error, its actions, or why it changes nothing; each skip
    kind with its next step. What `inspect` and `report` say about a table under a policy."""
    if table.error:
        return [f"the plan: error: {table.error}"]
    lines = []
    if table.actions:
        kinds: dict[str, int] = {}
        for a in table.actions:
            kinds[a.type] = kinds.get(a.type, 0) + 1
        lines.append("the plan: " + ", ".join(f"{k} x{n}" for k, n in kinds.items())
                     + f" (files {table.files_before} -> {table.files_after}); "
                     f"`{advice.command('plan', target=advice.target)}` then `compactor apply`")
    else:
        lines.append("the plan: no change")
    lines += [f"skipped {line}" for line in skip_lines(table.skipped, table.engine, advice)]
    return lines
