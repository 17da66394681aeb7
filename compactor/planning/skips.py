"""Skips: what a plan leaves alone, and why. The reasons every format shares are ``SkipReason``; a format
adds its own (``SkipKind``, with the next step plan prints for it) through planning/vocabulary.py, and the
plan schema's enum of reasons is the two together."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class SkipReason(StrEnum):
    """Why a table or partition is left alone, whatever its format (README lists every reason)."""

    BELOW_MIN_INPUT_FILES = "below_min_input_files"  # fewer candidate files than triggers.min_input_files
    BELOW_MIN_FILE_REDUCTION = "below_min_file_reduction"  # files now - files after <= triggers.min_file_reduction
    BELOW_MIN_SMALL_FILE_RATIO = "below_min_small_file_ratio"
    ALREADY_COMPACT = "already_compact"  # no candidate files, or no bin with 2+ files
    QUIET_PERIOD = "quiet_period"  # files modified within compaction.quiet_period
    OUTSIDE_WHERE = "outside_where"  # partition not matched by partitions.where
    OUTSIDE_LOOKBACK = "outside_lookback"
    SKIP_LATEST = "skip_latest"
    BUDGET = "budget"  # cut by max_bytes_per_run / max_partitions_per_run
    DISABLED = "disabled"  # table or compaction disabled
    UNREADABLE = "unreadable"  # the table could not be read
    UNSUPPORTED = "unsupported"  # the engine cannot safely rewrite this table
    NO_FILES = "no_files"
    INVALID_POLICY = "invalid_policy"  # the policy does not fit the table (e.g. where on a non-partition column)


#: one number (or setting) behind a skip reason
SkipDetail = int | float | str | bool | None


@dataclass(frozen=True)
class Skip:
    """A table or partition (``partition`` None: the whole table) left alone, and why: a ``SkipReason`` or
    a reason the table's format registered."""

    reason: str
    partition: Mapping[str, str | None] | None = None
    #: the numbers behind the reason, e.g. {"candidate_files": 3, "min_input_files": 5}
    details: Mapping[str, SkipDetail] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class SkipKind:
    """A skip reason a format adds: its code in plans, and the next step plan prints for it."""

    reason: str
    next_step: str


@dataclass(frozen=True)
class Remedy:
    """What a skip whose ``needs`` detail names it asks of the user (planning/explain.py): the engine that
    can do the work, what of it does it, and the policy setting that lets it."""

    engine: str
    by: str
    setting: str
