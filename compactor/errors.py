"""One exception root for everything compactor raises on purpose.

The CLI turns a CompactorError into a clear message and an exit code; anything else is a bug and
is shown as an internal error (with a traceback only under --debug).
"""

from __future__ import annotations

from typing import Any


class CompactorError(Exception):
    """Base class of every error compactor raises deliberately."""

    #: short machine-readable code, used in JSON output
    code = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


class UsageError(CompactorError):
    """Bad command-line input: unknown option values, missing files, bad --vars."""

    code = "usage"


class EngineUnavailableError(UsageError):
    """The target's engine cannot start: no Java for a local Spark, no Spark Connect server answering at
    ``spark.remote``, a missing client library. Apply stops at once (every action would fail the same way)
    with this one message, instead of failing action after action."""

    code = "engine_unavailable"


class ProjectError(CompactorError):
    """compactor.yml or profiles.yml is missing or invalid."""

    code = "project"


class PolicyError(CompactorError):
    """Policies failed validation; carries every diagnostic."""

    code = "policy"

    def __init__(self, message: str, diagnostics: list[Any] | None = None, *, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.diagnostics = list(diagnostics or [])


class TableReadError(CompactorError):
    """A table or log could not be read (missing, not Delta, corrupt, unsupported protocol)."""

    code = "unreadable"


class CatalogError(CompactorError):
    """A catalog could not be reached or does not hold what a policy names."""

    code = "catalog"


class UnsupportedFormatError(CompactorError):
    """A table a catalog names is in a format compactor does not plan (an Iceberg table, say): the plan
    lists it as skipped (unsupported) with this reason; it fails nothing."""

    code = "unsupported_format"


class PlanError(CompactorError):
    """A plan file is unreadable, of an unsupported schema version, or does not match the project."""

    code = "plan"


class StalePlanError(PlanError):
    """The table changed since the plan was made so that an action no longer applies."""

    code = "stale"


class ApplyError(CompactorError):
    """An action failed while being applied."""

    code = "apply"


class VerificationError(ApplyError):
    """Rows removed != rows added, or a written file does not match what was committed."""

    code = "verification_failed"


class LeaseError(ApplyError):
    """Another process holds the table's compaction lease."""

    code = "lease_held"


class UnsupportedTableError(ApplyError):
    """The table uses a feature the chosen engine cannot write safely."""

    code = "unsupported"


class SinkGuardError(ApplyError):
    """A file-sink compaction was refused because a guard (writer running, readers) failed."""

    code = "sink_guard"
