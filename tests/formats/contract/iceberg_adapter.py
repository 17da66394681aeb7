"""The contract suite's Iceberg table: written by pyiceberg into a SqlCatalog on sqlite beside the lake (the
catalog the project's target declares), at the lake's table folder, identity-partitioned by the group; the
policy names it by catalog and identifier. Its metadata lists absolute file URIs (``Adapter.rel``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from compactor.formats.iceberg.faults import COMPACT_CRASH_POINTS
from tests.formats.contract.adapters import Adapter, rows_of

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table

CATALOG = "cat"
IDENTIFIER = "db.t"


def _root(table: Path) -> Path:
    """The folder holding the lake (the catalog's database lives there, outside the table)."""
    return table.parent.parent


class IcebergAdapter(Adapter):
    name = "iceberg"
    crash_points = COMPACT_CRASH_POINTS
    metadata_file = "metadata/00000-contract.metadata.json"
    policy = "    format: iceberg\n"

    def names(self, table: Path) -> str:
        return f"    catalog: {{name: {CATALOG}, namespace: db, table: t}}\n"

    def profiles(self, table: Path) -> str | None:
        root = _root(table)
        return ("default:\n  target: dev\n  outputs:\n    dev:\n      engine: local\n      catalogs:\n"
                f"        {CATALOG}: {{type: sql, uri: \"sqlite:///{root}/catalog.db\"}}\n")

    def _catalog(self, table: Path) -> SqlCatalog:
        from pyiceberg.catalog.sql import SqlCatalog

        root = _root(table)
        cat = SqlCatalog(CATALOG, uri=f"sqlite:///{root}/catalog.db", warehouse=(root / "warehouse").as_uri())
        cat.create_namespace_if_not_exists("db")
        return cat

    def _table(self, table: Path) -> Table:
        return self._catalog(table).load_table(IDENTIFIER)

    def write(self, table: Path, ids: Sequence[int], group: int) -> None:
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.transforms import IdentityTransform
        from pyiceberg.types import BinaryType, LongType, NestedField

        cat = self._catalog(table)
        if not cat.table_exists(IDENTIFIER):
            schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "v", LongType()),
                            NestedField(3, "pad", BinaryType()), NestedField(4, "p", LongType()))
            cat.create_table(IDENTIFIER, schema=schema, location=table.as_uri(),
                             partition_spec=PartitionSpec(PartitionField(4, 1000, IdentityTransform(), "p")))
        t = cat.load_table(IDENTIFIER)
        data = rows_of(ids).append_column("p", pa.array([group] * len(ids), pa.int64()))
        t.append(data.cast(t.schema().as_arrow()))

    def live(self, table: Path) -> frozenset[str]:
        t = self._table(table)
        return frozenset(self.rel(table, str(task.file.file_path)) for task in t.scan().plan_files())

    def referenced(self, table: Path) -> frozenset[str]:
        """Every data file a snapshot still in the metadata names (time travel reads replaced files)."""
        from compactor.formats.iceberg.references import referenced_paths

        return frozenset(self.rel(table, p) for p in referenced_paths(self._table(table)) if p.endswith(".parquet"))

    def conflict(self, table: Path, planned: str) -> None:
        """Another writer overwrites ``planned`` (its rows kept, in a new file)."""
        from tests.iceberg.tables import overwrite_file

        t = self._table(table)
        path = next(str(task.file.file_path) for task in t.scan().plan_files()
                    if self.rel(table, str(task.file.file_path)) == planned)
        overwrite_file(t, path)
