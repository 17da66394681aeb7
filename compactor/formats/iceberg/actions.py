"""Iceberg's plan words (PURE, imported by planning/vocabulary.py when one is first met): the shared
``compact`` action it runs, and its own skip reasons: the files the local engine (pyiceberg, no JVM) leaves
alone, each naming why and that the spark engine does it; and its retention actions and their skip reasons
(retention_actions.py); and its own maintenance actions, rewriting position delete files and manifests, and their
skip reasons (maintenance_actions.py)."""

from __future__ import annotations

from enum import StrEnum

from compactor.formats.iceberg.maintenance_actions import MAINTENANCE_ACTIONS, MAINTENANCE_SKIPS
from compactor.formats.iceberg.retention_actions import RETENTION_ACTIONS, RETENTION_SKIPS
from compactor.planning.actions import CompactAction
from compactor.planning.skips import Remedy, SkipKind
from compactor.planning.vocabulary import register

#: what every local-engine skip says of the spark engine
LATER = "the spark engine compacts them (a target whose engine is spark: Iceberg's own rewrite reads them)"
#: ``compaction.method: optimize``: what it runs, and that only the spark engine runs it
NATIVE_NEEDS_SPARK = ("compaction.method optimize runs Iceberg's own rewrite_data_files, which needs the spark "
                      "engine (a Spark session with Iceberg's runtime)")
#: what ``method: optimize`` does beyond the plan (each action's reason, the apply outcome's note, the docs)
NATIVE_SEMANTICS = ("Iceberg's rewrite_data_files rewrites each planned partition as it finds it at apply: small "
                    "files appended to it since planning are rewritten too")


class IcebergSkipReason(StrEnum):
    """Why files of an Iceberg table are left alone (besides the reasons every format shares)."""

    #: delete files apply to them: pyiceberg cannot remove delete files, and compactor leaves none live that
    #: only rewritten files referenced
    DELETE_FILES = "iceberg_delete_files"
    #: they are in an older partition spec: pyiceberg adds files to the current spec only
    OLDER_SPEC = "iceberg_older_spec"
    #: they are ORC or Avro files: the local engine reads and verifies Parquet only
    NOT_PARQUET = "iceberg_not_parquet"


#: the ``needs`` detail of the local engine's skip of ``method: optimize``: the spark engine's native rewrite
NATIVE_REWRITE = "iceberg_rewrite_data_files"

register("iceberg", shared=(CompactAction,), actions=(*RETENTION_ACTIONS, *MAINTENANCE_ACTIONS),
         remedies={NATIVE_REWRITE: Remedy("spark", "Iceberg's rewrite_data_files", "compaction.method: optimize")},
         skips=(SkipKind(IcebergSkipReason.DELETE_FILES, f"apply with the spark engine: {LATER}"),
                SkipKind(IcebergSkipReason.OLDER_SPEC, f"apply with the spark engine: {LATER}"),
                SkipKind(IcebergSkipReason.NOT_PARQUET, f"apply with the spark engine: {LATER}"), *RETENTION_SKIPS,
                *MAINTENANCE_SKIPS))
